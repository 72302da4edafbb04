"""Web console pages. Every page has partial URLs that live.js re-fetches."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, path

from console.web import (
    audit,
    auth,
    certificate_actions,
    certificates,
    challenges,
    clusters,
    dashboard,
    downloads,
    issuer_edit,
    issuers,
    mirrored,
    notifications,
    orders,
    policy,
    requests,
    tokens,
    users,
    webhooks,
)

app_name = "web"

urlpatterns: list[URLPattern | URLResolver] = [
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
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
    path("requests/", requests.approval_queue, name="requests"),
    path("requests/<str:name>/approve/", requests.approve, name="request-approve"),
    path("requests/<str:name>/deny/", requests.deny, name="request-deny"),
    path("partials/requests/", requests.approval_queue_partial, name="requests-partial"),
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
    path("users/new/", users.user_create, name="user-create"),
    path("users/<int:pk>/roles/", users.user_roles, name="user-roles"),
    path("users/<int:pk>/scopes/", users.user_scopes, name="user-scopes"),
    path("users/<int:pk>/disable/", users.user_disable, name="user-disable"),
    path("users/<int:pk>/enable/", users.user_enable, name="user-enable"),
    path("account/tokens/", tokens.token_list, name="tokens"),
    path("account/tokens/new/", tokens.token_create, name="token-create"),
    path("account/tokens/<int:pk>/revoke/", tokens.token_revoke, name="token-revoke"),
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
