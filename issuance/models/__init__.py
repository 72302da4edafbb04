"""One module per resource; import from here."""

from issuance.models.acmeserver import AcmeServer
from issuance.models.apitoken import ApiToken
from issuance.models.base import ImmutableSpecError, validate_resource_name
from issuance.models.bootstraptoken import BootstrapToken
from issuance.models.bulkaction import BulkAction, BulkItem, BulkKind, ItemState
from issuance.models.certificate import Certificate, CertificateState
from issuance.models.certificaterequest import Approval, CertificateRequest, RequestState
from issuance.models.challenge import (
    FINAL_CHALLENGE_STATES,
    Challenge,
    ChallengeState,
    ChallengeType,
)
from issuance.models.cluster import Cluster, ClusterState
from issuance.models.clusteraction import ClusterAction, ClusterActionKind, ClusterActionState
from issuance.models.clusterevent import ClusterEvent
from issuance.models.clusterresource import ClusterResource, MirroredKind
from issuance.models.downloadtoken import DownloadToken
from issuance.models.event import Event
from issuance.models.issuancewebhook import (
    DeliveryEvent,
    IssuanceWebhook,
    WebhookDelivery,
    WebhookDeliveryState,
)
from issuance.models.issuer import Issuer, IssuerKind
from issuance.models.kubecsr import KubeCSR
from issuance.models.notification import (
    DeliveryState,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.models.order import FINAL_ORDER_STATES, Order, OrderState
from issuance.models.owner import certificate_name_of
from issuance.models.revocation import REASONS, Revocation, RevocationState
from issuance.models.rolescope import RoleScope
from issuance.models.secret import Secret
from issuance.models.secretexport import SecretExport

__all__ = [
    "FINAL_CHALLENGE_STATES",
    "FINAL_ORDER_STATES",
    "REASONS",
    "AcmeServer",
    "ApiToken",
    "Approval",
    "BootstrapToken",
    "BulkAction",
    "BulkItem",
    "BulkKind",
    "Certificate",
    "CertificateRequest",
    "CertificateState",
    "Challenge",
    "ChallengeState",
    "ChallengeType",
    "Cluster",
    "ClusterAction",
    "ClusterActionKind",
    "ClusterActionState",
    "ClusterEvent",
    "ClusterResource",
    "ClusterState",
    "DeliveryEvent",
    "DeliveryState",
    "DownloadToken",
    "Event",
    "ImmutableSpecError",
    "IssuanceWebhook",
    "Issuer",
    "IssuerKind",
    "ItemState",
    "KubeCSR",
    "MirroredKind",
    "Notification",
    "NotificationChannel",
    "NotificationCondition",
    "NotificationRule",
    "Order",
    "OrderState",
    "RequestState",
    "Revocation",
    "RevocationState",
    "RoleScope",
    "Secret",
    "SecretExport",
    "WebhookDelivery",
    "WebhookDeliveryState",
    "certificate_name_of",
    "validate_resource_name",
]
