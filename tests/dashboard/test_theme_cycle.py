"""Issue #36: the theme button cycles system → dark → light → system, also as a plain form (no script)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def _next(client) -> str:
    html = client.get("/audit/").content.decode()
    return re.search(r'id="theme-toggle" name="theme" value="([a-z]+)"', html).group(1)


def test_each_post_of_the_button_moves_to_the_next_choice_and_back_to_following_the_system(operator_client,
                                                                                          dashboard_backend):
    seen = []
    for _ in range(3):
        choice = _next(operator_client)
        seen.append(choice)
        assert operator_client.post("/theme", {"theme": choice, "next": "/audit/"}).status_code == 302
    assert seen == ["dark", "light", "auto"]
    assert 'data-theme-pref="auto"' in operator_client.get("/audit/").content.decode()
