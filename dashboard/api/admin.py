"""POST /v1/admin/rotate-waitpoint-secret (server.md §3.2 row 25, §2.7): one rotation at a time."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field, field_validator

from ffcore import hmac_secrets
from ffcore.errors import ConfigError, ScriptError

from ..engine import get_backend
from .errors import Busy, RotationTimeout
from .schemas import Error

router = Router(tags=["admin"])
audit_log = logging.getLogger("audit")
#: Single-flight within this process (try-acquire → 429); the per-partition locks in Valkey keep
#: rotations from other processes apart (they report those partitions `in_progress`).
_rotating = threading.Lock()
#: The whole call's cap (server.md §3.2 row 25).
ROTATE_TIMEOUT_S = 120.0


class RotateIn(Schema):
    new_kid: str = Field(min_length=1, max_length=64, description="No ':' (the token delimiter), no spaces")
    new_secret_hex: str = Field(min_length=2, max_length=1024, description="Even-length hex, e.g. 64 chars")

    @field_validator("new_kid")
    @classmethod
    def _kid(cls, v: str) -> str:
        try:
            return hmac_secrets.validate_kid(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None

    @field_validator("new_secret_hex")
    @classmethod
    def _secret(cls, v: str) -> str:
        try:
            return hmac_secrets.validate_secret(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None


class RotateOut(Schema):
    rotated: int = Field(description="Partitions now on new_kid (including ones already there)")
    failed: list[int]
    in_progress: list[int] = Field(description="Partitions another rotation held; run again to converge")
    new_kid: str


@router.post("/admin/rotate-waitpoint-secret",
             response={200: RotateOut, 400: Error, 422: Error, 429: Error, 504: Error})
def rotate_waitpoint_secret(request: HttpRequest, body: RotateIn) -> dict[str, Any]:
    """Make `new_kid` the minting kid on every partition; the previous kid's tokens stay valid for
    `FF_WAITPOINT_HMAC_GRACE_MS`. Re-running with the same kid and secret converges. Capped at 120 s
    (504; the rotation may still finish in the background and a retry is safe)."""
    if not _rotating.acquire(blocking=False):
        raise Busy("admin_rotate", 1)
    box: dict[str, Any] = {}
    backend = get_backend()

    def work() -> None:
        try:
            box["rep"] = hmac_secrets.rotate(backend, body.new_kid, body.new_secret_hex)
        except Exception as e:  # handed to the request thread (mapped to HTTP there)
            box["err"] = e
        finally:
            _rotating.release()  # only when the work ends: a retry meanwhile is told 429

    worker = threading.Thread(target=work, name="ff-rotate", daemon=True)
    worker.start()
    worker.join(ROTATE_TIMEOUT_S)
    if worker.is_alive():
        audit_log.error("waitpoint HMAC rotation to %s exceeded %gs; it may still finish", body.new_kid,
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
