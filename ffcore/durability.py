"""Replicated durability: every write batch waits until the node's replicas have it (`FF_DURABILITY=replicated`).

Valkey replicates asynchronously: a primary acknowledges a write before any replica has it, so a primary that
dies inside the replication lag takes acknowledged writes with it, after their handlers ran. In replicated
mode the engine's client uses `ReplicatedConnection`: every batch sent on a connection that contains a write
(one command or a whole pipeline) carries `WAIT numreplicas timeout` at its end, in the same write to the
same socket, so the WAIT goes to the node that took the write and costs no extra round trip. The reply of
the batch's last command is handed back only after the WAIT reply said enough replicas acknowledged;
otherwise `ReplicationTimeout` is raised: the write is applied on the primary but may not survive a
failover.

Hooking the connection makes it the one layer every write passes: single commands, redis-py pipelines
(standalone and per node of a cluster pipeline), MULTI/EXEC and the packed hot path of
`connection.ThreadConnections`. The default mode uses redis-py's own connection class: nothing changes.

WAIT, not WAITAOF: the promise is "a replica has it in memory", which is what a failover promotes. A crash
of the primary and its replica within the same second is outside the promise (documented).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import hiredis
import redis
from redis.commands import READ_COMMANDS

from .errors import ReplicationTimeout

#: Commands that change no data (or are already blocking on replicas) but are not in redis-py's read list.
_NOT_WRITES = frozenset({
    "PING", "ECHO", "TIME", "INFO", "CLIENT", "CONFIG", "CLUSTER", "COMMAND", "HELLO", "AUTH", "SELECT",
    "READONLY", "READWRITE", "ASKING", "WAIT", "WAITAOF", "SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE",
    "PUNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE", "PUBLISH", "SPUBLISH", "WATCH", "UNWATCH", "MULTI",
    "DISCARD", "ROLE", "DBSIZE", "MEMORY", "SLOWLOG", "LATENCY", "OBJECT", "QUIT", "RESET", "FUNCTION",
    "SCRIPT", "XINFO",
})
#: Library functions that only read: an FCALL of one is not a write (no WAIT, and it answers on a node whose
#: replicas are behind, as any read does).
_READ_FUNCTIONS = frozenset({
    "FF_VERSION", "FF_BUILD_VERSION", "FF_READ_ATTEMPT_STREAM", "FF_READ_SUMMARY", "FF_EVALUATE_FLOW_ELIGIBILITY",
    "FF_LIST_WAITPOINT_HMAC_KIDS",
})
#: The data-changing FUNCTION subcommands (FUNCTION LIST / DUMP / STATS change nothing).
_FUNCTION_WRITES = frozenset({"LOAD", "DELETE", "FLUSH", "RESTORE"})


def _name(arg: Any) -> str:
    return (bytes(arg).decode() if isinstance(arg, bytes | bytearray | memoryview) else str(arg)).upper()


def is_write(args: Sequence[Any]) -> bool:
    """May this command change data? Unknown commands count as writes: a needless WAIT costs time, a
    missed one costs the promise."""
    if not args:
        return False
    name = _name(args[0])
    if name == "FUNCTION":
        return len(args) > 1 and _name(args[1]) in _FUNCTION_WRITES
    if name == "FCALL":
        return len(args) < 2 or _name(args[1]) not in _READ_FUNCTIONS
    return name not in READ_COMMANDS and name not in _NOT_WRITES


class _Batch(list[bytes]):
    """Packed commands with a WAIT at the end; `replies` is how many replies come before the WAIT's."""

    replies = 0


class ReplicatedConnection(redis.Connection):
    """A connection that appends `WAIT` to every batch holding a write and checks its reply (module docstring).

    `replicas` / `timeout_ms` are set on the per-client subclass `connection_class` makes."""

    replicas = 1
    timeout_ms = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        base: Any = super()  # redis-py's connection methods are untyped
        base.__init__(*args, **kwargs)
        #: Per batch sent and not yet fully read: how many replies remain before its WAIT reply.
        self._before_wait: deque[int] = deque()
        #: Whether a command of the batch being read answered without an error.
        self._any_ok = False
        wait: tuple[Any, ...] = ("WAIT", self.replicas, self.timeout_ms)
        self._wait_packed = hiredis.pack_command(wait)

    # -- sending: decide per batch, append the WAIT -------------------------------------------------
    def with_wait(self, packed: list[bytes], commands: Iterable[Sequence[Any]]) -> list[bytes]:
        """`packed` (the commands, packed) with a WAIT appended when one of them is a write."""
        n, write = 0, False
        for args in commands:
            n += 1
            write = write or is_write(args)
        if not write:
            return packed
        batch = _Batch([*packed, self._wait_packed])
        batch.replies = n
        return batch

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        base: Any = super()
        if not is_write(args):
            base.send_command(*args, **kwargs)
            return
        self.send_packed_command(self.with_wait(list(base.pack_command(*args)), [args]),
                                 check_health=kwargs.get("check_health", True))

    def pack_commands(self, commands: Iterable[Sequence[Any]]) -> list[bytes]:
        commands = list(commands)
        base: Any = super()
        return self.with_wait(list(base.pack_commands(commands)), commands)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        base: Any = super()
        base.send_packed_command(command, check_health=check_health)
        if isinstance(command, _Batch):
            self._before_wait.append(command.replies)  # only once the bytes are out: a failed send expects none

    # -- reading: after a batch's last reply, read and check its WAIT reply -----------------------
    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            reply = super().read_response(*args, **kwargs)
        except redis.ResponseError:
            self._replied(ok=False)  # an error reply is still that command's reply
            raise
        self._replied(ok=True)
        return reply

    def _replied(self, *, ok: bool) -> None:
        if not self._before_wait:
            return
        self._any_ok = self._any_ok or ok
        self._before_wait[0] -= 1
        if self._before_wait[0] > 0:
            return
        self._before_wait.popleft()
        any_ok, self._any_ok = self._any_ok, False
        try:
            acked = int(super().read_response())
        except redis.ResponseError:
            # The node refused the WAIT (it is a replica now: it answered MOVED to the writes, which the
            # cluster client re-sends to the new owner). If something in the batch did run, it is unconfirmed.
            if not any_ok:
                return
            acked = 0
        if acked < self.replicas:
            raise ReplicationTimeout(acked, self.replicas, self.timeout_ms, f"{self.host}:{self.port}")

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._before_wait.clear()  # the replies (and the WAIT's) died with the socket
        self._any_ok = False
        base: Any = super()
        base.disconnect(*args, **kwargs)


def connection_class(base: type[redis.Connection], replicas: int, timeout_ms: int) -> type[ReplicatedConnection]:
    """The connection class (over `base`: plain or TLS) of a client that waits for `replicas` replicas,
    `timeout_ms` at most per batch."""
    return type("ReplicatedConnection", (ReplicatedConnection, base),
                {"replicas": replicas, "timeout_ms": timeout_ms})
