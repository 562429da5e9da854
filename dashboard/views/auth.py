"""Sign-in: Django's LoginView, except that a refused form answers 400 like every other form here."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpResponse


class LoginView(auth_views.LoginView):
    template_name = "dashboard/login.html"

    def form_invalid(self, form: Any) -> HttpResponse:
        return self.render_to_response(self.get_context_data(form=form), status=400)
