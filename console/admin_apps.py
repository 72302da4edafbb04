"""django.contrib.admin's app with the console's site (console/admin_site.py: the console's
sign-in and second factor). Apart from console/apps.py, where Django would take it for a
second default of the console app; routed only with ENABLE_DJANGO_ADMIN (console/urls.py)."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class ConsoleAdminConfig(AdminConfig):
    default_site = "console.admin_site.ConsoleAdminSite"
