"""REST API routes: one router under /api/v1/, the OpenAPI schema at /api/schema/."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import DefaultRouter

from issuance.api.certificaterequests import CertificateRequestViewSet
from issuance.api.certificates import CertificateViewSet
from issuance.api.challenges import ChallengeViewSet
from issuance.api.clusters import ClusterViewSet
from issuance.api.downloadtokens import DownloadTokenViewSet
from issuance.api.errors import not_found
from issuance.api.events import EventViewSet
from issuance.api.issuancewebhooks import IssuanceWebhookViewSet, WebhookDeliveryViewSet
from issuance.api.issuers import IssuerViewSet
from issuance.api.mirrored import routes as mirrored_routes
from issuance.api.notifications import NotificationChannelViewSet
from issuance.api.orders import OrderViewSet
from issuance.api.scheduler import SchedulerView
from issuance.api.stats import StatsView
from issuance.api.tokens import ObtainTokenView

router = DefaultRouter()
router.register("issuers", IssuerViewSet, basename="issuer")
router.register("certificates", CertificateViewSet, basename="certificate")
router.register("certificaterequests", CertificateRequestViewSet, basename="certificaterequest")
router.register("orders", OrderViewSet, basename="order")
router.register("challenges", ChallengeViewSet, basename="challenge")
router.register("events", EventViewSet, basename="event")
# issuance-webhooks
router.register("issuance-webhooks", IssuanceWebhookViewSet, basename="issuancewebhook")
router.register("issuance-webhook-deliveries", WebhookDeliveryViewSet, basename="webhookdelivery")
router.register("downloadtokens", DownloadTokenViewSet, basename="downloadtoken")
router.register(
    "notification-channels", NotificationChannelViewSet, basename="notification-channel"
)
# cert-manager cluster mode: clusters, their mirrored objects and the actions queued on them.
router.register("clusters", ClusterViewSet, basename="cluster")
for prefix, viewset, basename in mirrored_routes():
    router.register(prefix, viewset, basename=basename)

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/v1/scheduler/", SchedulerView.as_view(), name="api-scheduler"),
    path("api/v1/stats/", StatsView.as_view(), name="api-stats"),
    path("api/v1/token/", ObtainTokenView.as_view(), name="api-token"),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    re_path(r"^api/(?P<path>.*)$", not_found),  # last: nothing above matched
]
