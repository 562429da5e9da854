"""Django settings, driven by environment variables (small typed helpers that fail loudly)."""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from ffcore import secret_files
from ffcore.settings import Settings

from .assets import static_dirs, template_dirs

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use 1/0, true/false")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name, "").strip()
    return [p.strip() for p in raw.split(",") if p.strip()] if raw else default


def database_from_url(url: str) -> dict[str, object]:
    """`sqlite:///path` or `postgres://user:pass@host:port/name` as a DATABASES entry."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": parts.path[1:] if parts.path else ":memory:"}
    if parts.scheme in {"postgres", "postgresql", "pgsql"}:
        return {
            "ENGINE": "django.db.backends.postgresql", "NAME": parts.path.lstrip("/"),
            "USER": unquote(parts.username or ""), "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "", "PORT": str(parts.port or ""),
        }
    raise ImproperlyConfigured(f"DATABASE_URL scheme {parts.scheme!r} is not supported (sqlite or postgres)")


#: The engine's settings (FF_* variables); ffcore never reads Django settings.
FF_SETTINGS = Settings.from_env()
DATA_DIR = Path(FF_SETTINGS.data_dir)
if not DATA_DIR.is_absolute():
    # A checkout keeps `var/` beside manage.py; an installed package must not write into site-packages,
    # so there a relative FF_DATA_DIR is taken from the working directory.
    DATA_DIR = (BASE_DIR if (BASE_DIR / "manage.py").exists() else Path.cwd()) / DATA_DIR


def _secret_key() -> str:
    key = os.environ.get("DJANGO_SECRET_KEY", "").strip()
    if key:
        return key
    # Local installs: one random key persisted (0600) under the data dir so sessions survive restarts.
    return secret_files.read_or_create(DATA_DIR / "secret_key", lambda: secrets.token_urlsafe(50)).value


SECRET_KEY = _secret_key()
DEBUG = env_bool("FF_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])  # tests add testserver
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Behind TLS (FF_SECURE=1, or any https:// trusted origin): cookies only over https, HSTS, and the scheme
# taken from the proxy's X-Forwarded-Proto (the proxy must set it and strip a client's). docs/deployment.md.
FF_SECURE = env_bool("FF_SECURE", any(o.startswith("https://") for o in CSRF_TRUSTED_ORIGINS))
if FF_SECURE:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = int(os.environ.get("FF_HSTS_SECONDS", str(365 * 86400)))
    SECURE_SSL_REDIRECT = env_bool("FF_SSL_REDIRECT", False)
# Pages carry the CSRF token in their markup (hx-headers); no script needs to read the cookie.
CSRF_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "channels",
    "axes",  # sign-in throttling (AXES_* below)
    "ninja",  # /api/docs: Swagger UI from ninja's bundled static files (its CDN template otherwise)
    "dashboard",
]

MIDDLEWARE = [
    "dashboard.metrics.HttpMetricsMiddleware",  # first: it times (and counts) the whole answer
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",  # the Content-Security-Policy header (policy at the end of this file)
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # answers a locked-out sign-in with the lockout page (429)
    "dashboard.valkey_errors.ValkeyRefusalMiddleware",  # a refused read: 400 without Valkey's text
]

ROOT_URLCONF = "dashboard.urls"
# Request body cap (upstream server: 2 MiB); the API answers 413 over it.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": template_dirs(),  # the checkout's templates/; none installed (APP_DIRS: dashboard/templates)
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.access.role_context",
                "dashboard.backend.upstream_context",
            ],
        },
    }
]

DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    # Created 0600 (in a 0700 data dir) before SQLite opens it: SQLite keeps the mode, journals included.
    else {"ENGINE": "django.db.backends.sqlite3", "NAME": secret_files.private_file(DATA_DIR / "db.sqlite3")}
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Sign-in throttling (django-axes): 5 failures lock that username from that address for 15 minutes. The
# address is REMOTE_ADDR only: X-Forwarded-For is never trusted (a client could pick its own address).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("FF_SIGNIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]
AXES_LOCKOUT_TEMPLATE = "dashboard/locked.html"
AXES_VERBOSE = False

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = static_dirs()  # the checkout's static/; none installed (the app finder: dashboard/static)
STATIC_ROOT = DATA_DIR / "staticfiles"



def channel_layers(url: str | None) -> dict[str, object]:
    """Channels on the same Valkey. The pub/sub layer (channels-redis) fans a group message out with one
    PUBLISH and works against one server or any node of a cluster; in-memory when no URL is set."""
    if not url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    scheme, rest = url.split("://", 1)
    tls = scheme.startswith(("valkeys", "rediss"))
    host: object = ("rediss://" if tls else "redis://") + rest
    if "+cluster" in scheme:  # any live node serves; follow a failover of the one named (dashboard/layer_nodes.py)
        from .layer_nodes import node_following

        host = {"address": host, "connection_class": node_following(tls)}
    return {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
                        "CONFIG": {"hosts": [host], "prefix": "ff:ws:"}}}


CHANNEL_LAYERS = channel_layers(FF_SETTINGS.valkey_url)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("FF_LOG_LEVEL", "INFO")},
    # A refused form or unknown id (4xx, "Bad Request: /executions/") is the user's answer, not a server
    # problem: the access log keeps it; the console keeps only 5xx, with their tracebacks.
    "loggers": {"django.request": {"level": "ERROR"}},
}


# ---- Content-Security-Policy (django-csp) ------------------------------------------------------------
# Every script and stylesheet is one of our static files: no inline <script>, style="" or on*= handler
# anywhere (htmx's injected indicator <style> is turned off in base.html's htmx-config). connect-src
# 'self' also covers the live pages' ws:// and wss:// sockets to this host (CSP3 matches 'self' against the
# page's host with ws/wss; Chromium does). No framing; forms post only to us.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],  # Swagger UI's CSS draws its icons from data: URIs
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "object-src": ["'none'"],
    },
}
# ---- end of Content-Security-Policy ---------------------------------------------------------------------
