"""The cluster client that rides out a failover: retry what surely did not run, within a bounded window.

When a primary dies, its slots answer nothing until a replica takes over (node-timeout plus an election:
one to three seconds on the embedded cluster), and once the dead node is flagged FAIL every node answers
CLUSTERDOWN until then. redis-py's RedisCluster retries a failed command up to ten times, pausing only
after CLUSTERDOWN (0.25 s), and re-sends even a write whose connection broke after it was sent; a
CLUSTERDOWN reply inside a pipeline it does not retry at all. So:

- A command the server surely did not run is retried, pausing 50 ms doubling to 500 ms, until
  `window_s` has passed: the connection could not be opened, the server refused it (CLUSTERDOWN, MASTERDOWN,
  TRYAGAIN, LOADING, READONLY, MOVED/ASK past redis-py's redirect budget) or the slot map named no owner.
  redis-py refreshes its slot map on each of these. Past the window it raises `ClusterUnavailable`, a
  `redis.ConnectionError`, which every caller already handles as "Valkey unreachable".
- A command whose connection broke after it was sent may have run. It is retried only when it is a read
  (redis-py's READ_COMMANDS, which has FCALL_RO but not FCALL). A write raises the ConnectionError at once:
  not every FCALL is safe twice (claims, stream appends, usage reports without a dedup key), and the calls
  that end an attempt reconcile a lost reply themselves (`ClaimedTask._terminal_call` reads the attempt
  record, then retries once).

redis-py's own retry count is set to 0, so this is the one retry policy; redis-py still follows MOVED/ASK.
Pipelines: redis-py re-sends, once and at once, each command that met a broken connection, so a connection
error in a pipeline's results cannot tell whether the first send reached the server; such commands count as
"may have run". An error raised while the pipeline was opening its connections means nothing was sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterPipeline, RedisCluster
from redis.commands import READ_COMMANDS
from redis.exceptions import (
    AskError,
    AuthenticationError,
    ClusterError,
    MaxConnectionsError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.retry import Retry

T = TypeVar("T")

#: How long a command keeps retrying errors that prove it did not run (a failover takes 1-3 s locally).
FAILOVER_WINDOW_S = 10.0
FIRST_PAUSE_S = 0.05
MAX_PAUSE_S = 0.5


class ClusterUnavailable(redis.ConnectionError):
    """The slots a command needs had no reachable primary for the whole failover window."""


def never_ran(e: BaseException) -> bool | None:
    """True: the server surely did not run the command; False: it may have; None: not a failover error."""
    if isinstance(e, ClusterUnavailable | AuthenticationError | MaxConnectionsError):
        return None
    if isinstance(e, redis.BusyLoadingError | ClusterError | TryAgainError | AskError | ReadOnlyError):
        return True  # refused by the server (ClusterError: CLUSTERDOWN, MASTERDOWN, redirects exhausted)
    if isinstance(e, redis.ResponseError) and str(e).startswith("NOREPLICAS"):
        return True  # min-replicas-to-write refused it: its replicas lag
    if isinstance(e, redis.ConnectionError | redis.TimeoutError):
        # redis-py words every failure to open a connection "... connecting to ..."; nothing was sent then.
        return "connecting to" in str(e) or isinstance(e.__context__, ConnectionRefusedError)
    if isinstance(e, RedisClusterException):
        # Slot not covered (nothing sent), or the slot-map refresh after a connection error failed: then
        # that connection error decides.
        cause = e.__context__
        return never_ran(cause) if isinstance(cause, redis.ConnectionError | redis.TimeoutError) else True
    return None


def is_read(args: tuple[Any, ...]) -> bool:
    name = args[0].decode() if isinstance(args[0], bytes) else str(args[0])
    return name.upper() in READ_COMMANDS


class _FcallSlots:
    """FCALL names its keys as EVAL does (numkeys, then the keys): read them from the arguments. redis-py
    special-cases only EVAL/EVALSHA and asks the server (COMMAND GETKEYS, one more round trip) for every
    FCALL's keys otherwise — to route it, and in a pipeline even to learn that it has keys."""

    def _get_command_keys(self, *args: Any) -> Any:
        if len(args) > 2 and str(args[0]).upper() in ("FCALL", "FCALL_RO"):
            return list(args[3:3 + int(args[2])])
        base: Any = super()
        return base._get_command_keys(*args)


class FailoverCluster(_FcallSlots, RedisCluster):
    """RedisCluster whose commands and pipelines ride out a primary's failover (see the module docstring)."""

    def __init__(self, *args: Any, window_s: float = FAILOVER_WINDOW_S, **kwargs: Any) -> None:
        # Set first: the base constructor already sends commands (COMMAND, CLUSTER SLOTS) through us.
        self.window_s = window_s
        #: Retries made by ride_out (all threads; approximate under races): a sign the path ran.
        self.failover_retries = 0
        kwargs.setdefault("retry", Retry(NoBackoff(), 0))
        super().__init__(*args, **kwargs)

    def ride_out(self, attempt: Callable[[], T], *, may_rerun: bool) -> T:
        """`attempt()`, retried while it fails with an error that proves it did not run (or any failover
        error when `may_rerun`), until the window has passed."""
        deadline = time.monotonic() + self.window_s
        pause = FIRST_PAUSE_S
        while True:
            try:
                return attempt()
            except (redis.RedisError, RedisClusterException) as e:
                verdict = never_ran(e)
                if verdict is None:
                    raise
                if not (verdict or may_rerun):  # it may have run: not ours to send again
                    if isinstance(e, RedisClusterException):
                        raise _as_connection_error(e) from e
                    raise
                if time.monotonic() + pause > deadline:
                    raise ClusterUnavailable(f"no primary answered within {self.window_s:g} s: {e}") from e
            self.failover_retries += 1
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        target = kwargs.get("target_nodes")
        base: Any = super()  # redis-py's command methods are untyped
        if target is not None and not isinstance(target, str):
            return base.execute_command(*args, **kwargs)  # explicit nodes may be gone: redis-py's rule too
        return self.ride_out(lambda: base.execute_command(*args, **dict(kwargs)), may_rerun=is_read(args))

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        if transaction or shard_hint:
            base: Any = super()  # MULTI/EXEC: redis-py's own pipeline, without failover retries
            return base.pipeline(transaction, shard_hint)
        return FailoverPipeline(
            self, nodes_manager=self.nodes_manager, commands_parser=self.commands_parser,
            startup_nodes=self.nodes_manager.startup_nodes, result_callbacks=self.result_callbacks,
            cluster_response_callbacks=self.cluster_response_callbacks, read_from_replicas=self.read_from_replicas,
            load_balancing_strategy=self.load_balancing_strategy, reinitialize_steps=self.reinitialize_steps,
            retry=self.retry, lock=self._lock, transaction=False, event_dispatcher=self._event_dispatcher,
        )


class FailoverPipeline(_FcallSlots, ClusterPipeline):
    """A non-transactional cluster pipeline that re-runs, within the window, the commands that did not run."""

    def __init__(self, owner: FailoverCluster, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._owner = owner

    def _queued(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        # Read from the strategy's queue: some command methods (DEL) queue there without execute_command.
        return [(c.args, dict(c.options)) for c in self._execution_strategy.command_queue]

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        me: Any = self  # redis-py's pipeline methods are untyped
        staged = self._queued()
        results: list[Any] = [None] * len(staged)
        todo = list(range(len(staged)))
        deadline = time.monotonic() + self._owner.window_s
        pause = FIRST_PAUSE_S
        while True:
            try:
                got = list(super().execute(raise_on_error=False))
                ambiguous = True  # a connection error in the results may hide a send that reached the server
            except (redis.ConnectionError, redis.TimeoutError) as e:
                # Only opening the connections raises these (later ones land in the results): nothing was sent.
                got, ambiguous = [e] * len(todo), False
            except RedisClusterException as e:
                # Slot map trouble, before or while redis-py re-sent failed commands: some may have run.
                got, ambiguous = [e] * len(todo), True
            for i, r in zip(todo, got, strict=True):
                results[i] = r
            todo = [i for i, r in zip(todo, got, strict=True) if _again(r, staged[i][0], ambiguous=ambiguous)]
            if not todo:
                break
            if time.monotonic() + pause > deadline:
                for i in todo:
                    results[i] = ClusterUnavailable(f"no primary answered within {self._owner.window_s:g} s: "
                                                    f"{results[i]}")
                break
            self._owner.failover_retries += 1
            time.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE_S)
            for i in todo:
                args, kwargs = staged[i]
                me.pipeline_execute_command(*args, **dict(kwargs))
        me.reset()
        results = [_as_connection_error(r) if isinstance(r, RedisClusterException) else r for r in results]
        if raise_on_error:
            for r in results:
                if isinstance(r, Exception):
                    raise r
        return results


def resend_idempotent(send: Callable[[], T], *, window_s: float | None = None) -> T:
    """`send()`, sent again while the transport fails, until the window has passed (then ClusterUnavailable).

    Only for writes that are safe twice by construction — a create whose id was minted by the caller answers
    DUPLICATE the second time — so a connection that broke after the send ("may have run") is no longer
    the caller's problem: they see a result or ClusterUnavailable, never an ambiguous ConnectionError."""
    deadline = time.monotonic() + (FAILOVER_WINDOW_S if window_s is None else window_s)
    pause = FIRST_PAUSE_S
    while True:
        try:
            return send()
        except ClusterUnavailable:
            raise
        except (redis.ConnectionError, redis.TimeoutError, RedisClusterException) as e:
            if time.monotonic() + pause > deadline:
                raise ClusterUnavailable(f"Valkey did not answer within the failover window: {e}") from e
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE_S)


def _again(result: Any, args: tuple[Any, ...], *, ambiguous: bool) -> bool:
    """Re-run this pipelined command? `ambiguous`: its connection error may hide a send that arrived."""
    if not isinstance(result, Exception):
        return False
    verdict = never_ran(result)
    if verdict is None:
        return False
    if is_read(args):
        return True
    if ambiguous and isinstance(result, redis.ConnectionError | redis.TimeoutError | RedisClusterException):
        return False
    return verdict


def _as_connection_error(e: Exception) -> Exception:
    """redis-py's slot-map errors are not RedisErrors; callers catch ConnectionError for "Valkey unreachable"."""
    if not isinstance(e, RedisClusterException):
        return e
    err = redis.ConnectionError(f"{type(e).__name__}: {e}")
    err.__cause__ = e
    return err
