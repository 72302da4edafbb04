"""Post/redirect/get on every console form that creates something: after each create the
browser is on a result page it reached by GET; reloading it creates nothing twice, and a
secret shown once (a token, a one-time password, a generated webhook secret) is gone after
the reload. In a real Chromium against the app without its worker, so only the forms
create rows."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import (
    ApiToken,
    Certificate,
    Cluster,
    DownloadToken,
    IssuanceWebhook,
    Issuer,
    NotificationChannel,
    NotificationRule,
)
from tests.browser.pages import login
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.web.mirror_builders import kubeconfig_text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@dataclass(frozen=True)
class CreateForm:
    name: str
    start: str  # the page with the form
    fill: Callable[[Any], None]
    submit: str
    result: str  # the result page's path (a regular expression)
    count: Callable[[], int]  # rows the create made
    secret: str = ""  # the element showing a secret once, if any


def _fill(**fields: str) -> Callable[[Any], None]:
    def fill(page: Any) -> None:
        for selector, value in fields.items():
            page.fill(selector, value)

    return fill


def _issuer(page: Any) -> None:
    page.fill("#id_name", "prg-ca")
    page.select_option("#id_kind", "ca")
    page.check("input[name=ca_mode][value=generate]")
    page.fill("#id_ca_common_name", "PRG Root")


def _cluster(page: Any) -> None:
    page.fill("#id_name", "prg-cluster")
    page.fill("#id_kubeconfig", kubeconfig_text("prg-admin"))
    page.locator("#id_kubeconfig").blur()  # the form's script looks the contexts up
    page.locator("#context-offer").filter(has_text="prg-admin").wait_for()
    page.fill("#id_context", "prg-admin")


def _rule(page: Any) -> None:
    page.fill("#new-rule-form input[name=name]", "prg-rule")
    page.select_option("#new-rule-form select[name=channel]", "prg-channel")
    page.select_option("#new-rule-form select[name=condition]", "issuance_failed")


FORMS = (
    CreateForm(
        "certificate",
        "/new-certificate/",
        _fill(**{"#id_name": "prg-web", "#id_dns_names": "prg.example.test"}),
        "#new-certificate button[type=submit]",
        r"/certificates/prg-web/$",
        lambda: Certificate.objects.filter(name="prg-web").count(),
    ),
    CreateForm(
        "certificate-clone",
        "/certificates/prg-web/clone/",
        _fill(**{"#id_name": "prg-copy"}),
        "button[type=submit].primary",
        r"/certificates/prg-copy/$",
        lambda: Certificate.objects.filter(name="prg-copy").count(),
    ),
    CreateForm(
        "issuer",
        "/new-issuer/",
        _issuer,
        "#issuer-save",
        r"/issuers/$",
        lambda: Issuer.objects.filter(name="prg-ca").count(),
    ),
    CreateForm(
        "cluster",
        "/new-cluster/",
        _cluster,
        "#save-cluster",
        r"/clusters/prg-cluster/$",
        lambda: Cluster.objects.filter(name="prg-cluster").count(),
    ),
    CreateForm(
        "notification-channel",
        "/notifications/",
        _fill(
            **{
                "#new-channel-form input[name=name]": "prg-channel",
                "#new-channel-form input[name=url]": "json://prg.example.test/hook",
            }
        ),
        "#new-channel-form button[type=submit]",
        r"/notifications/$",
        lambda: NotificationChannel.objects.filter(name="prg-channel").count(),
    ),
    CreateForm(
        "notification-rule",
        "/notifications/",
        _rule,
        "#new-rule-form button[type=submit]",
        r"/notifications/$",
        lambda: NotificationRule.objects.filter(name="prg-rule").count(),
    ),
    CreateForm(
        "webhook",
        "/webhooks/",
        _fill(
            **{
                "#new-webhook-form input[name=name]": "prg-hook",
                "#new-webhook-form input[name=url]": "https://hooks.example.test/prg",
            }
        ),
        "#new-webhook-form button[type=submit]",
        r"/webhooks/$",
        lambda: IssuanceWebhook.objects.filter(name="prg-hook").count(),
        secret="#webhook-secret",
    ),
    CreateForm(
        "user",
        "/users/",
        _fill(**{"#new-user input[name=username]": "prg-user"}),
        "#new-user button[type=submit]",
        r"/users/$",
        lambda: User.objects.filter(username="prg-user").count(),
        secret="#one-time-password",
    ),
    CreateForm(
        "api-token",
        "/account/tokens/",
        _fill(**{"#new-token-form input[name=name]": "prg-token"}),
        "#new-token-form button[type=submit]",
        r"/account/tokens/$",
        lambda: ApiToken.objects.filter(name="prg-token").count(),
        secret="#token-text",
    ),
    CreateForm(
        "download-token",
        "/certificates/prg-web/downloads/",
        _fill(**{"#new-download-token-form input[name=name]": "prg-host"}),
        "#new-download-token-form button[type=submit]",
        r"/certificates/prg-web/downloads/$",
        lambda: DownloadToken.objects.filter(name="prg-host").count(),
        secret="#token-text",
    ),
)


def test_reloading_every_result_page_creates_nothing_twice(
    new_page: Callable[..., Any], quiet_server: str, role_users: dict[str, User]
) -> None:
    make_selfsigned_issuer("selfsigned")
    make_certificate("kept", Issuer.objects.get(name="selfsigned"))
    page = new_page(quiet_server)
    login(page, "admin")
    for form in FORMS:
        page.goto(form.start)
        form.fill(page)
        page.click(form.submit)
        page.wait_for_url(re.compile(form.result))
        assert form.count() == 1, form.name
        if form.secret:
            assert page.locator(form.secret).inner_text().strip(), form.name
        reloaded = page.reload()
        assert reloaded is not None and reloaded.request.method == "GET", form.name
        assert re.search(form.result, page.url), (form.name, page.url)
        assert form.count() == 1, f"{form.name}: created again by a reload"
        if form.secret:
            assert page.locator(form.secret).count() == 0, f"{form.name}: secret shown again"
