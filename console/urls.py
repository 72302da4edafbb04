from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from console.metrics import metrics_view
from console.web.api_docs import ApiDocsView
from issuance.acme.solvers.http01.views import acme_challenge
from issuance.delivery.views import download
from issuance.issuers.ca_crl import crl_view

# 503 for errors that mean the database is unavailable (console.unavailable).
handler400 = "console.unavailable.bad_request"
handler500 = "console.unavailable.server_error"

urlpatterns = [
    path(".well-known/acme-challenge/<str:token>", acme_challenge, name="acme-challenge"),
    # Public, like the HTTP-01 answers: relying parties fetch CRLs without an account.
    path("crl/<str:name>.crl", crl_view, name="crl"),
    # Scoped download tokens only (issuance/delivery/views.py); the agent fetches here.
    path("download/<str:name>/<str:filename>", download, name="download"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/bootstrap/", include("issuance.bootstrap.urls")),
    # A console page (navigation, session) under /api/: before the API's routes, whose last
    # one answers 404 for every other /api/ path.
    path("api/docs/", ApiDocsView.as_view(), name="api-docs"),
    path("", include("issuance.api.urls")),
    path("", include("console.web.urls")),
]

if settings.ENABLE_DJANGO_ADMIN:
    # Off by default (docs/security.md); when on, behind the console's sign-in and second
    # factor (console/admin_site.py).
    urlpatterns.insert(3, path("admin/", admin.site.urls))
