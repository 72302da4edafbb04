"""Everything the console does, the API does: every console URL that takes a POST (an action:
create, change, delete, approve, renew, test-send, …) is mapped here to the API operations
that do the same, and each of those must be in the OpenAPI schema. A new console action
without an entry fails the test, and so does an entry for an action that no longer exists or
an operation the API does not have.

Which views take a POST is read from the views themselves: a class-based view's `post`
method, Django's `require_http_methods` (require_POST) list, or else the view's code (and
the functions of its module that it calls) reading `request.POST` or comparing
`request.method` with "POST".
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.generators import SchemaGenerator

# console action (URL name) → the API operations ("METHOD /path/" as in the OpenAPI schema)
# that do what it does.
API_FOR_CONSOLE_ACTION: dict[str, tuple[str, ...]] = {
    "web:certificate-new": ("POST /api/v1/certificates/",),
    "web:certificate-edit": (
        "PUT /api/v1/certificates/{name}/",
        "PATCH /api/v1/certificates/{name}/",
    ),
    "web:certificate-clone": ("GET /api/v1/certificates/{name}/", "POST /api/v1/certificates/"),
    "web:certificate-delete": ("DELETE /api/v1/certificates/{name}/",),
    "web:certificate-renew": ("POST /api/v1/certificates/{name}/renew/",),
    "web:certificate-revoke": ("POST /api/v1/certificates/{name}/revoke/",),
    "web:certificate-endpoint-add": ("POST /api/v1/certificates/{name}/endpoints/",),
    "web:certificate-endpoint-remove": ("DELETE /api/v1/certificates/{name}/endpoints/{id}/",),
    "web:certificate-endpoint-check": ("POST /api/v1/certificates/{name}/check-endpoints/",),
    "web:certificate-downloads": ("POST /api/v1/downloadtokens/",),
    "web:certificate-download-revoke": ("POST /api/v1/downloadtokens/{id}/revoke/",),
    # The key pair as files (POST: a key never travels in a link); the API gives the same
    # key pair as JSON, a client builds its PKCS#12 from it.
    "web:certificate-key-pem": ("GET /api/v1/certificates/{name}/secret/",),
    "web:certificate-key-p12": ("GET /api/v1/certificates/{name}/secret/",),
    # Bulk renew or delete: the page stores the list and works through it in chunks; an API
    # client calls the operation for each certificate.
    "web:bulk-start": (
        "POST /api/v1/certificates/{name}/renew/",
        "DELETE /api/v1/certificates/{name}/",
    ),
    "web:bulk-step": (
        "POST /api/v1/certificates/{name}/renew/",
        "DELETE /api/v1/certificates/{name}/",
    ),
    "web:request-approve": ("POST /api/v1/certificaterequests/{name}/approve/",),
    "web:request-deny": ("POST /api/v1/certificaterequests/{name}/deny/",),
    "web:issuer-new": ("POST /api/v1/issuers/",),
    "web:issuer-edit": ("PUT /api/v1/issuers/{name}/", "PATCH /api/v1/issuers/{name}/"),
    "web:issuer-delete": ("DELETE /api/v1/issuers/{name}/",),
    # The policy is spec.approvalPolicy of the issuer.
    "web:issuer-policy": ("PATCH /api/v1/issuers/{name}/",),
    "web:issuer-test-dns": ("POST /api/v1/issuers/{name}/test-dns/",),
    "web:user-create": ("POST /api/v1/users/",),
    "web:user-roles": ("PATCH /api/v1/users/{username}/",),
    "web:user-scopes": ("PATCH /api/v1/users/{username}/",),
    "web:user-disable": ("PATCH /api/v1/users/{username}/",),
    "web:user-password-reset": ("POST /api/v1/users/{username}/reset-password/",),
    "web:user-two-factor-reset": ("POST /api/v1/users/{username}/reset-second-factor/",),
    "web:user-enable": ("PATCH /api/v1/users/{username}/",),
    "web:signin-lock-lift": ("DELETE /api/v1/signin-locks/{id}/",),
    "web:oidc-rules": ("PUT /api/v1/sso/group-rules/",),
    "web:token-create": ("POST /api/v1/tokens/",),
    "web:token-revoke": ("POST /api/v1/tokens/{id}/revoke/",),
    "web:webhook-create": ("POST /api/v1/issuance-webhooks/",),
    "web:webhook-delete": ("DELETE /api/v1/issuance-webhooks/{name}/",),
    "web:webhook-test": ("POST /api/v1/issuance-webhooks/{name}/test/",),
    "web:channel-create": ("POST /api/v1/notification-channels/",),
    "web:channel-edit": ("PATCH /api/v1/notification-channels/{name}/",),
    "web:channel-toggle": ("PATCH /api/v1/notification-channels/{name}/",),  # `enabled`
    "web:channel-delete": ("DELETE /api/v1/notification-channels/{name}/",),
    "web:channel-test": ("POST /api/v1/notification-channels/{name}/test/",),
    "web:rule-create": ("POST /api/v1/notification-rules/",),
    "web:rule-delete": ("DELETE /api/v1/notification-rules/{name}/",),
    "web:cluster-add": ("POST /api/v1/clusters/",),
    "web:cluster-edit": ("PUT /api/v1/clusters/{name}/", "PATCH /api/v1/clusters/{name}/"),
    "web:cluster-delete": ("DELETE /api/v1/clusters/{name}/",),
    "web:cluster-check": ("POST /api/v1/clusters/{name}/check/",),
    "web:mirrored-renew": (
        "POST /api/v1/clusters/{cluster}/namespaces/{namespace}/certificates/{name}/renew/",
    ),
    "web:mirrored-approve": (
        "POST /api/v1/clusters/{cluster}/namespaces/{namespace}/certificaterequests/{name}/approve/",
    ),
    "web:mirrored-deny": (
        "POST /api/v1/clusters/{cluster}/namespaces/{namespace}/certificaterequests/{name}/deny/",
    ),
}

# Console-only, on purpose: what only a browser session needs, and form helpers that change
# nothing (the API checks the same things when the object is sent).
CONSOLE_ONLY: dict[str, str] = {
    "web:login": "the browser session's sign-in (the API takes tokens: POST /api/v1/token/)",
    "web:logout": "ends the browser session",
    "web:issuer-directory": "fills the new-issuer form from an ACME directory; changes nothing",
    "web:issuer-policy-preview": "the policy editor's preview of an unsaved policy; changes nothing",
    "web:cluster-contexts": "lists a pasted kubeconfig's contexts for the form; changes nothing",
    # A sign-in's own steps (console/signin_steps.py): the API signs in with tokens, which
    # these do not concern.
    "web:signin-verify": "the code page of a browser sign-in (second factor)",
    "web:two-factor-setup": "pairs the user's authenticator app during a browser session",
    "web:recovery-codes-new": "the user's own recovery codes, for browser sign-ins only",
    "web:password-change": "the user's own password, asking for the current one (browser only)",
}
# Not the console: the API itself, and Django's admin site (a superuser's back office of raw
# rows, outside the product's pages and roles).
NOT_CONSOLE_PREFIXES = ("api/", "admin/")


def walk(
    patterns: list[Any], prefix: str = "", namespace: str = ""
) -> Iterator[tuple[str, str, Callable[..., Any]]]:
    """(route, namespaced name, view) of every URL pattern, included ones too."""
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from walk(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}{pattern.name}" if pattern.name else prefix + str(pattern.pattern)
            yield prefix + str(pattern.pattern), name, pattern.callback


def _declared_methods(view: Callable[..., Any]) -> set[str] | None:
    """The methods of a require_http_methods list around the view, if there is one."""
    layer: Any = view
    while layer is not None:
        for cell in layer.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(v, str) and v.isupper() for v in value)
            ):
                return set(value)
        layer = getattr(layer, "__wrapped__", None)
    return None


def _reads_post(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr == "POST":
            return True
        if isinstance(sub, ast.Constant) and sub.value == "POST":
            return True
    return False


@cache
def _takes_post_in_code(function: Callable[..., Any]) -> bool:
    """The function, or a function of its module that it calls, reads the POST data."""
    module = sys.modules[function.__module__]
    seen: set[str] = set()
    todo = [function]
    while todo:
        current = todo.pop()
        tree = ast.parse(textwrap.dedent(inspect.getsource(current)))
        if _reads_post(tree):
            return True
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                callee = getattr(module, call.func.id, None)
                if (
                    inspect.isfunction(callee)
                    and callee.__module__ == module.__name__
                    and callee.__name__ not in seen
                ):
                    seen.add(callee.__name__)
                    todo.append(callee)
    return False


def takes_post(view: Callable[..., Any]) -> bool:
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        return "post" in view_class.http_method_names and hasattr(view_class, "post")
    declared = _declared_methods(view)
    if declared is not None:
        return "POST" in declared
    return _takes_post_in_code(inspect.unwrap(view))


def console_actions() -> dict[str, str]:
    """Console URL name → route, for every console view that takes a POST."""
    found = {}
    for route, name, view in walk(get_resolver().url_patterns):
        if route.startswith(NOT_CONSOLE_PREFIXES):
            continue
        if takes_post(view):
            found[name] = route
    return found


@pytest.fixture(scope="module")
def api_operations() -> set[str]:
    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    return {
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    }


def test_the_walk_sees_the_actions_it_must() -> None:
    """The detection itself: a require_POST view, a view reading POST through a helper of its
    module (issuer_new → _form_page), a class-based view, and a page that takes no POST."""
    actions = console_actions()
    assert "web:rule-create" in actions  # @require_POST
    assert "web:issuer-new" in actions  # request.method == "POST" in a helper
    assert "web:login" in actions  # LoginView.post
    assert "web:certificates" not in actions  # a list page
    assert "web:dashboard" not in actions


def test_every_console_action_has_an_api_counterpart(api_operations: set[str]) -> None:
    actions = console_actions()
    without = sorted(
        f"{name} (/{route})"
        for name, route in actions.items()
        if name not in API_FOR_CONSOLE_ACTION and name not in CONSOLE_ONLY
    )
    assert not without, "console actions with no API counterpart: " + ", ".join(without)
    missing = sorted(
        f"{name} → {operation}"
        for name, operations in API_FOR_CONSOLE_ACTION.items()
        for operation in operations
        if operation not in api_operations
    )
    assert not missing, "mapped to operations the API does not have: " + ", ".join(missing)


def test_the_mapping_names_only_console_actions_that_exist() -> None:
    actions = console_actions()
    stale = sorted(name for name in [*API_FOR_CONSOLE_ACTION, *CONSOLE_ONLY] if name not in actions)
    assert not stale, f"no console action (or no POST) by these names: {stale}"
    assert not set(API_FOR_CONSOLE_ACTION) & set(CONSOLE_ONLY)
