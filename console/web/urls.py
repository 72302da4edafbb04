"""Web console pages. Every page has partial URLs that live.js re-fetches."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from console.web import (
    apitokens,
    audit,
    auth,
    certificate_actions,
    certificate_endpoints,
    certificate_files,
    certificaterequests,
    certificates,
    challenges,
    clusters,
    dashboard,
    downloads,
    issuer_edit,
    issuers,
    mirrored,
    notifications,
    oidc,
    oidc_rules,
    orders,
    password,
    policy,
    signin_locks,
    two_factor,
    users,
    webhooks,
)

app_name = "web"

urlpatterns: list[URLPattern | URLResolver] = [
    path("login/", oidc.password_login(auth.login), name="login"),
    path("login/sso/", oidc.start, name="oidc-login"),
    path("login/sso/callback/", oidc.callback, name="oidc-callback"),
    path("logout/", oidc.provider_logout(auth.logout), name="logout"),
    # local accounts: the second factor and passwords (console/signin_steps.py orders them)
    path("login/verify/", two_factor.signin_verify, name="signin-verify"),
    path("account/security/", two_factor.account_security, name="account-security"),
    path("account/password/", password.password_change, name="password-change"),
    path("account/two-factor/setup/", two_factor.setup, name="two-factor-setup"),
    path("account/two-factor/qr.svg", two_factor.setup_qr, name="two-factor-qr"),
    path("account/two-factor/recovery-codes/", two_factor.recovery_codes, name="recovery-codes"),
    path(
        "account/two-factor/recovery-codes/new/",
        two_factor.recovery_codes_new,
        name="recovery-codes-new",
    ),
    path("", dashboard.dashboard, name="dashboard"),
    path(
        "partials/dashboard/<slug:section>/",
        dashboard.dashboard_partial,
        name="dashboard-partial",
    ),
    path("certificates/", certificates.certificate_list, name="certificates"),
    path("new-certificate/", certificates.certificate_new, name="certificate-new"),
    path("certificates/<str:name>/", certificates.certificate_detail, name="certificate-detail"),
    path("certificates/<str:name>/renew/", certificates.force_renew, name="certificate-renew"),
    path("certificates/<str:name>/revoke/", certificates.revoke, name="certificate-revoke"),
    # The Endpoints card (console/web/certificate_endpoints.py).
    path(
        "certificates/<str:name>/endpoints/",
        certificate_endpoints.endpoint_add,
        name="certificate-endpoint-add",
    ),
    path(
        "certificates/<str:name>/endpoints/<int:pk>/remove/",
        certificate_endpoints.endpoint_remove,
        name="certificate-endpoint-remove",
    ),
    path(
        "certificates/<str:name>/endpoints/check/",
        certificate_endpoints.endpoint_check,
        name="certificate-endpoint-check",
    ),
    # Files from the browser (console/web/certificate_files.py): public files by GET, the
    # private key and PKCS#12 by POST (admin, audited).
    path(
        "certificates/<str:name>/files/key/",
        certificate_files.key_files,
        name="certificate-key-files",
    ),
    path(
        "certificates/<str:name>/files/key/key.pem",
        certificate_files.key_pem,
        name="certificate-key-pem",
    ),
    path(
        "certificates/<str:name>/files/key/bundle.p12",
        certificate_files.key_pkcs12,
        name="certificate-key-p12",
    ),
    path(
        "certificates/<str:name>/files/<str:filename>",
        certificate_files.certificate_file,
        name="certificate-file",
    ),
    path(
        "issuers/<str:name>/files/<str:filename>", certificate_files.issuer_file, name="issuer-file"
    ),
    # Scoped download tokens for one certificate (console/web/downloads.py).
    path(
        "certificates/<str:name>/downloads/",
        downloads.download_tokens,
        name="certificate-downloads",
    ),
    path(
        "certificates/<str:name>/downloads/<int:pk>/revoke/",
        downloads.download_token_revoke,
        name="certificate-download-revoke",
    ),
    path(
        "partials/certificates/",
        certificates.certificate_list_partial,
        name="certificates-partial",
    ),
    path(
        "partials/certificates/<str:name>/<slug:part>/",
        certificates.certificate_partial,
        name="certificate-partial",
    ),
    # console-certs: edit (with preview), clone, delete, bulk actions with live progress
    path(
        "certificates/<str:name>/edit/",
        certificate_actions.certificate_edit,
        name="certificate-edit",
    ),
    path(
        "certificates/<str:name>/clone/",
        certificate_actions.certificate_clone,
        name="certificate-clone",
    ),
    path(
        "certificates/<str:name>/delete/",
        certificate_actions.certificate_delete,
        name="certificate-delete",
    ),
    path("bulk/", certificate_actions.bulk_start, name="bulk-start"),
    path("bulk/<uuid:action_id>/", certificate_actions.bulk_detail, name="bulk-detail"),
    path("bulk/<uuid:action_id>/step/", certificate_actions.bulk_step, name="bulk-step"),
    path("partials/bulk/<uuid:action_id>/", certificate_actions.bulk_partial, name="bulk-partial"),
    path("requests/", certificaterequests.approval_queue, name="requests"),
    path("requests/<str:name>/approve/", certificaterequests.approve, name="request-approve"),
    path("requests/<str:name>/deny/", certificaterequests.deny, name="request-deny"),
    path("partials/requests/", certificaterequests.approval_queue_partial, name="requests-partial"),
    path("issuers/", issuers.issuer_list, name="issuers"),
    path("partials/issuers/", issuers.issuer_list_partial, name="issuers-partial"),
    path("issuers/<str:name>/test-dns/", issuers.test_dns, name="issuer-test-dns"),
    # console-issuers: issuers made, changed and deleted in the console (admin).
    path("new-issuer/", issuer_edit.issuer_new, name="issuer-new"),
    path("new-issuer/directory/", issuer_edit.issuer_directory, name="issuer-directory"),
    path("issuers/<str:name>/edit/", issuer_edit.issuer_edit, name="issuer-edit"),
    path("issuers/<str:name>/delete/", issuer_edit.issuer_delete, name="issuer-delete"),
    path("orders/", orders.order_list, name="orders"),
    path("partials/orders/", orders.order_list_partial, name="orders-partial"),
    path("challenges/", challenges.challenge_list, name="challenges"),
    path("partials/challenges/", challenges.challenge_list_partial, name="challenges-partial"),
    # console-policy-audit: approval policy editor and audit log
    path("issuers/<str:name>/policy/", policy.policy_editor, name="issuer-policy"),
    path(
        "issuers/<str:name>/policy/preview/",
        policy.preview_policy,
        name="issuer-policy-preview",
    ),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/export.csv", audit.audit_export, name="audit-export"),
    # console-users-charts: users (admin) and each user's own API tokens
    path("users/", users.user_list, name="users"),
    path("users/locks/", signin_locks.lock_list, name="signin-locks"),
    path("users/sso/", oidc_rules.rules_page, name="oidc-rules"),
    path("users/locks/lift/", signin_locks.lock_lift, name="signin-lock-lift"),
    path("users/new/", users.user_create, name="user-create"),
    path("users/<int:pk>/roles/", users.user_roles, name="user-roles"),
    path("users/<int:pk>/scopes/", users.user_scopes, name="user-scopes"),
    path("users/<int:pk>/disable/", users.user_disable, name="user-disable"),
    path("users/<int:pk>/enable/", users.user_enable, name="user-enable"),
    path("users/<int:pk>/password/reset/", password.reset, name="user-password-reset"),
    path("users/<int:pk>/two-factor/reset/", two_factor.reset, name="user-two-factor-reset"),
    path("account/tokens/", apitokens.token_list, name="tokens"),
    path("account/tokens/new/", apitokens.token_create, name="token-create"),
    path("account/tokens/<int:pk>/revoke/", apitokens.token_revoke, name="token-revoke"),
    # issuance-webhooks: webhooks told of new revisions (admin)
    path("webhooks/", webhooks.webhook_list, name="webhooks"),
    path("webhooks/new/", webhooks.webhook_create, name="webhook-create"),
    path("webhooks/<str:name>/delete/", webhooks.webhook_delete, name="webhook-delete"),
    path("webhooks/<str:name>/test/", webhooks.webhook_test, name="webhook-test"),
    # notifications: channels, rules, deliveries
    path("notifications/", notifications.notification_page, name="notifications"),
    path("notifications/channels/new/", notifications.channel_create, name="channel-create"),
    path(
        "notifications/channels/<str:name>/test/", notifications.channel_test, name="channel-test"
    ),
    path(
        "notifications/channels/<str:name>/edit/", notifications.channel_edit, name="channel-edit"
    ),
    path(
        "notifications/channels/<str:name>/toggle/",
        notifications.channel_toggle,
        name="channel-toggle",
    ),
    path(
        "notifications/channels/<str:name>/delete/",
        notifications.channel_delete,
        name="channel-delete",
    ),
    path("notifications/rules/new/", notifications.rule_create, name="rule-create"),
    path("notifications/rules/<int:pk>/delete/", notifications.rule_delete, name="rule-delete"),
    # cert-manager cluster mode: clusters (console/web/clusters.py) and the mirrored objects
    # pages (console/web/mirrored.py); lists show mirrored rows beside the console's own.
    path("clusters/", clusters.cluster_list, name="clusters"),
    path("cluster-rbac.yaml", clusters.cluster_rbac, name="cluster-rbac"),
    path("partials/clusters/", clusters.cluster_list_partial, name="clusters-partial"),
    path("new-cluster/", clusters.cluster_add, name="cluster-add"),
    path("new-cluster/contexts/", clusters.kubeconfig_contexts, name="cluster-contexts"),
    path("clusters/<slug:cluster>/", clusters.cluster_detail, name="cluster-detail"),
    path(
        "partials/cluster/<slug:cluster>/",
        clusters.cluster_detail_partial,
        name="cluster-detail-partial",
    ),
    path("clusters/<slug:cluster>/edit/", clusters.cluster_edit, name="cluster-edit"),
    path("clusters/<slug:cluster>/delete/", clusters.cluster_delete, name="cluster-delete"),
    path("clusters/<slug:cluster>/check/", clusters.cluster_check, name="cluster-check"),
    path(
        "clusters/<slug:cluster>/clusterissuers/<str:name>/",
        mirrored.mirrored_clusterissuer,
        name="mirrored-clusterissuer",
    ),
    path(
        "clusters/<slug:cluster>/<str:namespace>/certificates/<str:name>/",
        mirrored.mirrored_certificate,
        name="mirrored-certificate",
    ),
    path(
        "clusters/<slug:cluster>/<str:namespace>/certificates/<str:name>/renew/",
        mirrored.mirrored_renew,
        name="mirrored-renew",
    ),
    path(
        "clusters/<slug:cluster>/<str:namespace>/certificaterequests/<str:name>/approve/",
        mirrored.mirrored_approve,
        name="mirrored-approve",
    ),
    path(
        "clusters/<slug:cluster>/<str:namespace>/certificaterequests/<str:name>/deny/",
        mirrored.mirrored_deny,
        name="mirrored-deny",
    ),
    path(
        "clusters/<slug:cluster>/<str:namespace>/<slug:kind_path>/<str:name>/",
        mirrored.mirrored_object,
        name="mirrored-object",
    ),
    path(
        "partials/clusters/<slug:cluster>/<str:namespace>/certificates/<str:name>/<slug:part>/",
        mirrored.mirrored_certificate_partial,
        name="mirrored-certificate-partial",
    ),
    path(
        "partials/clusters/<slug:cluster>/<str:namespace>/certificaterequests/<str:name>/",
        mirrored.mirrored_request_partial,
        name="mirrored-request-partial",
    ),
]
