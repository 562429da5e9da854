"""Websockets end with the session that opened them (issue #37): a mixin for the consumers.

Channels authenticates a socket once, at the handshake; afterwards a logout, a deactivation or a lost role
would not reach it. `SessionGuard` re-reads the session and the user from the database every
`SESSION_CHECK_S` seconds and closes the socket with 4401 when the session is gone (logout, expiry, a
password change), the user is inactive, or the user no longer holds a role the socket opened with.
A poll rather than a per-user push: it also catches changes made in the admin or a shell, which send no
event, and it keeps the consumers' push path untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.utils.crypto import constant_time_compare

from .access import OPERATOR_GROUP, VIEWER_GROUP

#: The close code of a socket whose user is no longer signed in (the consumers' UNAUTHORIZED).
SESSION_ENDED = 4401
#: Seconds between two checks of one socket's session ("closed within seconds").
SESSION_CHECK_S = 2.0


def roles(user: Any) -> frozenset[str]:
    """The roles that decide what a socket may show: superuser, operator, viewer."""
    names = set(user.groups.filter(name__in=(OPERATOR_GROUP, VIEWER_GROUP)).values_list("name", flat=True))
    if user.is_superuser:
        names.add("superuser")
    return frozenset(names)


def current(session_key: str | None, user_pk: Any) -> tuple[bool, frozenset[str]]:
    """(the session still signs in this active user, the user's roles now), read fresh from the database."""
    if not session_key:
        return False, frozenset()
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    data = store.load()  # an empty dict when the session was flushed (logout) or expired
    if str(data.get(SESSION_KEY, "")) != str(user_pk) or not data.get(BACKEND_SESSION_KEY):
        return False, frozenset()
    user = get_user_model().objects.filter(pk=user_pk, is_active=True).first()
    if user is None:
        return False, frozenset()
    if not constant_time_compare(str(data.get(HASH_SESSION_KEY, "")), user.get_session_auth_hash()):
        return False, frozenset()  # the password changed: Django ends the other sessions too
    return True, roles(user)


class SessionGuard:
    """Mix in before the Channels consumer class: checking starts at `accept()` and stops at disconnect."""

    scope: dict[str, Any]
    _session_task: asyncio.Task[None] | None = None

    async def accept(self, subprotocol: str | None = None, headers: Any = None) -> None:
        await super().accept(subprotocol, headers)  # type: ignore[misc]
        user = self.scope["user"]
        session = self.scope.get("session")
        key = getattr(session, "session_key", None)
        opened_with = await database_sync_to_async(roles)(user)
        self._session_task = asyncio.ensure_future(self._watch_session(key, user.pk, opened_with))

    async def _watch_session(self, key: str | None, user_pk: Any, opened_with: frozenset[str]) -> None:
        check = database_sync_to_async(current)
        while True:
            await asyncio.sleep(SESSION_CHECK_S)
            alive, now = await check(key, user_pk)
            if not alive or not opened_with <= now:
                self._session_task = None
                await self.close(code=SESSION_ENDED)  # type: ignore[attr-defined]
                return

    async def websocket_disconnect(self, message: dict[str, Any]) -> None:
        task, self._session_task = self._session_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await super().websocket_disconnect(message)  # type: ignore[misc]
