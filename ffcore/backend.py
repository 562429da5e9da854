"""A connected engine backend: the client, its settings, and FCALL execution with self-heal."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from ffcore import library

from . import upstream as up
from .connection import Client, ThreadConnections, check_server, ensure_partition_config, make_client
from .errors import ConfigError, ScriptError
from .functions import Call, Reply
from .settings import Settings


@dataclass
class Backend:
    client: Client
    settings: Settings
    url: str
    server: str = ""
    build: str = ""
    #: Called with (function, seconds) after every FCALL (e.g. a latency histogram); None = off.
    observer: Callable[[str, float], None] | None = None
    #: Set when the node holds upstream FlowFabric's library (v0.13+): never load, reload or rotate anything.
    upstream: up.UpstreamMode | None = None

    @classmethod
    def connect(cls, settings: Settings, *, load: bool = True) -> Backend:
        """Connect, check the server version, lock partition counts, load the library."""
        if not settings.valkey_url:
            raise ConfigError(
                "no Valkey URL: connect with Backend.connect(Settings.from_url('valkey://host:6379/0')), or with "
                "Backend.from_env(), which reads FF_VALKEY_URL or finds the embedded Valkey `manage.py up` runs "
                f"under FF_DATA_DIR ({settings.data_dir!r} here; is `up` running from this directory?)")
        client = make_client(settings.valkey_url, wait_replicas=settings.wait_replicas if settings.replicated else 0,
                             wait_timeout_ms=settings.wait_timeout_ms)
        server = check_server(client, settings.valkey_url)
        # Read-only first: an upstream deployment's library is operated as it is (no flag needed), unless the
        # operator asked to replace it (FF_REPLACE_LIBRARY=1, the explicit choice it always was).
        mode = up.operated(library.detect(client)) if not settings.replace_library else None
        ensure_partition_config(client, settings.partitions, write=mode is None)
        b = cls(client, settings, settings.valkey_url, server, upstream=mode)
        if load and mode is None:
            b.build = library.ensure_loaded(client, replace_foreign=settings.replace_library)
        elif mode is not None:
            b.build = mode.label
        return b

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, load: bool = True) -> Backend:
        """Connect the way ffworker does: FF_VALKEY_URL, or else the embedded Valkey `manage.py up` runs under
        FF_DATA_DIR (its address and generated password are read from there)."""
        from .embedded import resolve_settings  # the embedded server's files; not needed for a plain URL

        return cls.connect(resolve_settings(Settings.from_env(env)), load=load)

    @property
    def is_cluster(self) -> bool:
        return hasattr(self.client, "get_primaries")

    def _fcall(self, call: Call) -> Any:
        send = self._direct.fcall if self._direct is not None else self._client_fcall
        if self.observer is None:
            return send(call)
        started = time.perf_counter()
        try:
            return send(call)
        finally:
            self.observer(call.function, time.perf_counter() - started)

    def _client_fcall(self, call: Call) -> Any:
        return self.client.fcall(call.function, len(call.keys), *call.keys, *call.args)

    def __post_init__(self) -> None:
        # Single FCALLs on a standalone server skip the pool checkout per call (the hot path of every
        # task); a cluster client routes by slot and keeps its own connections.
        self._direct: ThreadConnections | None = None if self.is_cluster else ThreadConnections(self.client)

    def call(self, call: Call) -> Reply:
        """Run one FCALL; reload the library once if the function is missing (e.g. after a flush)."""
        if self.upstream is not None:
            call = self.upstream.shape(call)  # the one switch to upstream's call shapes
        try:
            raw = self._fcall(call)
        except redis.ResponseError as e:
            if not library.is_missing_function_error(e):
                raise
            self._heal(call.function)
            raw = self._fcall(call)
        if call.function not in COMPLETIONS:
            return call.parse(call.function, raw)
        try:
            reply = call.parse(call.function, raw)
        except ScriptError as e:
            _count_gone(call.function, e)
            raise
        _count_gone(call.function, reply)
        return reply

    def _heal(self, function: str) -> None:
        """Reload our library once after a missing function; on upstream's library never (its functions are
        what they are: a missing one is a feature only ours has)."""
        if self.upstream is not None:
            raise self.upstream.refuse(function)
        library.self_heal(self.client)

    def call_many(self, calls: Sequence[Call], *, ahead: Callable[[Any], None] | None = None,
                  behind: Callable[[Any], None] | None = None) -> list[Reply | ScriptError]:
        """Pipeline several FCALLs (no transaction); each result is a Reply or the typed error.

        `ahead(pipe)` / `behind(pipe)` may queue more (idempotent) commands before / after the FCALLs in the
        same round trip; their replies are dropped. They run again if the library had to be reloaded.
        """
        if not calls:
            return []
        if self.upstream is not None:
            calls = [self.upstream.shape(c) for c in calls]
        raws = self._pipeline_raw(calls, ahead, behind)
        missing = [c.function for c, r in zip(calls, raws, strict=True)
                   if isinstance(r, redis.ResponseError) and library.is_missing_function_error(r)]
        if missing:
            self._heal(missing[0])
            raws = self._pipeline_raw(calls, ahead, behind)
        out: list[Reply | ScriptError] = []
        for call, raw in zip(calls, raws, strict=True):
            if isinstance(raw, (redis.ConnectionError, redis.TimeoutError)):
                raise raw  # the transport failed (a cluster pipeline hands it back per command): not a reply
            if isinstance(raw, Exception):
                out.append(ScriptError("raised", [str(raw)], call.function))
                continue
            try:
                out.append(call.parse(call.function, raw))
            except ScriptError as e:
                out.append(e)
            if call.function in COMPLETIONS:
                _count_gone(call.function, out[-1])
        return out

    def read_many(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Run plain (read) commands in one round trip; their raw replies in order (the first error reply
        is raised). Packed by hiredis on this thread's connection on a standalone server — redis-py's
        pipeline costs more Python time per command than a listing page's whole render — or a client
        pipeline on a cluster, which sends each node its share (so one key per command, or keys of one
        tag) and applies redis-py's reply types (SMEMBERS a set, WITHSCORES pairs): callers take both."""
        if not commands:
            return []
        if self._direct is not None:
            replies = self._direct.pipeline(list(commands))
        else:
            pipe = self.client.pipeline(transaction=False)
            for args in commands:
                pipe.execute_command(*args)
            replies = list(pipe.execute(raise_on_error=False))
        for r in replies:
            if isinstance(r, Exception):
                raise r
        return replies

    def _pipeline_raw(self, calls: Sequence[Call], ahead: Callable[[Any], None] | None = None,
                      behind: Callable[[Any], None] | None = None) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        if ahead is not None:
            ahead(pipe)
        first = queued(pipe)
        if self._direct is not None:
            # Standalone: packed by hiredis on this thread's connection (redis-py's pipeline re-packs every
            # argument in Python). The redis-py pipeline only records what `ahead` / `behind` queue.
            before = [args for args, _options in pipe.command_stack]
            pipe.command_stack.clear()
            if behind is not None:
                behind(pipe)
            commands = [*before, *(("FCALL", c.function, len(c.keys), *c.keys, *c.args) for c in calls)]
            commands += [args for args, _options in pipe.command_stack]
            return self._direct.pipeline(commands)[first:first + len(calls)]
        for c in calls:
            pipe.fcall(c.function, len(c.keys), *c.keys, *c.args)
        if behind is not None:
            behind(pipe)
        return list(pipe.execute(raise_on_error=False))[first:first + len(calls)]

    def now_ms(self) -> int:
        """The server clock (the clock the library uses) in integer milliseconds.

        Never queue TIME in a pipeline: a cluster pipeline refuses it (keyless). Here a cluster client asks
        its default node directly; `execute_timed` reads the clock together with a pipeline."""
        sec, usec = self.client.time()
        return int(sec) * 1000 + int(usec) // 1000

    def execute_timed(self, pipe: Any) -> tuple[int, list[Any]]:
        """(server clock in ms, replies) for a non-transactional pipeline: on a standalone server TIME rides
        at the end of the same round trip; a cluster pipeline refuses TIME, so one node is asked first."""
        if self.is_cluster:
            now = self.now_ms()
            return now, list(pipe.execute())
        pipe.time()
        *replies, (sec, usec) = pipe.execute()
        return int(sec) * 1000 + int(usec) // 1000, replies

    def close(self) -> None:
        self.client.close()


#: The calls that end a running attempt; one that finds its execution gone is counted (`/metrics`): after a
#: failover inside the replication lag, that is an execution acknowledged, run, and then lost.
COMPLETIONS = frozenset({"ff_complete_execution", "ff_fail_execution", "ff_complete_and_claim_next",
                         "ff_complete_batch_and_claim"})


def _count_gone(function: str, got: Reply | ScriptError) -> None:
    if isinstance(got, ScriptError):
        gone = int(got.code == "execution_not_found")
    else:  # a batch answers per completion
        outcomes = getattr(got.raw[0], "outcomes", None) if got.raw else None
        gone = sum(1 for o in outcomes or () if o is not None and o.code == "execution_not_found")
    if gone:
        for note in GONE_LISTENERS:
            note(function, gone)


#: Called with (function, how many) for completions that found their execution gone; ffcore.metrics adds its
#: counter on import (it imports this module, so this module cannot import it).
GONE_LISTENERS: list[Callable[[str, int], None]] = []


def queued(pipe: Any) -> int:
    """How many commands a pipeline holds: redis-py's cluster pipeline queues them in its execution
    strategy and leaves `command_stack` empty, so counting that would misalign the replies."""
    strategy = getattr(pipe, "_execution_strategy", None)
    return len(strategy.command_queue) if strategy is not None else len(pipe.command_stack)
