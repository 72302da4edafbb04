"""Mirrored cert-manager objects of a cluster, read only, plus renew/approve/deny (queued and
written back as cmctl does: issuance.kubernetes.certmanager.cluster_actions and writeback).

    /api/v1/clusters/{cluster}/{plural}/                         every namespace (?namespace=)
    /api/v1/clusters/{cluster}/namespaces/{namespace}/{plural}/  one namespace
    /api/v1/clusters/{cluster}/namespaces/{namespace}/{plural}/{name}/[events/]
    /api/v1/clusters/{cluster}/clusterissuers/{name}/[events/]   (cluster-scoped)
    …/certificates/{name}/renew/, …/certificaterequests/{name}/approve/ and /deny/  → 202
    /api/v1/clusters/{cluster}/actions/[{id}/]                   the queued actions

`{cluster}` "-" lists every cluster (the lists only). A user scoped to clusters/namespaces
sees what is in their scope: anything else answers 404, as if it did not exist; an action
on a visible object without the role for its namespace answers 403.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import scope
from issuance.api.clusters import SLUG_RE
from issuance.api.common import ActionBodySerializer, ApiViewSet
from issuance.api.fields import ObjectField
from issuance.api.mirrored_permissions import ScopedRolePermission, check_in_scope
from issuance.api.query import QueryFilter
from issuance.api.schema import DNS_LABEL
from issuance.kubernetes.certmanager import cluster_actions
from issuance.kubernetes.certmanager.kinds import MIRRORED, Kind
from issuance.models import (
    Cluster,
    ClusterAction,
    ClusterActionKind,
    ClusterActionState,
    ClusterResource,
)
from issuance.models.base import NAME_RE

ALL_CLUSTERS = "-"
NAMESPACE_RE = re.compile(f"^{DNS_LABEL}$")
EVENTS_SHOWN = 500
# Metadata worth showing; the rest (managedFields, kubectl's last-applied copy) is noise.
METADATA_KEYS = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "labels",
    "annotations",
    "ownerReferences",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

CLUSTER_PARAM = OpenApiParameter(
    "cluster",
    str,
    OpenApiParameter.PATH,
    description="Cluster name ('-': every cluster, in lists).",
    examples=[OpenApiExample("prod", value="prod")],
)
# The contract world's mirrored objects are all named "web": the examples reach them.
NAME_PARAM = OpenApiParameter(
    "name", str, OpenApiParameter.PATH, examples=[OpenApiExample("web", value="web")]
)
ACTION_ID_PARAM = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)
NAMESPACE_PARAM = OpenApiParameter(
    "namespace", str, OpenApiParameter.PATH, examples=[OpenApiExample("team-a", value="team-a")]
)


@extend_schema_field(
    {
        "type": "object",
        "nullable": True,
        "properties": {"name": {"type": "string"}, "kind": {"type": "string"}},
    }
)
class RefField(serializers.Field[Any, Any, Any, Any]):
    """{"name", "kind"} of an issuer or owner, null when there is none."""

    def __init__(self, name: str, kind: str, **kwargs: Any) -> None:
        self.name_attr, self.kind_attr = name, kind
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        name = getattr(value, self.name_attr)
        return {"name": name, "kind": getattr(value, self.kind_attr)} if name else None


class MirroredObjectSerializer(serializers.Serializer[Any]):
    """A mirrored object: columns read off it (for lists and filters), then its metadata,
    spec and status as the cluster has them (nothing secret: Secrets are never mirrored)."""

    cluster = serializers.CharField(source="cluster.name")
    kind = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    ready = serializers.CharField(help_text="The Ready condition's status ('' if none).")
    reason = serializers.CharField()
    message = serializers.CharField()
    state = serializers.CharField(
        help_text="Orders/Challenges: status.state; CertificateRequests: Approved, Denied "
        "or '' (pending)."
    )
    issuer = RefField("issuer_name", "issuer_kind")
    owner = RefField("owner_name", "owner_kind")
    certificate = serializers.CharField(
        source="certificate_name", help_text="The Certificate this object belongs to."
    )
    observedAt = serializers.DateTimeField(source="observed_at")
    metadata = serializers.SerializerMethodField()
    spec = ObjectField()
    status = ObjectField()

    @extend_schema_field({"type": "object", "additionalProperties": {}})
    def get_metadata(self, obj: ClusterResource) -> dict[str, Any]:
        meta = obj.body.get("metadata") if isinstance(obj.body, dict) else None
        if not isinstance(meta, dict):
            return {}
        shown = {k: meta[k] for k in METADATA_KEYS if k in meta}
        annotations = shown.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            shown["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        return shown


class MirroredCertificateSerializer(MirroredObjectSerializer):
    notAfter = serializers.DateTimeField(source="not_after", allow_null=True)
    renewalTime = serializers.DateTimeField(
        source="renewal_time", allow_null=True, help_text="status.renewalTime"
    )
    failedIssuanceAttempts = serializers.IntegerField(source="failed_attempts")
    lastFailureTime = serializers.DateTimeField(source="last_failure_time", allow_null=True)
    nextRetryTime = serializers.DateTimeField(
        source="next_retry_at",
        allow_null=True,
        help_text="When cert-manager tries again after a failed issuance, computed as it "
        "does (the cluster's backoff settings); null when the last issuance did not fail.",
    )


class ClusterEventSerializer(serializers.Serializer[Any]):
    """A Kubernetes Event about the object (its timeline)."""

    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # the field, not Field.source
    count = serializers.IntegerField()
    firstSeen = serializers.DateTimeField(source="first_seen", allow_null=True)
    lastSeen = serializers.DateTimeField(source="last_seen")


class ClusterActionSerializer(serializers.Serializer[Any]):
    """A renew/approve/deny queued for a cluster: Pending until written (Done) or refused
    for good (Failed, with the reason in lastError)."""

    id = serializers.UUIDField()
    cluster = serializers.CharField(source="cluster.name")
    action = serializers.ChoiceField(choices=ClusterActionKind.choices)
    kind = serializers.CharField()
    namespace = serializers.CharField()
    name = serializers.CharField()
    uid = serializers.CharField()
    actor = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    state = serializers.ChoiceField(choices=ClusterActionState.choices)
    attempts = serializers.IntegerField()
    conflicts = serializers.IntegerField(help_text="Stale writes (409) read again and retried.")
    lastError = serializers.CharField(source="last_error")
    nextAttemptAt = serializers.DateTimeField(source="next_attempt_at")
    createdAt = serializers.DateTimeField(source="created_at")
    doneAt = serializers.DateTimeField(source="done_at", allow_null=True)


# -- the viewsets -----------------------------------------------------------------------------


class ClusterModeViewSet(ApiViewSet):
    permission_classes = [ScopedRolePermission]
    resource: ClassVar[str] = "mirrored-object"
    permission_actions: ClassVar[dict[str, str]] = {"events": "read"}
    # Actions whose role is checked in the object's cluster/namespace (check_in_scope).
    object_actions: ClassVar[frozenset[str]] = frozenset()

    def actor(self) -> str:
        return str(self.request.user.get_username())

    def cluster_name(self) -> str:
        """The path's cluster ("-" for all); 404 when it is not there for this user."""
        name = str(self.kwargs["cluster"])
        if name == ALL_CLUSTERS and self.action == "list":
            return name
        where = scope.scope_of(self.request.user)
        visible = where.everything or any(c == name for c, _ in where.pairs)
        if not visible or not self._cluster_exists(name):
            raise NotFound(f"No cluster named {name!r}.")
        return name

    def _cluster_exists(self, name: str) -> bool:

        return SLUG_RE.fullmatch(name) is not None and Cluster.objects.filter(name=name).exists()

    def in_scope(self, rows: QuerySet[Any], cluster: str) -> QuerySet[Any]:
        if cluster != ALL_CLUSTERS:
            rows = rows.filter(cluster__name=cluster)
        return scope.visible(rows, self.request.user)


class MirroredListViewSet(mixins.ListModelMixin, ClusterModeViewSet):
    """The objects of one kind; lists only (a name is unique in a namespace only)."""

    kind: ClassVar[Kind]
    namespaced_route: ClassVar[bool] = False  # the path names the namespace
    serializer_class = MirroredObjectSerializer
    filters: ClassVar[tuple[QueryFilter, ...]] = (
        QueryFilter("ready", "ready", choices=("True", "False", "Unknown")),
        QueryFilter("state", "state", "status.state (Orders, Challenges) or the decision"),
        QueryFilter("issuer", "issuer_name", "issuer name"),
        QueryFilter("certificate", "certificate_name", "owning Certificate name"),
        QueryFilter("search", "name__contains", "substring of the name"),
    )

    def get_queryset(self) -> Any:
        cluster = self.cluster_name()
        rows = ClusterResource.objects.filter(kind=self.kind.kind).select_related("cluster")
        if self.namespaced_route:
            namespace = str(self.kwargs["namespace"])
            allowed = cluster == ALL_CLUSTERS or scope.allows(self.request.user, cluster, namespace)
            if not NAMESPACE_RE.fullmatch(namespace) or not allowed:
                raise NotFound(f"No namespace {namespace!r} in cluster {cluster!r}.")
            rows = rows.filter(namespace=namespace)
        return self.in_scope(rows, cluster).order_by("cluster__name", "namespace", "name")


class MirroredViewSet(mixins.RetrieveModelMixin, MirroredListViewSet):
    """The objects of one kind in one namespace (or cluster-scoped ones): lists and details."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"

    @extend_schema(parameters=[NAME_PARAM])
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    def get_object(self) -> Any:
        name = str(self.kwargs["name"])
        found = None
        if NAME_RE.fullmatch(name):
            found = self.get_queryset().filter(name=name).first()
        if found is None:
            raise NotFound(f"No {self.kind.kind} named {name!r} here.")
        return found

    @extend_schema(responses=ClusterEventSerializer(many=True), parameters=[NAME_PARAM])
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def events(self, request: Request, **kwargs: Any) -> Response:
        """The Kubernetes Events about the object, newest first (its timeline)."""
        obj = self.get_object()
        rows = obj.kube_events()[:EVENTS_SHOWN]
        return Response(ClusterEventSerializer(rows, many=True).data)

    def _queued(self, obj: ClusterResource, queued: Any) -> Response:
        check_in_scope(self.request, self, obj.cluster.name, obj.namespace)
        try:
            made = queued()
        except cluster_actions.NotAllowed as exc:
            raise PermissionDenied(str(exc)) from None
        return Response(ClusterActionSerializer(made).data, status=status.HTTP_202_ACCEPTED)


class MirroredCertificateViewSet(MirroredViewSet):
    serializer_class = MirroredCertificateSerializer
    object_actions: ClassVar[frozenset[str]] = frozenset({"renew"})

    @extend_schema(request=None, responses={202: ClusterActionSerializer}, parameters=[NAME_PARAM])
    @action(detail=True, methods=["post"])
    def renew(self, request: Request, **kwargs: Any) -> Response:
        """Force renewal as `cmctl renew`: the Issuing condition (reason ManuallyTriggered,
        naming you) is written to the Certificate's status by the worker; follow the
        returned action at /api/v1/clusters/{cluster}/actions/{id}/. 409 when it is
        already being issued or a renewal is queued."""
        obj = self.get_object()
        return self._queued(obj, lambda: cluster_actions.request_renew(obj, request.user))


class MirroredRequestViewSet(MirroredViewSet):
    object_actions: ClassVar[frozenset[str]] = frozenset({"approve", "deny"})

    def _decide(self, request: Request, decision: str) -> Response:
        body = ActionBodySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        obj = self.get_object()
        return self._queued(
            obj,
            lambda: cluster_actions.request_decision(
                obj,
                request.user,
                decision,
                reason=body.validated_data.get("reason") or "",
                message=body.validated_data.get("message") or "",
            ),
        )

    @extend_schema(
        request=ActionBodySerializer,
        responses={202: ClusterActionSerializer},
        parameters=[NAME_PARAM],
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, **kwargs: Any) -> Response:
        """Approve as `cmctl approve` (reason defaults to ManuallyApproved); final. 409
        when it is already decided."""
        return self._decide(request, cluster_actions.APPROVED)

    @extend_schema(
        request=ActionBodySerializer,
        responses={202: ClusterActionSerializer},
        parameters=[NAME_PARAM],
    )
    @action(detail=True, methods=["post"])
    def deny(self, request: Request, **kwargs: Any) -> Response:
        """Deny as `cmctl deny` (reason defaults to ManuallyDenied); final."""
        return self._decide(request, cluster_actions.DENIED)


class ClusterActionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ClusterModeViewSet):
    """The renew/approve/deny actions queued for a cluster, newest first. Filters: `state`,
    `action`, `namespace`, `name`."""

    serializer_class = ClusterActionSerializer
    resource = "cluster-action"
    lookup_field = "id"
    lookup_value_regex = r"[0-9a-fA-F-]{36}"
    filters = (
        QueryFilter("state", "state", choices=tuple(ClusterActionState.values)),
        QueryFilter("action", "action", choices=tuple(ClusterActionKind.values)),
        QueryFilter("namespace", "namespace", "namespace"),
        QueryFilter("name", "name", "object name"),
    )

    @extend_schema(parameters=[ACTION_ID_PARAM])
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().retrieve(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        rows = ClusterAction.objects.select_related("cluster")
        return self.in_scope(rows, self.cluster_name()).order_by("-created_at")


def _viewset(kind: Kind, namespaced_route: bool) -> type[MirroredListViewSet]:
    base: type[MirroredListViewSet] = MirroredListViewSet
    if namespaced_route or not kind.namespaced:
        base = {
            "Certificate": MirroredCertificateViewSet,
            "CertificateRequest": MirroredRequestViewSet,
        }.get(kind.kind, MirroredViewSet)
    serializer = (
        MirroredCertificateSerializer if kind.kind == "Certificate" else MirroredObjectSerializer
    )
    filters = base.filters
    if kind.namespaced and not namespaced_route:
        filters = (QueryFilter("namespace", "namespace", "namespace"), *filters)
    params = [CLUSTER_PARAM, *([NAMESPACE_PARAM] if namespaced_route else [])]
    doc = f"Mirrored {kind.kind} objects" + (
        " of one namespace." if namespaced_route else " of every namespace (`namespace` filter)."
    )
    made = type(
        f"Mirrored{kind.kind}{'Namespaced' if namespaced_route else ''}ViewSet",
        (base,),
        {
            "kind": kind,
            "namespaced_route": namespaced_route,
            "filters": filters,
            "serializer_class": serializer,
            "__doc__": doc,
        },
    )
    return extend_schema(parameters=params, tags=["clusters"])(made)


def routes() -> list[tuple[str, type[ClusterModeViewSet], str]]:
    """(router prefix, viewset, basename) for every kind, and the actions."""
    cluster = r"clusters/(?P<cluster>[^/]+)"
    out: list[tuple[str, type[ClusterModeViewSet], str]] = []
    for kind in MIRRORED:
        plural = kind.plural
        out.append((f"{cluster}/{plural}", _viewset(kind, False), f"mirrored-{plural}"))
        if kind.namespaced:
            out.append(
                (
                    f"{cluster}/namespaces/(?P<namespace>[^/]+)/{plural}",
                    _viewset(kind, True),
                    f"mirrored-ns-{plural}",
                )
            )
    actions_viewset = extend_schema(parameters=[CLUSTER_PARAM], tags=["clusters"])(
        ClusterActionViewSet
    )
    out.append((f"{cluster}/actions", actions_viewset, "clusteraction"))
    return out
