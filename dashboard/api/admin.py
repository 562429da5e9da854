"""POST /v1/admin/rotate-waitpoint-secret (server.md §3.2 row 25, §2.7): one rotation at a time.

Who may rotate: the API token (which may also choose the new secret, e.g. to share it with another
deployment) or a superuser session (the secret is then always generated here: a person signed in to the
dashboard never learns or picks a secret that would let them mint tokens). Every rotation, done or not, is
an audit entry.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field, field_validator

from ffcore.errors import ConfigError, ScriptError
from ffcore.suspension import hmac_secrets

from ..backend import get_backend
from .access import Denied, principal
from .audited import audited
from .errors import Busy, RotationTimeout
from .schemas import REASON, Error

router = Router(tags=["admin"])
audit_log = logging.getLogger("audit")
#: Single-flight within this process (try-acquire → 429); the per-partition locks in Valkey keep
#: rotations from other processes apart (they report those partitions `in_progress`).
_rotating = threading.Lock()
#: The whole call's cap (server.md §3.2 row 25).
ROTATE_TIMEOUT_S = 120.0


class RotateIn(Schema):
    new_kid: str | None = Field(default=None, min_length=1, max_length=64,
                                description="No ':' (the token delimiter), no spaces; generated when omitted")
    new_secret_hex: str | None = Field(default=None, min_length=2, max_length=1024,
                                       description="Even-length hex (API token only); generated when omitted")
    reason: str | None = REASON

    @field_validator("new_kid")
    @classmethod
    def _kid(cls, v: str | None) -> str | None:
        try:
            return None if v is None else hmac_secrets.validate_kid(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @field_validator("new_secret_hex")
    @classmethod
    def _secret(cls, v: str | None) -> str | None:
        try:
            return None if v is None else hmac_secrets.validate_secret(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None


class RotateOut(Schema):
    rotated: int = Field(description="Partitions now on new_kid (including ones already there)")
    failed: list[int]
    in_progress: list[int] = Field(description="Partitions another rotation held; run again to converge")
    new_kid: str


def _allowed(request: HttpRequest, body: RotateIn) -> None:
    who = principal(request)
    if who.is_token:
        return
    if not who.is_superuser:
        raise Denied(403, "rotating the waitpoint secret needs the API token or a superuser session")
    if body.new_secret_hex is not None:
        raise Denied(403, "only the API token may choose the new secret; omit new_secret_hex to have one generated")


@router.post("/admin/rotate-waitpoint-secret",
             response={200: RotateOut, 400: Error, 403: Error, 422: Error, 429: Error, 504: Error})
def rotate_waitpoint_secret(request: HttpRequest, body: RotateIn) -> dict[str, Any]:
    """Make `new_kid` the minting kid on every partition; the previous kid's tokens stay valid for
    `FF_WAITPOINT_HMAC_GRACE_MS`. Re-running with the same kid and secret converges. Capped at 120 s
    (504; the rotation may still finish in the background and a retry is safe). API token, or a superuser
    session (which cannot choose the secret)."""
    _allowed(request, body)
    backend = get_backend()
    kid = body.new_kid or f"k{backend.now_ms()}"
    secret = body.new_secret_hex or hmac_secrets.generate_secret()
    with audited(request, "rotate_waitpoint_secret", f"kid:{kid}", body.reason) as a:
        out = _rotate(backend, kid, secret)
        a.detail = (f"rotated={out['rotated']} failed={len(out['failed'])} in_progress={len(out['in_progress'])}"
                    f"{' (secret chosen by caller)' if body.new_secret_hex else ''}")
    return out


def _rotate(backend: Any, new_kid: str, new_secret_hex: str) -> dict[str, Any]:
    if not _rotating.acquire(blocking=False):
        raise Busy("admin_rotate", 1)
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["rep"] = hmac_secrets.rotate(backend, new_kid, new_secret_hex)
        except Exception as e:  # handed to the request thread (mapped to HTTP there)
            box["err"] = e
        finally:
            _rotating.release()  # only when the work ends: a retry meanwhile is told 429

    worker = threading.Thread(target=work, name="ff-rotate", daemon=True)
    worker.start()
    worker.join(ROTATE_TIMEOUT_S)
    if worker.is_alive():
        audit_log.error("waitpoint HMAC rotation to %s exceeded %gs; it may still finish", new_kid,
                        ROTATE_TIMEOUT_S)
        raise RotationTimeout(f"rotation exceeded {ROTATE_TIMEOUT_S:g}s server-side timeout; retry is safe "
                              "(re-running with the same kid and secret converges)")
    if "err" in box:
        raise box["err"]
    rep = box["rep"]
    rotated = len(rep.rotated) + len(rep.unchanged)
    for n, code in sorted(rep.failed.items()):
        audit_log.error("waitpoint HMAC rotation to %s failed on partition %d: %s", rep.new_kid, n, code)
    audit_log.info("waitpoint_hmac_rotation_complete kid=%s rotated=%d failed=%d in_progress=%d", rep.new_kid,
                   rotated, len(rep.failed), len(rep.in_progress))
    if not rotated and rep.failed:
        codes = ", ".join(sorted(set(rep.failed.values())))
        raise ScriptError("rotation_failed", [f"rotation failed on all partitions: {codes}"], "rotate_waitpoint_secret")
    if not rotated and not rep.in_progress:
        raise ScriptError("rotation_failed", ["no partitions"], "rotate_waitpoint_secret")
    return {"rotated": rotated, "failed": sorted(rep.failed), "in_progress": rep.in_progress, "new_kid": rep.new_kid}
