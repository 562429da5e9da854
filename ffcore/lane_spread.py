"""A lane spread over K partitions (docs/deployment.md, "A lane bigger than one node").

A solo execution lives on its lane's partition, so one hot lane is bounded by the one primary that owns it.
With a spread K > 1 (field `spread` of the lane's config hash, `keys.lane_config`), producers mint new ids
round-robin over `partition.spread_partitions(lane, K)`; a create with an idempotency key always picks by a
hash of the key, so a retry lands where the first try did. Claiming needs nothing new: creates register
each (lane, partition) in the lane registry, which workers already rotate over. Changing K affects new
creates only; a retry made across a change of K may land elsewhere and escape the deduplication.
"""

from __future__ import annotations

import itertools
import time

from ffcore import keys
from ffcore.backend import Backend
from ffcore.errors import InvalidInput
from ffcore.partition import crc16, lane_partition, spread_partitions

FIELD = "spread"
MAX_SPREAD = 64
#: How long a producer trusts the spread it read (a change reaches every producer within this).
CACHE_S = 5.0


def _check(spread: object, partitions: int) -> int:
    if isinstance(spread, bool) or not isinstance(spread, int) or not 1 <= spread <= min(MAX_SPREAD, partitions):
        raise InvalidInput("invalid_input", [f"spread must be an integer from 1 to {min(MAX_SPREAD, partitions)}"])
    return spread


def get_spread(backend: Backend, lane: str) -> int:
    raw = backend.client.hget(keys.lane_config(lane), FIELD)
    try:
        value = int(raw) if raw is not None else 1
    except ValueError:
        return 1
    return value if 1 <= value <= min(MAX_SPREAD, backend.settings.partitions.flow) else 1


def set_spread(backend: Backend, lane: str, spread: int) -> tuple[int, ...]:
    """Spread `lane` over `spread` partitions (1 = its own partition only); returns them."""
    count = backend.settings.partitions.flow
    spread = _check(spread, count)
    if spread == 1:
        backend.client.hdel(keys.lane_config(lane), FIELD)
    else:
        backend.client.hset(keys.lane_config(lane), FIELD, str(spread))
    for_backend(backend).forget(lane)  # this process at once; other producers within CACHE_S
    return spread_partitions(lane, spread, count)


#: One round-robin turn per process, so that short-lived Clients (one per REST request) spread too.
_TURN = itertools.count()


class LaneSpread:
    """A producer's view of lane spreads: one HGET per lane per CACHE_S, then the partition for each create."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._read: dict[str, tuple[float, int]] = {}

    def spread(self, lane: str) -> int:
        now = time.monotonic()
        hit = self._read.get(lane)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
        value = get_spread(self.backend, lane)
        self._read[lane] = (now, value)
        return value

    def forget(self, lane: str) -> None:
        self._read.pop(lane, None)

    def partition(self, lane: str, idempotency_key: str | None = None) -> int:
        count = self.backend.settings.partitions.flow
        k = self.spread(lane)
        if k == 1:
            return lane_partition(lane, count)
        parts = spread_partitions(lane, k, count)
        j = crc16(idempotency_key.encode("utf-8")) % k if idempotency_key else next(_TURN) % k
        return parts[j]


_views: dict[int, LaneSpread] = {}


def for_backend(backend: Backend) -> LaneSpread:
    """The process's view for `backend` (shared by its Clients, so the setting is read once per CACHE_S)."""
    view = _views.get(id(backend))
    if view is None or view.backend is not backend:
        view = _views[id(backend)] = LaneSpread(backend)
    return view
