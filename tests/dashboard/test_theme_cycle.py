"""Issue #36: the theme button cycles system → dark → light → system, also as a plain form (no script)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def _next(client) -> tuple[str, str]:
    """(the choice the button posts, the icon it shows for the current one)."""
    html = client.get("/audit/").content.decode()
    m = re.search(r'id="theme-toggle" name="theme" value="([a-z]+)"[^>]*>(.)</button>', html)
    return m.group(1), m.group(2)


def test_each_post_of_the_button_moves_to_the_next_choice_and_back_to_following_the_system(operator_client,
                                                                                          dashboard_backend):
    seen = []
    for _ in range(3):
        choice, icon = _next(operator_client)
        seen.append((icon, choice))
        assert operator_client.post("/theme", {"theme": choice, "next": "/audit/"}).status_code == 302
    assert seen == [("◐", "dark"), ("☾", "light"), ("☀", "auto")]
    assert 'data-theme-pref="auto"' in operator_client.get("/audit/").content.decode()
