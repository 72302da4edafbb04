"""/api/v1/sso/group-rules/: the group → role rules of single sign-on (admin only), as on
the console's Users → Single sign-on page (issuance/access/oidc_mapping.py): the rules from
OIDC_GROUP_ROLES (read-only) and the console's own, replaced whole by PUT (audited)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import oidc_mapping
from issuance.access.roles import ROLES
from issuance.api.common import ApiViewSet
from issuance.api.errors import Conflict
from issuance.api.patterns import PatternField
from issuance.api.users import scopes_field
from issuance.shapes import GroupRule


class GroupRuleSerializer(serializers.Serializer[GroupRule]):
    # One line: the console's form shows a rule per line.
    group = PatternField(
        "^[^\r\n]+$",
        "one line of text",
        max_length=500,
        trim_whitespace=False,
        help_text="The group as the provider names it.",
    )
    roles = serializers.ListField(
        child=serializers.ChoiceField(choices=list(ROLES)), min_length=1, max_length=4
    )
    scopes = scopes_field(
        "`cluster` or `cluster/namespace` (each cluster must exist: 400 otherwise); "
        "empty: the roles apply everywhere. An admin rule cannot be limited (409).",
        default=list,
    )


class GroupRulesSerializer(serializers.Serializer[dict[str, Any]]):
    environment = GroupRuleSerializer(many=True, read_only=True)
    rules = GroupRuleSerializer(many=True)


def _shape(rule: oidc_mapping.Rule) -> GroupRule:
    return {
        "group": rule.group,
        "roles": list(rule.roles),
        "scopes": [f"{c}/{ns}" if ns else c for c, ns in rule.scopes],
    }


def _answer() -> dict[str, list[GroupRule]]:
    return {
        "environment": [_shape(r) for r in oidc_mapping.environment_rules()],
        "rules": [_shape(r) for r in oidc_mapping.stored_rules()],
    }


class GroupRulesViewSet(ApiViewSet):
    """Single sign-on's group rules (admin only)."""

    serializer_class = GroupRulesSerializer
    resource = "sso-group-rule"
    permission_actions = {"retrieve": "read", "replace": "change"}

    @extend_schema(
        responses={200: GroupRulesSerializer},
        description="The rules applied at every sign-in through the OpenID Provider: "
        "`environment` (OIDC_GROUP_ROLES, read-only) and `rules` (the console's own).",
    )
    def retrieve(self, request: Request) -> Response:
        return Response(_answer())

    @extend_schema(
        request=GroupRulesSerializer,
        responses={200: GroupRulesSerializer},
        description="Replaces the console's rules (audited); they apply at each user's next "
        "sign-in. A scope naming an unknown cluster is a 400 naming `rules`; a rule giving "
        "admin with scopes is a 409 (an admin is never limited).",
    )
    def replace(self, request: Request) -> Response:
        body = GroupRulesSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            rules = oidc_mapping.rules_from_shapes(body.validated_data["rules"], source="rules")
            oidc_mapping.save_rules(rules, actor=request.user.get_username())
        except oidc_mapping.AdminLimitedError as exc:
            raise Conflict(str(exc)) from exc
        except oidc_mapping.MappingError as exc:
            raise serializers.ValidationError({"rules": [str(exc)]}) from exc
        return Response(_answer())
