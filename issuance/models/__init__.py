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
from issuance.models.endpoint import Endpoint, EndpointProtocol
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
    LEGACY_CONDITIONS,
    DeliveryState,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
    canonical_condition,
)
from issuance.models.oidc import OidcGroupRule, OidcIdentity
from issuance.models.order import FINAL_ORDER_STATES, Order, OrderState
from issuance.models.owner import certificate_labels_of, certificate_name_of
from issuance.models.passwordchange import PasswordChangeRequired
from issuance.models.reachability import KubeConnectorState
from issuance.models.revocation import REASONS, Revocation, RevocationState
from issuance.models.rolescope import RoleScope
from issuance.models.secondfactor import RecoveryCode, RecoveryCodeSet, TOTPFactor
from issuance.models.secret import Secret
from issuance.models.secretexport import SecretExport
from issuance.models.workerbeat import WorkerBeat

__all__ = [
    "FINAL_CHALLENGE_STATES",
    "FINAL_ORDER_STATES",
    "LEGACY_CONDITIONS",
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
    "Endpoint",
    "EndpointProtocol",
    "Event",
    "ImmutableSpecError",
    "IssuanceWebhook",
    "Issuer",
    "IssuerKind",
    "ItemState",
    "KubeCSR",
    "KubeConnectorState",
    "MirroredKind",
    "Notification",
    "NotificationChannel",
    "NotificationCondition",
    "NotificationRule",
    "OidcGroupRule",
    "OidcIdentity",
    "Order",
    "OrderState",
    "PasswordChangeRequired",
    "RecoveryCode",
    "RecoveryCodeSet",
    "RequestState",
    "Revocation",
    "RevocationState",
    "RoleScope",
    "Secret",
    "SecretExport",
    "TOTPFactor",
    "WebhookDelivery",
    "WebhookDeliveryState",
    "WorkerBeat",
    "canonical_condition",
    "certificate_labels_of",
    "certificate_name_of",
    "validate_resource_name",
]
