"""The dashboard's own rows (engine state lives in Valkey): saved views of the executions list (issue #25)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class SavedView(models.Model):
    """A user's named filter of the executions list: `query` is the list's query string (lane, state, kind, tag,
    limit), validated like the list's own filters when saved."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=80)
    query = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("name",)
        constraints = [models.UniqueConstraint(fields=("user", "name"), name="saved_view_name_per_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.query})"


class UserPreference(models.Model):
    """A user's dashboard preferences, kept with the account so they follow the user to any browser: the
    dark/light choice ("auto" follows the operating system)."""

    THEMES = ("auto", "light", "dark")

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="dashboard_prefs")
    theme = models.CharField(max_length=8, default="auto")

    def __str__(self) -> str:
        return f"{self.user_id}: theme {self.theme}"
