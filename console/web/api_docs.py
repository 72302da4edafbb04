"""The API reference at /api/docs/: Swagger UI over the project's own schema (/api/schema/).

Swagger UI's files come from drf-spectacular-sidecar, served as our static files (no CDN).
drf-spectacular's split view serves the page and, at `?script`, the script that starts
Swagger UI, so the page has no inline script and works under `script-src 'self'`. The page
itself is ours (console/templates/console/api_docs.html): the console's top bar and navigation, its
stylesheet, no inline style.

Who may read it: the same rule as the schema it shows. Both views take drf-spectacular's
SERVE_PERMISSIONS and SERVE_AUTHENTICATION, left at their defaults (AllowAny): anyone may
read the schema, which describes the API's shapes and holds no data. Calls made from the page ("Try it out") are the API's own
and need a role as always: a signed-in user's session cookie goes with them, and the script
sends the CSRF token in the header Django reads (CSRF_HEADER_NAME), so session-auth writes
pass DRF's CSRF check.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.request import Request
from rest_framework.response import Response

from console.web.access import role_flags


class ApiDocsView(SpectacularSwaggerSplitView):
    url_name = "api-schema"
    template_name = "console/api_docs.html"
    title = "API reference"

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response: Response = super().get(request, *args, **kwargs)  # type: ignore[no-untyped-call]
        if request.GET.get("script") is None and request.user.is_authenticated:
            # base.html's navigation shows what the user's roles open.
            response.data.update(role_flags(request._request))
        return response
