"""Users → Single sign-on (admin): the group → role rules applied at every sign-in through
the OpenID Provider (issuance/access/oidc_mapping.py). The rules from OIDC_GROUP_ROLES are
shown, read-only; the console's own are edited here (CSRF, audited)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache

from console.web.access import permission_required, render_page
from issuance.access import oidc_mapping
from issuance.models import OidcIdentity


class RulesForm(forms.Form):
    rules = forms.CharField(
        required=False,
        max_length=20000,
        widget=forms.Textarea(
            attrs={"rows": 8, "spellcheck": "false", "aria-describedby": "rules-help"}
        ),
        help_text="One rule per line: group=role[,role][@cluster[/namespace],...]",
    )

    def clean_rules(self) -> list[oidc_mapping.Rule]:
        try:
            return oidc_mapping.parse_rules(self.cleaned_data["rules"], source="Rules")
        except oidc_mapping.MappingError as exc:
            raise forms.ValidationError(str(exc)) from exc


def _context(form: RulesForm) -> dict[str, Any]:
    return {
        "form": form,
        "enabled": settings.OIDC_ENABLED,
        "provider": settings.OIDC_PROVIDER_NAME,
        "issuer": settings.OIDC_ISSUER_URL,
        "groups_claim": settings.OIDC_GROUPS_CLAIM,
        "environment_rules": oidc_mapping.environment_rules(),
        "identities": OidcIdentity.objects.select_related("user").order_by("user__username")[:200],
    }


@never_cache
@permission_required("sso-group-rule", "read", post="change")
def rules_page(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = RulesForm(request.POST)
        if form.is_valid():
            try:
                changed = oidc_mapping.save_rules(
                    form.cleaned_data["rules"], actor=request.user.get_username()
                )
            except oidc_mapping.MappingError as exc:
                form.add_error("rules", str(exc))
            else:
                messages.success(
                    request,
                    "Group rules saved: they apply at each user's next sign-in."
                    if changed
                    else "Group rules unchanged.",
                )
                return redirect("web:oidc-rules")
        return render_page(request, "console/oidc_rules.html", _context(form), status=400)
    initial = {"rules": oidc_mapping.rules_text(oidc_mapping.stored_rules())}
    return render_page(request, "console/oidc_rules.html", _context(RulesForm(initial=initial)))
