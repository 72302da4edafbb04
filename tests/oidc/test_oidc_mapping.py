"""Group → role rules (issuance/access/oidc_mapping.py) and the accounts made from a
provider's claims (issuance/access/oidc.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from issuance.access import oidc
from issuance.access.oidc_mapping import (
    MappingError,
    Rule,
    parse_rules,
    resolve,
    rules_text,
    save_rules,
)
from issuance.models import Event, OidcGroupRule, OidcIdentity, RoleScope
from tests.factories import make_cluster

ROOT = Path(__file__).resolve().parents[2]
ISSUER = "https://idp.example.test"


def test_compact_rules_keep_group_names_with_equals_signs_and_spaces() -> None:
    rules = parse_rules(
        "cn=admins,ou=groups,dc=example=admin; ops team=operator,approver\n"
        "team-a=viewer@prod/team-a,staging"
    )
    assert rules == [
        Rule("cn=admins,ou=groups,dc=example", ("admin",)),
        Rule("ops team", ("approver", "operator")),
        Rule("team-a", ("viewer",), (("prod", "team-a"), ("staging", ""))),
    ]
    assert parse_rules(rules_text(rules)) == rules


def test_json_rules() -> None:
    text = '[{"group": "a;b@c", "roles": ["viewer"], "scopes": ["prod"]}, {"group": "x", "roles": "admin"}]'
    assert parse_rules(text) == [
        Rule("a;b@c", ("viewer",), (("prod", ""),)),
        Rule("x", ("admin",)),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ops=operater", "OIDC_GROUP_ROLES, rule 1 ('ops=operater'): unknown role 'operater'"),
        ("ops", "rule 1 ('ops'): expected group=role"),
        ("=viewer", "the group name is empty"),
        ("ops=", "no role for group 'ops'"),
        (
            "a=viewer; admins=admin@prod",
            "rule 2 ('admins=admin@prod'): group 'admins': the admin role cannot be limited",
        ),
        ("a=viewer@prod/Team_A", "'Team_A' is not a Kubernetes namespace name"),
        ("[1]", 'rule 1: expected an object with a "group" string'),
        ('[{"group": "a", "roles": ["viewer"], "role": "x"}]', "unknown key 'role'"),
        ("[", "not valid JSON"),
    ],
)
def test_bad_rules_name_the_setting_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(MappingError) as caught:
        parse_rules(text)
    assert message in str(caught.value)
    assert str(caught.value).startswith("OIDC_GROUP_ROLES")


def _start_settings(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Load the settings in a new process with only `env` (as a start would)."""
    return subprocess.run(
        [sys.executable, "-c", "import console.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_bad_setting_stops_the_start_naming_it() -> None:
    env = {"DEBUG": "1", "OIDC_GROUP_ROLES": "ops=operater", "PATH": "/usr/bin:/bin"}
    started = _start_settings(env)
    assert started.returncode != 0
    assert "OIDC_GROUP_ROLES, rule 1 ('ops=operater'): unknown role 'operater'" in started.stderr

    env = {"DEBUG": "1", "LOCAL_LOGIN": "0", "PATH": "/usr/bin:/bin"}
    started = _start_settings(env)
    assert started.returncode != 0
    assert "LOCAL_LOGIN=0 needs OIDC_ISSUER_URL and OIDC_CLIENT_ID" in started.stderr

    env = {
        "DEBUG": "1",
        "OIDC_ISSUER_URL": ISSUER,
        "OIDC_CLIENT_ID": "console",
        "OIDC_CLIENT_SECRET_FILE": "/nonexistent/oidc-secret",
        "PATH": "/usr/bin:/bin",
    }
    started = _start_settings(env)
    assert started.returncode != 0
    assert "OIDC_CLIENT_SECRET_FILE='/nonexistent/oidc-secret': No such file" in started.stderr


@pytest.mark.django_db
def test_roles_add_up_and_limits_apply_only_when_every_matching_rule_is_limited() -> None:
    make_cluster("prod")
    make_cluster("staging")
    rules = parse_rules(
        "team-a=viewer@prod/team-a; team-b=operator@staging; all=approver; boss=admin;"
        "ghost=operator@nowhere"
    )
    limited = resolve(["team-a", "team-b"], rules)
    assert limited.roles == {"viewer", "operator"}
    assert limited.scopes == {("prod", "team-a"), ("staging", "")}

    # One unlimited rule: the roles apply everywhere.
    assert resolve(["team-a", "all"], rules).scopes == frozenset()
    # An admin is never limited.
    admin = resolve(["team-a", "boss"], rules)
    assert "admin" in admin.roles and admin.scopes == frozenset()
    # A limited rule naming no existing cluster gives nothing (never everything).
    assert resolve(["ghost"], rules).roles == frozenset()
    assert resolve(["ghost", "team-a"], rules).scopes == {("prod", "team-a")}
    assert resolve(["strangers"], rules).roles == frozenset()


@pytest.mark.django_db
def test_saved_rules_are_audited_and_need_known_clusters() -> None:
    make_cluster("prod")
    with pytest.raises(MappingError, match="there is no cluster named 'qa'"):
        save_rules(parse_rules("a=viewer@qa"), actor="admin")
    assert save_rules(parse_rules("a=viewer@prod/x; b=admin"), actor="admin") is True
    assert save_rules(parse_rules("a=viewer@prod/x; b=admin"), actor="admin") is False
    event = Event.objects.get(reason="GroupMappingChanged")
    assert event.actor == "admin"
    assert "a=viewer@prod/x; b=admin" in event.message
    OidcGroupRule.objects.all().delete()


def _claims(sub: str, username: str, *groups: str) -> dict[str, object]:
    return {"sub": sub, "preferred_username": username, "groups": list(groups)}


@pytest.mark.django_db
def test_first_sign_in_makes_a_linked_user_and_later_ones_reapply_the_groups(
    settings: object,
) -> None:
    settings.OIDC_GROUP_ROLES = "ops=operator; admins=admin"  # type: ignore[attr-defined]
    kwargs = {"username_claim": "preferred_username", "groups_claim": "groups"}
    user, grant = oidc.sign_in(ISSUER, _claims("s-1", "olga", "ops"), **kwargs)
    assert grant.matched == ("ops",)
    assert user.username == "olga" and not user.has_usable_password()
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
    assert OidcIdentity.objects.get(user_id=user.pk).subject == "s-1"

    # Renamed at the provider, promoted: the same user (linked by sub), the new role.
    again, _ = oidc.sign_in(ISSUER, _claims("s-1", "olga.k", "admins"), **kwargs)
    assert again.pk == user.pk and again.username == "olga"
    assert set(again.groups.values_list("name", flat=True)) == {"admin"}
    assert Event.objects.filter(reason="RolesChanged", name="olga", actor=oidc.ACTOR).count() == 2

    # Removed from every group: refused, and the roles are gone.
    with pytest.raises(oidc.Refused) as refused:
        oidc.sign_in(ISSUER, _claims("s-1", "olga", "nothing"), **kwargs)
    assert refused.value.reason == oidc.REFUSED_NO_ROLE
    assert not user.groups.exists()

    # Disabled in the console: refused whatever the groups.
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(oidc.Refused) as refused:
        oidc.sign_in(ISSUER, _claims("s-1", "olga", "ops"), **kwargs)
    assert refused.value.reason == oidc.REFUSED_DISABLED


@pytest.mark.django_db
def test_a_local_username_is_never_taken_over(settings: object) -> None:
    settings.OIDC_GROUP_ROLES = "ops=operator"  # type: ignore[attr-defined]
    User.objects.create_user("Root", password="local-password-123")
    kwargs = {"username_claim": "preferred_username", "groups_claim": "groups"}
    with pytest.raises(oidc.Refused) as refused:
        oidc.sign_in(ISSUER, _claims("s-9", "root", "ops"), **kwargs)
    assert refused.value.reason == oidc.REFUSED_USERNAME_TAKEN
    assert not OidcIdentity.objects.exists()
    with pytest.raises(oidc.Refused) as refused:
        oidc.sign_in(ISSUER, {"sub": "s-10", "groups": ["ops"]}, **kwargs)
    assert refused.value.reason == oidc.REFUSED_CLAIMS


@pytest.mark.django_db
def test_scoped_grants_become_role_scopes(settings: object) -> None:
    make_cluster("prod")
    settings.OIDC_GROUP_ROLES = "team-a=viewer@prod/team-a"  # type: ignore[attr-defined]
    kwargs = {"username_claim": "preferred_username", "groups_claim": "groups"}
    user, _ = oidc.sign_in(ISSUER, _claims("s-2", "tess", "team-a"), **kwargs)
    assert list(
        RoleScope.objects.filter(user_id=user.pk).values_list("cluster__name", "namespace")
    ) == [("prod", "team-a")]


@pytest.mark.django_db
def test_a_linked_local_account_signs_in_through_the_provider(settings: object) -> None:
    from django.core.management import CommandError, call_command

    settings.OIDC_GROUP_ROLES = "ops=operator"  # type: ignore[attr-defined]
    settings.OIDC_ISSUER_URL = ISSUER  # type: ignore[attr-defined]
    local = User.objects.create_user("root", password="local-password-123")
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("oidc_link", "nobody", "s-9")
    call_command("oidc_link", "root", "s-9")
    assert Event.objects.filter(reason="LinkedToProvider", name="root").exists()
    kwargs = {"username_claim": "preferred_username", "groups_claim": "groups"}
    user, _ = oidc.sign_in(ISSUER, _claims("s-9", "root", "ops"), **kwargs)
    assert user.pk == local.pk
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
    other = User.objects.create_user("other", password="local-password-456")
    with pytest.raises(CommandError, match="linked to 'root' already"):
        call_command("oidc_link", other.username, "s-9")
