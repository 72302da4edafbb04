"""Login and logout: Django's auth views with the console's template (CSRF-protected POSTs)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

login = auth_views.LoginView.as_view(
    template_name="registration/login.html", redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view()
