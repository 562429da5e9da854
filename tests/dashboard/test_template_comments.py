"""Django's `{# … #}` comment is one line only: one spread over several lines is printed as page text."""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"


def test_no_template_opens_a_one_line_comment_it_closes_on_another_line():
    offenders = [f"{p.relative_to(TEMPLATES)}:{n}" for p in TEMPLATES.rglob("*.html")
                 for n, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"\{#(?!.*#\})", line)]
    assert offenders == []
