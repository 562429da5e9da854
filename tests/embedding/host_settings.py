"""An existing Django project that embeds the FlowFabric dashboard under /ff/: the settings docs/embedding.md
lists, and nothing from dashboard/settings.py. tests/embedding/test_embedding.py runs host_checks.py with it."""

from __future__ import annotations

import tempfile
from pathlib import Path

from dashboard.assets import static_dirs, template_dirs
from ffcore.settings import Settings

SECRET_KEY = "host-project-test-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
ROOT_URLCONF = "tests.embedding.host_urls"
ASGI_APPLICATION = "tests.embedding.host_asgi.application"

INSTALLED_APPS = [
    "django.contrib.admin",  # the host's own apps; the admin proves the dashboard's names do not clash
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # the dashboard and what it uses
    "django_htmx",
    "template_partials",
    "channels",
    "ninja",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx: pages answer htmx requests with their partials
]

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [*template_dirs()],  # the host's own dirs would go here too
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.access.role_context",  # is_operator: shows or hides the action forms
            ],
        },
    }
]
STATIC_URL = "static/"
STATICFILES_DIRS = [*static_dirs()]

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True

# The dashboard signs people in on its own page; the host could point this at its own sign-in instead.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

#: The engine's settings (FF_VALKEY_URL, FF_WAITPOINT_HMAC_SECRET, …); the dashboard reads nothing else of ffcore's.
FF_SETTINGS = Settings.from_env()
#: Where the management commands (ffworker, ffscanners) look for the embedded server's files.
DATA_DIR = Path(tempfile.gettempdir()) / "ff-embedding-test"

CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
