"""Where the dashboard's templates and static files are, installed or in a checkout.

A wheel carries them inside the package (`dashboard/templates/`, `dashboard/static/`: setup.py maps the
repository's top-level folders there), where APP_DIRS and the app static finder find them with no setting.
A checkout (and an editable install) keeps them at the repository's top, which a project names in
TEMPLATES DIRS / STATICFILES_DIRS. These return what to add: nothing when installed.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def _dirs(name: str) -> list[Path]:
    if (PACKAGE_DIR / name).is_dir():
        return []  # installed: found as the app's own folder
    return [PACKAGE_DIR.parent / name]


def template_dirs() -> list[Path]:
    """TEMPLATES[...]["DIRS"] entries the dashboard needs (with APP_DIRS on)."""
    return _dirs("templates")


def static_dirs() -> list[Path]:
    """STATICFILES_DIRS entries the dashboard needs (with the default finders)."""
    return _dirs("static")
