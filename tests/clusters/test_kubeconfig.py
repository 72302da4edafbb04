"""Kubeconfig validation (issuance/kubernetes/certmanager/kubeconfig.py): refused naming the field."""

from __future__ import annotations

import pytest

from issuance.kubernetes.certmanager.kubeconfig import KubeconfigError, contexts, validate

GOOD = """
apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}
- name: noserver
  cluster: {insecure-skip-tls-verify: true}
users:
- name: console
  user: {token: abc}
contexts:
- name: prod
  context: {cluster: prod, user: console}
- name: broken-server
  context: {cluster: noserver, user: console}
- name: ghost-cluster
  context: {cluster: elsewhere, user: console}
- name: ghost-user
  context: {cluster: prod, user: nobody}
current-context: prod
"""


def test_a_good_kubeconfig_and_its_contexts() -> None:
    validate(GOOD)
    validate(GOOD, "prod")
    assert contexts(GOOD) == ["prod", "broken-server", "ghost-cluster", "ghost-user"]


@pytest.mark.parametrize(
    ("text", "context", "field", "said"),
    [
        ("{not yaml", "", "kubeconfig", "not valid YAML"),
        ("just: a map", "", "kubeconfig", "not a kubeconfig"),
        (GOOD, "staging", "context", "no context 'staging'"),
        (GOOD, "broken-server", "kubeconfig", "no usable server URL"),
        (GOOD, "ghost-cluster", "context", "names cluster 'elsewhere'"),
        (GOOD, "ghost-user", "context", "names user 'nobody'"),
        (GOOD.replace("current-context: prod", ""), "", "context", "no current-context"),
    ],
)
def test_unusable_kubeconfigs_are_refused_naming_the_field(
    text: str, context: str, field: str, said: str
) -> None:
    with pytest.raises(KubeconfigError) as err:
        validate(text, context)
    assert err.value.field == field
    assert said in err.value.message
    assert "abc" not in err.value.message  # the token is never echoed
