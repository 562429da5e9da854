"""Where the listings read, switched in ONE place: our own indexes, or on an upstream deployment the `ff:up:` ones
the reconciler (ffcore/upstream/reconcile.py) keeps from upstream's sets.

Everything else a page reads (execution cores, attempts, flows, edges and edge groups, waitpoints, budgets,
quotas, streams, the lane state indexes) upstream writes under the same key names as ours, so the same readers
serve both; only what upstream does not keep goes through `indexes(backend)` (and the worker roster,
ffcore/upstream/reads_workers.py, which v0.14 moved per namespace).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import keys

if TYPE_CHECKING:
    from ..backend import Backend


@dataclass(frozen=True)
class Indexes:
    """The listing sources of one deployment."""

    #: SET of lane ids.
    lanes: str
    #: ZSET eid -> created_at ms of flow partition N.
    created: Callable[[int], str]
    #: ZSET flow_id -> created_at ms of flow partition N.
    flows: Callable[[int], str]
    #: SET of the partitions holding a lane's executions.
    lane_partitions: Callable[[str], str]
    #: Whether the per-kind and per-tag listing indexes exist (ours); without them a kind or tag filter is a
    #: post-filter over the created index (bounded by the listing's examined cap).
    filter_indexes: bool


OURS = Indexes(keys.LANES_INDEX, lambda n: keys.PartitionKeys(n).created, keys.flows_created, keys.lane_partitions,
               True)
UPSTREAM = Indexes(keys.UP_LANES, keys.up_created, keys.up_flows, keys.up_lane_partitions, False)


def indexes(backend: Backend) -> Indexes:
    """The one switch between our indexes and the reconciled `ff:up:` ones."""
    return OURS if backend.upstream is None else UPSTREAM


def unavailable(backend: Backend, what: str, why: str) -> str | None:
    """The sentence a page shows instead of a section it cannot read on an upstream deployment (None on ours)."""
    if backend.upstream is None:
        return None
    return f"{what}: not available on upstream FlowFabric {backend.upstream.release} — {why}."


def index_note(backend: Backend) -> str:
    """On upstream, before the reconciler finished its first pass: why the lists may be short ("" otherwise)."""
    if backend.upstream is None or backend.client.exists(keys.UP_RECONCILE_STATUS):
        return ""
    return ("Upstream keeps no newest-first index: this list reads one the reconciler (ffupindex, started by "
            "`up`) keeps, and its first pass has not finished yet — executions appear as it indexes them.")
