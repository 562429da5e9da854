"""Connecting to Valkey: URL schemes, server version check, partition-count lock."""

from __future__ import annotations

import functools
import os
import threading
import weakref
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import hiredis  # redis[hiredis] is a dependency
import redis

from ffcore import keys

from .durability import ReplicatedConnection, connection_class
from .errors import ConfigError, ServerError
from .failover import FailoverCluster
from .partition import PartitionConfig

#: Valkey Functions with the commands the library uses need Valkey 7.2 (or Redis 7.2).
MIN_SERVER_VERSION = (7, 2)

class Client(Protocol):
    """The commands ffcore sends, common to redis.Redis and RedisCluster (and FailoverCluster): a typo or
    a command one of them lacks is a mypy error instead of an AttributeError at run time. Replies stay
    `Any` (redis-py types them as `Awaitable | Any`)."""

    def pipeline(self, *args: Any, **kwargs: Any) -> Any: ...
    def zrangebyscore(self, *args: Any, **kwargs: Any) -> Any: ...
    def zrange(self, *args: Any, **kwargs: Any) -> Any: ...
    def zrevrange(self, *args: Any, **kwargs: Any) -> Any: ...
    def zcard(self, *args: Any, **kwargs: Any) -> Any: ...
    def zscore(self, *args: Any, **kwargs: Any) -> Any: ...
    def zcount(self, *args: Any, **kwargs: Any) -> Any: ...
    def smembers(self, *args: Any, **kwargs: Any) -> Any: ...
    def sismember(self, *args: Any, **kwargs: Any) -> Any: ...
    def hgetall(self, *args: Any, **kwargs: Any) -> Any: ...
    def hget(self, *args: Any, **kwargs: Any) -> Any: ...
    def hmget(self, *args: Any, **kwargs: Any) -> Any: ...
    def hset(self, *args: Any, **kwargs: Any) -> Any: ...
    def hdel(self, *args: Any, **kwargs: Any) -> Any: ...
    def hincrby(self, *args: Any, **kwargs: Any) -> Any: ...
    def zrem(self, *args: Any, **kwargs: Any) -> Any: ...
    def zadd(self, *args: Any, **kwargs: Any) -> Any: ...
    def sscan_iter(self, *args: Any, **kwargs: Any) -> Any: ...
    def sscan(self, *args: Any, **kwargs: Any) -> Any: ...
    def sadd(self, *args: Any, **kwargs: Any) -> Any: ...
    def srem(self, *args: Any, **kwargs: Any) -> Any: ...
    def srandmember(self, *args: Any, **kwargs: Any) -> Any: ...
    def scard(self, *args: Any, **kwargs: Any) -> Any: ...
    def pubsub(self, *args: Any, **kwargs: Any) -> Any: ...
    def publish(self, *args: Any, **kwargs: Any) -> Any: ...
    def get(self, *args: Any, **kwargs: Any) -> Any: ...
    def set(self, *args: Any, **kwargs: Any) -> Any: ...
    def delete(self, *args: Any, **kwargs: Any) -> Any: ...
    def exists(self, *args: Any, **kwargs: Any) -> Any: ...
    def expire(self, *args: Any, **kwargs: Any) -> Any: ...
    def pexpire(self, *args: Any, **kwargs: Any) -> Any: ...
    def ttl(self, *args: Any, **kwargs: Any) -> Any: ...
    def pttl(self, *args: Any, **kwargs: Any) -> Any: ...
    def xadd(self, *args: Any, **kwargs: Any) -> Any: ...
    def xrevrange(self, *args: Any, **kwargs: Any) -> Any: ...
    def xrange(self, *args: Any, **kwargs: Any) -> Any: ...
    def xread(self, *args: Any, **kwargs: Any) -> Any: ...
    def xlen(self, *args: Any, **kwargs: Any) -> Any: ...
    def xtrim(self, *args: Any, **kwargs: Any) -> Any: ...
    def time(self, *args: Any, **kwargs: Any) -> Any: ...
    def fcall(self, *args: Any, **kwargs: Any) -> Any: ...
    def close(self, *args: Any, **kwargs: Any) -> Any: ...
    def keys(self, *args: Any, **kwargs: Any) -> Any: ...
    def scan_iter(self, *args: Any, **kwargs: Any) -> Any: ...
    def type(self, *args: Any, **kwargs: Any) -> Any: ...
    def info(self, *args: Any, **kwargs: Any) -> Any: ...
    def dbsize(self, *args: Any, **kwargs: Any) -> Any: ...
    def flushall(self, *args: Any, **kwargs: Any) -> Any: ...
    def ping(self, *args: Any, **kwargs: Any) -> Any: ...
    def incr(self, *args: Any, **kwargs: Any) -> Any: ...
    def incrby(self, *args: Any, **kwargs: Any) -> Any: ...
    def function_load(self, *args: Any, **kwargs: Any) -> Any: ...
    def function_list(self, *args: Any, **kwargs: Any) -> Any: ...
    def function_dump(self, *args: Any, **kwargs: Any) -> Any: ...
    def function_flush(self, *args: Any, **kwargs: Any) -> Any: ...
    def execute_command(self, *args: Any, **kwargs: Any) -> Any: ...
    def eval(self, *args: Any, **kwargs: Any) -> Any: ...
    def evalsha(self, *args: Any, **kwargs: Any) -> Any: ...
    def mget(self, *args: Any, **kwargs: Any) -> Any: ...
    def unlink(self, *args: Any, **kwargs: Any) -> Any: ...
    def rpush(self, *args: Any, **kwargs: Any) -> Any: ...
    def lpush(self, *args: Any, **kwargs: Any) -> Any: ...
    def lrange(self, *args: Any, **kwargs: Any) -> Any: ...
    def llen(self, *args: Any, **kwargs: Any) -> Any: ...
    def copy(self, *args: Any, **kwargs: Any) -> Any: ...
    def hsetnx(self, *args: Any, **kwargs: Any) -> Any: ...


def _redis_url(url: str) -> tuple[str, bool]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    mapping = {
        "valkey": ("redis", False), "redis": ("redis", False),
        "valkeys": ("rediss", False), "rediss": ("rediss", False),
        "valkey+cluster": ("redis", True), "redis+cluster": ("redis", True),
        "valkeys+cluster": ("rediss", True), "rediss+cluster": ("rediss", True),
    }
    if scheme not in mapping:
        raise ConfigError(
            f"FF_VALKEY_URL scheme {parts.scheme!r} is not supported; use valkey://, redis:// or valkey+cluster://"
        )
    new_scheme, cluster = mapping[scheme]
    return urlunsplit((new_scheme, parts.netloc, parts.path, parts.query, parts.fragment)), cluster


def display_url(url: str) -> str:
    """The URL without its password, for logs and pages."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    if parts.username:
        netloc = f"{parts.username}:***@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@functools.cache
def _driver_opts() -> dict[str, Any]:
    """redis-py 8 looks its own version up in the installed package's metadata for every new connection
    (CLIENT SETINFO), a millisecond or more of CPU each — a worker opening its handler threads' connections
    paid it dozens of times on its first tasks. One DriverInfo, its version given, serves every connection."""
    try:
        from redis.driver_info import DriverInfo
    except ImportError:  # redis-py before 8 computes the version once
        return {}
    return {"driver_info": DriverInfo(lib_version=redis.__version__)}


def make_client(url: str, *, decode: bool = False, timeout_s: float = 10.0,
                wait_replicas: int = 0, wait_timeout_ms: int = 1000) -> Client:
    """A redis-py client (hiredis parser when installed) for a valkey/redis URL; no I/O yet.

    `wait_replicas` > 0: every write batch waits for that many replicas (ffcore/durability.py)."""
    plain, cluster = _redis_url(url)
    opts: dict[str, Any] = {
        "decode_responses": decode, "socket_connect_timeout": 3.0, "socket_timeout": timeout_s,
        "health_check_interval": 30, "protocol": 2, **_driver_opts(),
    }
    if wait_replicas:
        base = redis.SSLConnection if plain.startswith("rediss:") else redis.Connection
        opts["connection_class"] = connection_class(base, wait_replicas, wait_timeout_ms)
    if cluster:
        # Rides out a primary's failover: retries what surely did not run, bounded (ffcore/failover.py).
        return FailoverCluster.from_url(plain, **opts)
    return redis.Redis.from_url(plain, **opts)


def server_version(client: Client) -> tuple[str, tuple[int, ...]]:
    """(`"valkey 9.1.2"`, (9, 1, 2)); reads valkey_version before redis_version."""
    info = client.info("server")
    if isinstance(info, dict) and info and all(isinstance(v, dict) for v in info.values()):
        info = next(iter(info.values()))  # cluster: one node's section
    name, raw = "valkey", info.get("valkey_version")
    if not raw:
        name, raw = "redis", info.get("redis_version", "0")
    nums = tuple(int(p) for p in str(raw).split(".")[:3] if p.isdigit())
    return f"{name} {raw}", nums


def check_server(client: Client, url: str) -> str:
    """Ping and version-check the server; one-line ServerError on failure. Returns the version text."""
    try:
        client.ping()
        label, nums = server_version(client)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
        raise ServerError(
            f"cannot reach Valkey at {display_url(url)} ({e.__class__.__name__}: {e}); "
            "check FF_VALKEY_URL or unset it to use the embedded server"
        ) from None
    except redis.AuthenticationError as e:
        raise ServerError(f"Valkey at {display_url(url)} refused the credentials: {e}") from None
    if nums[:2] < MIN_SERVER_VERSION:
        raise ServerError(
            f"{label} at {display_url(url)} is too old; FlowFabric needs Valkey >= 7.2 (Valkey Functions)"
        )
    return label


def ensure_partition_config(client: Client, partitions: PartitionConfig, *, write: bool = True) -> None:
    """Write the partition counts on first boot; refuse to run against different stored counts. With
    `write=False` (upstream mode: the key is the deployment's) counts are only compared when stored."""
    wanted = partitions.as_hash()
    stored = {_s(k): _s(v) for k, v in (client.hgetall(keys.CONFIG_PARTITIONS) or {}).items()}
    if not stored and not write:
        return
    if not stored:
        # HSETNX per field keeps two processes booting at once from overwriting each other.
        for k, v in wanted.items():
            client.hsetnx(keys.CONFIG_PARTITIONS, k, v)
        stored = {_s(k): _s(v) for k, v in client.hgetall(keys.CONFIG_PARTITIONS).items()}
    diff = [f"{k}: stored {stored.get(k)!r}, configured {v!r}" for k, v in wanted.items() if stored.get(k) != v]
    if diff:
        raise ConfigError(
            "partition counts differ from those locked in ff:config:partitions ("
            + "; ".join(diff)
            + "); set FF_FLOW_PARTITIONS / FF_BUDGET_PARTITIONS / FF_QUOTA_PARTITIONS to the stored values"
        )


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class ThreadConnections:
    """One checked-out connection per thread of a standalone client, for single commands on hot paths.

    redis-py's per-command path (pool checkout and release, its observability hooks, re-packing every
    argument) cost more Python time per task than the rest of the worker's bookkeeping together. The
    connection keeps redis-py's health check (a PING when idle past `health_check_interval`, reconnecting
    a stale socket before anything is sent); any other failure drops the socket and raises, as the pool
    path would. A connection goes back to the pool when its thread ends; a forked child starts afresh.
    """

    def __init__(self, client: Any) -> None:
        self.pool = client.connection_pool
        self.local = threading.local()

    def _conn(self) -> Any:
        held = getattr(self.local, "held", None)
        if held is not None and held[0] == os.getpid():
            conn = held[1]
            # What the pool checks at every checkout: a held socket with something to read before we sent
            # anything was closed by the server (e.g. it restarted); start a fresh one.
            try:
                if conn._sock is not None and conn.can_read():
                    conn.disconnect()
            except (redis.ConnectionError, OSError):
                conn.disconnect()
            return conn
        conn = self.pool.get_connection()
        self.local.held = (os.getpid(), conn)
        weakref.finalize(threading.current_thread(), self.pool.release, conn)
        return conn

    @staticmethod
    def _send(conn: Any, packed: list[bytes]) -> None:
        """Send; a socket that fails before taking the command (a peer gone meanwhile) gets one fresh try:
        nothing was sent, so nothing can run twice."""
        try:
            conn.send_packed_command(packed)
        except redis.ConnectionError:
            conn.disconnect()
            conn.send_packed_command(packed)

    def fcall(self, call: Any) -> Any:
        conn = self._conn()
        args = ("FCALL", call.function, len(call.keys), *call.keys, *call.args)
        try:
            packed = _pack(conn, args)
            if isinstance(conn, ReplicatedConnection):
                packed = conn.with_wait(packed, [args])
            self._send(conn, packed)
            return conn.read_response()
        except redis.ResponseError:
            raise  # an error reply: the connection is fine
        except BaseException:
            conn.disconnect()
            raise

    def pipeline(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send `commands` in one write and read their replies in order; an error reply comes back as
        its ResponseError (like redis-py's pipeline with raise_on_error=False)."""
        conn = self._conn()
        try:
            packed: list[bytes] = []
            for args in commands:
                packed += _pack(conn, args)
            # One buffer, one write: redis-py sends each list item with its own sendall (a GIL release and
            # re-acquire per command, which costs dearly when many threads contend).
            packed = [b"".join(packed)]
            if isinstance(conn, ReplicatedConnection):
                packed = conn.with_wait(packed, commands)
            self._send(conn, packed)
            return _read_replies(conn, len(commands))
        except BaseException:
            conn.disconnect()
            raise


def _read_replies(conn: Any, n: int) -> list[Any]:
    """`n` replies in order, error replies as their (typed) ResponseError. Straight from the connection's
    hiredis parser when it has one: the connection's own read_response adds bookkeeping per reply that
    costs more than the parse (a listing page reads hundreds)."""
    parser = getattr(conn, "_parser", None)
    read = getattr(parser, "read_response", None) if getattr(parser, "_reader", None) is not None else None
    if isinstance(conn, ReplicatedConnection):
        read = None  # its read_response reads and checks the WAIT reply after the batch's last one
    out: list[Any] = []
    for _ in range(n):
        if read is None:
            try:
                out.append(conn.read_response())
            except redis.ResponseError as e:
                out.append(e)
            continue
        out.append(read())  # the parser's replyError builds typed errors and returns them as values
    return out


def _pack(conn: Any, args: tuple[Any, ...]) -> list[bytes]:
    try:
        return [hiredis.pack_command(args)]
    except TypeError:
        return list(conn.pack_command(*args))  # redis-py's own conversions and error
