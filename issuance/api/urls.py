"""REST API routes: one router under /api/v1/, the OpenAPI schema at /api/schema/."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path, re_path
from drf_spectacular.views import SpectacularAPIView
from rest_framework import routers
from rest_framework.routers import DefaultRouter

from issuance.api.apitokens import ApiTokenViewSet
from issuance.api.certificaterequests import CertificateRequestViewSet
from issuance.api.certificates import CertificateViewSet
from issuance.api.challenges import ChallengeViewSet
from issuance.api.clusters import ClusterViewSet
from issuance.api.dnstest import IssuerDnsTestViewSet
from issuance.api.downloadtokens import DownloadTokenViewSet
from issuance.api.endpoints import EndpointViewSet
from issuance.api.errors import not_found
from issuance.api.events import EventViewSet
from issuance.api.issuancewebhooks import IssuanceWebhookViewSet, WebhookDeliveryViewSet
from issuance.api.issuers import IssuerViewSet
from issuance.api.mirrored import routes as mirrored_routes
from issuance.api.notifications import NotificationChannelViewSet, NotificationRuleViewSet
from issuance.api.obtain_token import ObtainTokenView
from issuance.api.oidc_mapping import GroupRulesViewSet
from issuance.api.orders import OrderViewSet
from issuance.api.scheduler import SchedulerView
from issuance.api.signinlocks import SignInLockViewSet
from issuance.api.stats import StatsView
from issuance.api.users import UserViewSet


class ApiRootView(routers.APIRootView):
    """/api/v1/: the index of the API's resources (the browsable API's home)."""

    resource = "api-root"  # its row of the permission table (issuance.access.permissions)


router = DefaultRouter()
router.APIRootView = ApiRootView
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
# The requesting user's own API tokens (the console's /account/tokens/).
router.register("tokens", ApiTokenViewSet, basename="apitoken")
router.register("users", UserViewSet, basename="user")  # the console's Users page (admin)
router.register("signin-locks", SignInLockViewSet, basename="signin-lock")  # Sign-in locks
router.register(
    "notification-channels", NotificationChannelViewSet, basename="notification-channel"
)
# Top level, each rule naming its channel (issuance/api/notifications.py says why).
router.register("notification-rules", NotificationRuleViewSet, basename="notification-rule")
# cert-manager cluster mode: clusters, their mirrored objects and the actions queued on them.
router.register("clusters", ClusterViewSet, basename="cluster")
for prefix, viewset, basename in mirrored_routes():
    router.register(prefix, viewset, basename=basename)

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/v1/scheduler/", SchedulerView.as_view(), name="api-scheduler"),
    path("api/v1/stats/", StatsView.as_view(), name="api-stats"),
    path("api/v1/token/", ObtainTokenView.as_view(), name="api-token"),
    # Single sign-on's group rules: one document, read and replaced whole (admin).
    path(
        "api/v1/sso/group-rules/",
        GroupRulesViewSet.as_view({"get": "retrieve", "put": "replace"}),
        name="api-sso-group-rules",
    ),
    # The issuers page's "Test DNS" (a view of its own: issuers.py is the resource's CRUD).
    path(
        "api/v1/issuers/<str:name>/test-dns/",
        IssuerDnsTestViewSet.as_view({"post": "test_dns"}),
        name="api-issuer-test-dns",
    ),
    # A certificate's endpoints and "Check now" (issuance/api/endpoints.py).
    path(
        "api/v1/certificates/<str:name>/endpoints/",
        EndpointViewSet.as_view({"get": "list", "post": "create"}),
        name="api-certificate-endpoints",
    ),
    path(
        "api/v1/certificates/<str:name>/endpoints/<int:pk>/",
        EndpointViewSet.as_view({"delete": "destroy"}),
        name="api-certificate-endpoint",
    ),
    path(
        "api/v1/certificates/<str:name>/check-endpoints/",
        EndpointViewSet.as_view({"post": "check"}),
        name="api-certificate-check-endpoints",
    ),
    path("api/v1/", include(router.urls)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    re_path(r"^api/(?P<path>.*)$", not_found),  # last: nothing above matched
]
