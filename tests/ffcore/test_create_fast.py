"""ff_create_fast (ours): the same keys, values, field order, encoding and replies as the contract's
ff_create_execution, with the new core hash copied from a per-partition template."""

from __future__ import annotations

from typing import Any

import pytest

from ffcore import functions as F
from ffcore import keys
from ffcore.connection import ensure_partition_config
from ffcore.errors import ScriptError
from ffcore.execution.client import Client
from ffcore.ids import ExecutionId
from ffcore.keys import ExecKeys
from ffcore.policy import Policy
from tests.keyspace import changed, keyspace

from .invariants import check
from .test_fastpath import snapshot

#: Fields holding the server clock: set to one value in both hashes before their bytes are compared.
CLOCK_FIELDS = ("created_at", "last_transition_at", "last_mutation_at")

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {"kind": "k"},
    "everything differs from the template": {
        "kind": "report", "lane": "reports", "namespace": "tenant-7", "priority": 9, "creator": "api",
        "payload": b"\x00\x01bin", "tags": {"team": "x", "env": "prod"}},
    "capabilities": {"kind": "k", "policy": Policy(required_capabilities=("ssd", "gpu"))},
    "attempt timeout": {"kind": "k", "policy": Policy(attempt_timeout_ms=60_000)},
    "deadline": {"kind": "k", "deadline_at": 4_000_000_000_000},
    "long value (hashtable encoding)": {"kind": "k" * 200},
}


def _snapshot(backend, eid: str) -> dict[str, Any]:
    """snapshot() with the eligible score (priority composed with the server clock) reduced to membership."""
    return {k: ("member" if k.endswith(":eligible") else v) for k, v in snapshot(backend, eid, {}).items()}


def _fresh(backend) -> None:
    backend.client.flushall()
    ensure_partition_config(backend.client, backend.settings.partitions)


def _create(backend, function: str, eid: str, spec: dict[str, Any]) -> F.Reply:
    call = Client(backend).create_call(execution_id=eid, **spec)
    if function == "ff_create_fast":
        call = F.as_fast_create(call)
    reply = backend.call(call)
    for f in CLOCK_FIELDS:
        backend.client.hset(ExecKeys(eid).core, f, "1700000000000")  # same length: replaced in place
    return reply


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_core_hash_is_byte_identical_to_the_contracts(backend, variant):
    spec = VARIANTS[variant]
    eid = str(ExecutionId.mint(3))
    k = ExecKeys(eid)
    contract = _create(backend, "ff_create_execution", eid, spec)
    want = {"dump": backend.client.dump(k.core), "fields": backend.client.hgetall(k.core),
            "encoding": backend.client.object("encoding", k.core), "snapshot": _snapshot(backend, eid)}
    _fresh(backend)
    fast = _create(backend, "ff_create_fast", eid, spec)
    assert (fast.status, fast.fields) == (contract.status, contract.fields)
    got = {"dump": backend.client.dump(k.core), "fields": backend.client.hgetall(k.core),
           "encoding": backend.client.object("encoding", k.core), "snapshot": _snapshot(backend, eid)}
    if want["encoding"] == b"listpack":
        assert got["dump"] == want["dump"]  # same fields, values and order, byte for byte
    else:
        assert list(got["fields"].items()) and got["fields"] == want["fields"]
    assert got["encoding"] == want["encoding"]
    assert got["snapshot"] == want["snapshot"]
    check(backend, eid)


def test_one_template_per_partition_written_once(backend):
    c = Client(backend)
    first = c.create(kind="k", lane="t1").execution_id
    templates = backend.client.keys(keys.CORE_TEMPLATES)
    assert len(templates) == 1 and f"{{fp:{first.partition_index}}}" in templates[0].decode()
    template = backend.client.dump(templates[0])
    more = c.create_many([{"kind": "k", "lane": "t1", "namespace": f"ns{i}"} for i in range(20)])
    assert backend.client.keys(keys.CORE_TEMPLATES) == templates and backend.client.dump(templates[0]) == template
    assert all(backend.client.hget(ExecKeys(r.execution_id).core, "namespace") == f"ns{i}".encode()
               for i, r in enumerate(more))
    elsewhere = (first.partition_index + 1) % backend.settings.partitions.flow
    c.create(kind="k", lane="t1", execution_id=str(ExecutionId.mint(elsewhere)))
    assert len(backend.client.keys(keys.CORE_TEMPLATES)) == 2


def test_duplicates_and_refusals_answer_as_the_contract_and_write_nothing(backend):
    eid = str(ExecutionId.mint(5))
    _create(backend, "ff_create_execution", eid, {"kind": "k"})
    before = keyspace(backend)
    dup = backend.call(F.as_fast_create(Client(backend).create_call(execution_id=eid, kind="other")))
    assert (dup.status, dup.fields[0]) == ("DUPLICATE", eid)
    assert changed(before, keyspace(backend)) == []
    bad = F.as_fast_create(Client(backend).create_call(kind="k", execution_id=str(ExecutionId.mint(5))))
    bad = F.Call(bad.function, bad.keys, [*bad.args[:6], '{"routing_requirements":{"required_capabilities":[1]}}',
                                          *bad.args[7:]], bad.parse)
    with pytest.raises(ScriptError) as refused:
        backend.call(bad)
    assert refused.value.code == "invalid_capabilities"
    assert changed(before, keyspace(backend)) == []  # not even a template


def test_client_creates_go_through_the_fast_function(backend, monkeypatch):
    sent: list[str] = []
    real = backend.call_many

    def spy(calls, *a, **kw):
        sent.extend(c.function for c in calls)
        return real(calls, *a, **kw)

    monkeypatch.setattr(backend, "call_many", spy)
    c = Client(backend)
    c.create_many([{"kind": "k"}, {"kind": "k"}])
    c.create(kind="k", idempotency_key="once")  # the general path
    assert sent == ["ff_create_fast"] * 3
