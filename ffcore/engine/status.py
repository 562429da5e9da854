"""Scanner status in Valkey, so any process (e.g. the API's /metrics) can report scanner lag."""

from __future__ import annotations

from ffcore import keys, metrics

from ..backend import Backend
from ..reads import decode_map, text

STATUS_TTL_S = 300


def write(backend: Backend, name: str, *, lag_ms: int, ticks: int, acted: int, errors: int) -> None:
    pipe = backend.client.pipeline(transaction=False)
    k = keys.scanner_status(name)
    pipe.hset(k, mapping={"lag_ms": lag_ms, "ticks": ticks, "acted": acted, "errors": errors,
                          "at": backend.now_ms()})
    pipe.expire(k, STATUS_TTL_S)
    pipe.sadd(keys.SCANNERS_INDEX, name)
    metrics.recorder.drain_into(pipe)  # this process's counts ride along (no round trip of their own)
    pipe.execute()


def read_lags(backend: Backend) -> dict[str, int]:
    names = sorted(text(n) for n in backend.client.smembers(keys.SCANNERS_INDEX))
    if not names:
        return {}
    pipe = backend.client.pipeline(transaction=False)
    for n in names:
        pipe.hgetall(keys.scanner_status(n))
    out = {}
    for n, raw in zip(names, pipe.execute(), strict=True):
        f = decode_map(raw)
        if f:
            out[n] = int(f.get("lag_ms") or 0)
    return out
