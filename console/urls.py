from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from console.metrics import metrics_view
from issuance.delivery.views import download
from issuance.issuers.crl import crl_view
from issuance.solvers.http01_views import acme_challenge

# 503 for errors that mean the database is unavailable (console.unavailable).
handler400 = "console.unavailable.bad_request"
handler500 = "console.unavailable.server_error"

urlpatterns = [
    path(".well-known/acme-challenge/<str:token>", acme_challenge, name="acme-challenge"),
    # Public, like the HTTP-01 answers: relying parties fetch CRLs without an account.
    path("crl/<str:name>.crl", crl_view, name="crl"),
    # Scoped download tokens only (issuance/delivery/views.py); the agent fetches here.
    path("download/<str:name>/<str:filename>", download, name="download"),
    path("admin/", admin.site.urls),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/bootstrap/", include("issuance.bootstrap.urls")),
    path("", include("issuance.api.urls")),
    path("", include("console.web.urls")),
]
