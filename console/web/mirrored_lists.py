"""Mirrored cert-manager objects in the console's lists, beside the console's own.

Every list (Certificates, the approval queue, Orders, Challenges) pages over one sequence:
the console's own rows first, then the mirrored rows of the user's scope (`Chained`). Both
parts are counted and sliced in the database, so a page costs the same few queries however
many rows there are, and page N of the combined list is exactly rows N*size … N*size+size-1.

The Source filter picks all, only the console's own ("console") or one cluster; the
namespace filter applies to mirrored rows (own rows have no namespace, so they drop out).
Scoped users never see own rows (issuance.access.scope.sees_own_resources).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from django.db.models import Model, QuerySet
from django.http import HttpRequest

from issuance.access.roles import APPROVER, OPERATOR
from issuance.access.scope import has_scoped_role, scope_of, sees_own_resources, visible
from issuance.models import Cluster, ClusterResource
from issuance.pki.csr import CSRError, CSRInfo, parse_csr

CONSOLE_SOURCE = "console"
NAMESPACE_CHOICES_LIMIT = 200

A = TypeVar("A", bound=Model)


@dataclass(frozen=True)
class SourceFilter:
    """`source`: "" (all), "console" (own only) or a cluster name; `namespace`: "" or one."""

    source: str = ""
    namespace: str = ""

    @classmethod
    def from_request(cls, request: HttpRequest) -> SourceFilter:
        source = request.GET.get("source", "").strip()[:63]
        namespace = request.GET.get("namespace", "").strip()[:253]
        return cls(source, namespace)

    def shows_own(self, user: Any) -> bool:
        return (
            sees_own_resources(user) and self.source in ("", CONSOLE_SOURCE) and not self.namespace
        )

    def shows_mirrored(self) -> bool:
        return self.source != CONSOLE_SOURCE


def mirrored(kind: str, user: Any, source: SourceFilter) -> QuerySet[ClusterResource]:
    """The user's visible mirrored objects of `kind`, narrowed by the Source filter."""
    qs = visible(ClusterResource.objects.filter(kind=kind), user).select_related("cluster")
    if not source.shows_mirrored():
        return qs.none()
    if source.source:
        qs = qs.filter(cluster__name=source.source)
    if source.namespace:
        qs = qs.filter(namespace=source.namespace)
    return qs.defer("cluster__kubeconfig_ciphertext")


def filter_choices(request: HttpRequest, kind: str) -> dict[str, Any]:
    """What the Source and namespace filters offer this user (two small queries)."""
    user = request.user
    scope = scope_of(user)
    clusters = Cluster.objects.order_by("name")
    if not scope.everything:
        clusters = clusters.filter(name__in=sorted({c for c, _ in scope.pairs}))
    namespaces = (
        visible(ClusterResource.objects.filter(kind=kind), user)
        .exclude(namespace="")
        .order_by("namespace")
        .values_list("namespace", flat=True)
        .distinct()[:NAMESPACE_CHOICES_LIMIT]
    )
    source = SourceFilter.from_request(request)
    return {
        "source_filter": source,
        "source_clusters": list(clusters.values_list("name", flat=True)),
        "source_namespaces": list(namespaces),
        "offers_console_source": sees_own_resources(user),
    }


class Chained(Generic[A]):
    """Two querysets as one sequence for django.core.paginator.Paginator: `first` then
    `second`. count() counts each once; a slice reads only the rows it needs from each."""

    def __init__(self, first: QuerySet[A] | None, second: QuerySet[ClusterResource]) -> None:
        self.first = first
        self.second = second
        self._counts: tuple[int, int] | None = None

    def _sizes(self) -> tuple[int, int]:
        if self._counts is None:
            own = self.first.count() if self.first is not None else 0
            self._counts = (own, self.second.count())
        return self._counts

    def count(self) -> int:
        own, other = self._sizes()
        return own + other

    def own_count(self) -> int:
        return self._sizes()[0]

    def __len__(self) -> int:
        return self.count()

    def __iter__(self) -> Iterator[A | ClusterResource]:
        return iter(self[0 : self.count()])

    @overload
    def __getitem__(self, index: int) -> A | ClusterResource: ...

    @overload
    def __getitem__(self, index: slice) -> list[A | ClusterResource]: ...

    def __getitem__(self, index: int | slice) -> A | ClusterResource | list[A | ClusterResource]:
        if isinstance(index, int):
            found = self[index : index + 1]
            if not found:
                raise IndexError(index)
            return found[0]
        start, stop, _ = index.indices(self.count())
        own, _other = self._sizes()
        rows: list[A | ClusterResource] = []
        if self.first is not None and start < own:
            rows.extend(self.first[start : min(stop, own)])
        if stop > own:
            rows.extend(self.second[max(start - own, 0) : stop - own])
        return rows


def is_mirrored(row: object) -> bool:
    return isinstance(row, ClusterResource)


def actions_for(user: Any, resource: ClusterResource) -> dict[str, bool]:
    """Per-row buttons: the role in that row's cluster/namespace (the scope is cached)."""
    cluster = resource.cluster.name
    return {
        "can_renew": has_scoped_role(user, OPERATOR, cluster, resource.namespace),
        "can_decide": has_scoped_role(user, APPROVER, cluster, resource.namespace),
    }


# -- CertificateRequests: the CSR in spec.request (base64 of the PEM) --------------------


@dataclass(frozen=True)
class MirroredRequest:
    resource: ClusterResource
    csr: CSRInfo | None
    csr_error: str
    can_decide: bool

    @property
    def pending(self) -> bool:
        return not self.resource.state  # neither Approved nor Denied


def decode_request(resource: ClusterResource) -> tuple[CSRInfo | None, str]:
    raw = resource.spec.get("request")
    if not isinstance(raw, str) or not raw:
        return None, "the CertificateRequest has no spec.request"
    try:
        pem = base64.b64decode(raw, validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None, "spec.request is not base64 of a PEM CSR"
    try:
        return parse_csr(pem), ""
    except CSRError as exc:
        return None, str(exc)


def mirrored_request(user: Any, resource: ClusterResource) -> MirroredRequest:
    csr, error = decode_request(resource)
    can_decide = has_scoped_role(user, APPROVER, resource.cluster.name, resource.namespace)
    return MirroredRequest(resource, csr, error, can_decide)


def rows_with_flags(user: Any, rows: Iterable[object]) -> list[tuple[object, bool]]:
    """(row, whether it is mirrored) for templates that render both kinds."""
    return [(row, is_mirrored(row)) for row in rows]
