"""/api/v1/clusters/: the Kubernetes clusters running cert-manager that the console mirrors.

Anyone with a role lists and reads them (a user scoped to clusters/namespaces sees the
clusters of their scope only); only admins add, change and delete them. The kubeconfig is
write-only: validated before anything is stored (a 400 naming `kubeconfig` or `context`),
stored encrypted, never returned. The backoff settings are whole seconds (cert-manager's
defaults: 3600 and 115200). `check` asks the sync to look at the cluster again (discovery
and the access review) at once.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.validators import RegexValidator
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import scope
from issuance.api.common import IGNORED, ApiViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import StrictCharField, StrictIntegerField
from issuance.api.mirrored_permissions import ScopedRolePermission, check_in_scope
from issuance.api.patterns import (
    KUBECONFIG_FORMAT,
    KUBECONFIG_MESSAGE,
    KUBECONFIG_PATTERN,
    PatternField,
)
from issuance.api.query import QueryFilter
from issuance.kubernetes.certmanager import kubeconfig
from issuance.kubernetes.certmanager.cluster_actions import wake
from issuance.models import Cluster, ClusterState
from issuance.models.cluster import DEFAULT_MAX_BACKOFF_SECONDS, DEFAULT_MIN_BACKOFF_SECONDS
from issuance.observability import events

# A DNS label (what `manage.py cluster add` takes too); "-" is kept for "every cluster".
CLUSTER_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,63}$")  # what the model's SlugField holds
MAX_BACKOFF = 10 * 365 * 24 * 3600  # beyond any flag an operator sets
CLUSTER_NAME_VALIDATOR = RegexValidator(
    CLUSTER_NAME_RE, "must be a DNS label: lower-case letters, digits and '-'"
)
KUBECONFIG_HELP = (
    "The kubeconfig (YAML or JSON, with clusters, contexts and users). Stored encrypted; "
    "never returned. Beyond the pattern, it must load: a 400 names `kubeconfig` when it does not, and `context` when the "
    "context (or the current-context) is missing or names a cluster or user it lacks."
)


class ClusterSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    # The field, not Serializer.context (the metaclass takes declared fields off the class).
    context = serializers.CharField(  # type: ignore[assignment]
        help_text="The kubeconfig context used ('' = current)."
    )
    inCluster = serializers.BooleanField(
        source="in_cluster",
        help_text="Speaks as the console's own ServiceAccount (`cluster add --in-cluster`), "
        "not with a kubeconfig.",
    )
    minBackoffSeconds = serializers.IntegerField(
        source="min_backoff_seconds", help_text="cert-manager's minimum issuance backoff."
    )
    maxBackoffSeconds = serializers.IntegerField(
        source="max_backoff_seconds", help_text="cert-manager's maximum issuance backoff."
    )
    state = serializers.ChoiceField(choices=ClusterState.choices)
    lastError = serializers.CharField(source="last_error")
    lastSync = serializers.DateTimeField(source="last_sync", allow_null=True)
    checkedAt = serializers.DateTimeField(
        source="checked_at", allow_null=True, help_text="Last discovery and access review."
    )
    apiVersions = serializers.ListField(child=serializers.CharField(), source="api_versions")
    missingPermissions = serializers.ListField(
        child=serializers.CharField(), source="missing_permissions"
    )
    createdBy = serializers.CharField(source="created_by")
    createdAt = serializers.DateTimeField(source="created_at")


class ClusterWriteSerializer(StrictSerializer):
    """Add or change a cluster. On a change, `kubeconfig` may be left out (kept)."""

    name = StrictCharField(
        max_length=63,
        required=False,
        validators=[CLUSTER_NAME_VALIDATOR],
        help_text="Cannot be changed: on a change, the path's name or left out.",
    )
    kubeconfig = PatternField(
        KUBECONFIG_PATTERN,
        KUBECONFIG_MESSAGE,
        format=KUBECONFIG_FORMAT,
        required=False,
        write_only=True,
        trim_whitespace=False,
        help_text=KUBECONFIG_HELP,
    )
    context = StrictCharField(  # type: ignore[assignment]  # as above
        required=False,
        allow_blank=True,
        max_length=253,
        help_text="One of the kubeconfig's contexts ('' = its current-context); another "
        "name is a 400 naming `context`.",
    )
    minBackoffSeconds = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_BACKOFF,
        help_text="Whole seconds (default 3600); at most maxBackoffSeconds.",
    )
    maxBackoffSeconds = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_BACKOFF,
        help_text="Whole seconds (default 115200); less than minBackoffSeconds is a 400 naming "
        "`maxBackoffSeconds`.",
    )
    # Sent back from a GET: ignored.
    inCluster = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    state = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    lastError = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    lastSync = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    checkedAt = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    apiVersions = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    missingPermissions = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    createdBy = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    createdAt = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)


class ClusterCreateSerializer(ClusterWriteSerializer):
    """Add a cluster: `name` and `kubeconfig` are required."""

    name = StrictCharField(max_length=63, validators=[CLUSTER_NAME_VALIDATOR])
    kubeconfig = PatternField(
        KUBECONFIG_PATTERN,
        KUBECONFIG_MESSAGE,
        format=KUBECONFIG_FORMAT,
        write_only=True,
        trim_whitespace=False,
        help_text=KUBECONFIG_HELP,
    )


def _apply(cluster: Cluster, data: dict[str, Any], creating: bool) -> list[str]:
    """Copy the body onto `cluster` after checking it as a whole; the changed fields."""
    errors: dict[str, list[str]] = {}
    if creating and not data.get("name"):
        errors["name"] = ["is required"]
    if creating and not data.get("kubeconfig"):
        errors["kubeconfig"] = ["is required"]
    if not creating and data.get("name") not in (None, cluster.name):
        errors["name"] = ["cannot be changed"]
    low = data.get("minBackoffSeconds", cluster.min_backoff_seconds)
    high = data.get("maxBackoffSeconds", cluster.max_backoff_seconds)
    if low > high:
        errors["maxBackoffSeconds"] = ["must not be less than minBackoffSeconds"]
    if errors:
        raise serializers.ValidationError(errors)
    text = data.get("kubeconfig") or cluster.kubeconfig
    context = data.get("context", cluster.context)
    changed: list[str] = []
    if cluster.in_cluster and "kubeconfig" not in data and context:
        raise serializers.ValidationError(
            {"context": ["an in-cluster cluster has no kubeconfig context"]}
        )
    if "kubeconfig" in data or context != cluster.context:
        try:
            kubeconfig.validate(text, context)
        except kubeconfig.KubeconfigError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]}) from None
        changed.append("kubeconfig" if "kubeconfig" in data else "context")
    if creating:
        cluster.name = data["name"]
    if "kubeconfig" in data:
        cluster.kubeconfig = text
    cluster.context = context
    if (low, high) != (cluster.min_backoff_seconds, cluster.max_backoff_seconds):
        changed.append("backoff")
    cluster.min_backoff_seconds, cluster.max_backoff_seconds = low, high
    return changed


# What JSON Schema cannot say (schemathesis.toml allows these operations a 400 for it).
BODY_CHECKS = (
    "Checked beyond the schema, each a 400 naming the field, nothing stored: the kubeconfig "
    "must load and its context (`context`, or the kubeconfig's current-context) must name a "
    "cluster and a user it defines; maxBackoffSeconds must not be less than "
    "minBackoffSeconds."
)
CREATE_DESCRIPTION = (
    "Add a cluster (admin). Defaults: the kubeconfig's current-context, cert-manager's "
    f"backoff (3600 s, 115200 s). {BODY_CHECKS} An existing name is a 409."
)
CHANGE_DESCRIPTION = (
    "Change a cluster (admin); fields left out keep their value (`kubeconfig` too). "
    f"`name`, if given, must be the path's. {BODY_CHECKS}"
)


class ClusterViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, ApiViewSet
):
    """Clusters. Filter: `state`."""

    serializer_class = ClusterSerializer
    permission_classes = [ScopedRolePermission]
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    resource = "cluster"
    filters = (QueryFilter("state", "state", choices=tuple(ClusterState.values)),)

    def get_queryset(self) -> Any:
        clusters = Cluster.objects.order_by("name")
        where = scope.scope_of(self.request.user)
        if not where.everything:
            clusters = clusters.filter(name__in=sorted({c for c, _ in where.pairs}))
        return clusters

    def get_object(self) -> Any:
        name = self.kwargs["name"]
        found = None
        if SLUG_RE.fullmatch(name):  # else it cannot exist (nor be queried: NUL)
            found = self.get_queryset().filter(name=name).first()
        if found is None:
            raise NotFound(f"No cluster named {name!r}.")
        return found

    def actor(self) -> str:
        return str(self.request.user.get_username())

    def _saved(self, cluster: Cluster, changed: list[str], reason: str) -> None:
        with transaction.atomic():
            if reason == "Created":
                cluster.save()
            else:
                # Only what this request changes: the sync writes the same row (state, last
                # sync, its lease) meanwhile, and must not get back what we read before.
                fields = ["kubeconfig_ciphertext", "in_cluster", "context"] if changed else []
                fields += ["min_backoff_seconds", "max_backoff_seconds", "updated_at"]
                if "kubeconfig" in changed or "context" in changed:
                    cluster.checked_at = None  # the sync checks the new credentials at once
                    fields.append("checked_at")
                cluster.save(update_fields=fields)
            events.record(
                "Cluster",
                cluster.name,
                reason,
                f"Cluster {cluster.name} {reason.lower()}"
                + (f" ({', '.join(changed)})" if changed and reason == "Updated" else ""),
                actor=self.actor(),
            )
            wake()  # the sync takes the new cluster, or the new credentials, at once
        kubeconfig.forget(cluster.pk)

    @extend_schema(
        request=ClusterCreateSerializer,
        responses={201: ClusterSerializer},
        description=CREATE_DESCRIPTION,
    )
    def create(self, request: Request) -> Response:
        """Add a cluster (admin). Defaults: current-context, cert-manager's backoff."""
        body = ClusterCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cluster = Cluster(
            created_by=self.actor(),
            min_backoff_seconds=DEFAULT_MIN_BACKOFF_SECONDS,
            max_backoff_seconds=DEFAULT_MAX_BACKOFF_SECONDS,
        )
        _apply(cluster, dict(body.validated_data), creating=True)
        if Cluster.objects.filter(name=cluster.name).exists():
            raise Conflict(f"Cluster {cluster.name!r} already exists.")
        self._saved(cluster, [], "Created")
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_201_CREATED)

    def _change(self, request: Request, partial: bool) -> Response:
        cluster = self.get_object()
        body = ClusterWriteSerializer(data=request.data, partial=partial)
        body.is_valid(raise_exception=True)
        changed = _apply(cluster, dict(body.validated_data), creating=False)
        self._saved(cluster, changed, "Updated")
        return Response(ClusterSerializer(cluster).data)

    @extend_schema(
        request=ClusterWriteSerializer, responses=ClusterSerializer, description=CHANGE_DESCRIPTION
    )
    def update(self, request: Request, name: str) -> Response:
        """Change a cluster (admin); fields left out keep their value."""
        return self._change(request, partial=False)

    @extend_schema(
        request=ClusterWriteSerializer, responses=ClusterSerializer, description=CHANGE_DESCRIPTION
    )
    def partial_update(self, request: Request, name: str) -> Response:
        return self._change(request, partial=True)

    def destroy(self, request: Request, name: str) -> Response:
        """Delete the cluster and everything mirrored from it (nothing in the cluster)."""
        cluster = self.get_object()
        pk = cluster.pk
        with transaction.atomic():
            cluster.delete()
            events.record("Cluster", name, "Deleted", f"Cluster {name} deleted", actor=self.actor())
        kubeconfig.forget(pk)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: ClusterSerializer})
    @action(detail=True, methods=["post"])
    def check(self, request: Request, name: str) -> Response:
        """Check the connection, cert-manager's API versions and the permissions again now
        (operator or admin; a scoped operator needs the whole cluster in scope)."""
        cluster = self.get_object()
        check_in_scope(request, self, cluster.name, "")  # the whole cluster in scope
        with transaction.atomic():
            cluster.checked_at = None
            cluster.save(update_fields=["checked_at", "updated_at"])
            events.record(
                "Cluster", cluster.name, "CheckRequested", "Check requested", actor=self.actor()
            )
            wake()  # the sync step looks at once
        return Response(ClusterSerializer(cluster).data, status=status.HTTP_202_ACCEPTED)
