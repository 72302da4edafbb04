from __future__ import annotations

from django.urls import URLPattern, path

from issuance.bootstrap.views import BootstrapRequestDetail, BootstrapRequestList

urlpatterns: list[URLPattern] = [
    path("certificaterequests/", BootstrapRequestList.as_view(), name="bootstrap-requests"),
    path(
        "certificaterequests/<str:name>/",
        BootstrapRequestDetail.as_view(),
        name="bootstrap-request",
    ),
]
