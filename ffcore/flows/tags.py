"""Flow tags after create (operations §8.5): `ff_set_flow_tags` and the read of a flow's tags."""

from __future__ import annotations

from collections.abc import Mapping

from ffcore import events
from ffcore import functions as F
from ffcore.backend import Backend
from ffcore.execution.tags import TAG_KEY, check_tags
from ffcore.ids import parse_flow_id
from ffcore.keys import FlowKeys
from ffcore.partition import flow_partition
from ffcore.reads import decode_map


def _keys(backend: Backend, flow_id: str) -> FlowKeys:
    fid = parse_flow_id(flow_id)
    return FlowKeys(flow_partition(fid, backend.settings.partitions.flow), fid)


def set_flow_tags(backend: Backend, flow_id: str, tags: Mapping[str, str]) -> int:
    """Add or overwrite tags of a flow; the first call also moves legacy dotted fields off the flow core."""
    f = _keys(backend, flow_id)
    reply = backend.call(F.set_flow_tags(f, check_tags(tags)))
    events.publish(backend, flows=[f.flow_id])
    return int(reply[0])


def read_flow_tags(backend: Backend, flow_id: str) -> dict[str, str]:
    """The flow's tags, including dotted fields an older writer left on the flow core (not yet migrated)."""
    f = _keys(backend, flow_id)
    pipe = backend.client.pipeline(transaction=False)
    pipe.hgetall(f.tags)
    pipe.hgetall(f.core)
    tags_raw, core_raw = pipe.execute()
    core = decode_map(core_raw)
    legacy = {} if core.get("tags_migrated") == "1" else {k: v for k, v in core.items() if TAG_KEY.match(k)}
    return dict(sorted({**legacy, **decode_map(tags_raw)}.items()))
