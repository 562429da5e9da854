"""Operator actions: tags after create on an execution or a flow (audited, like dashboard.actions)."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows

from . import ActionResult, run_action


def set_execution_tag(backend: Backend, actor: str, eid: str, key: str, value: str, reason: str) -> ActionResult:
    """ffcore Client.set_tags with one tag: the library checks the key again and writes nothing if refused."""

    def run() -> str:
        Client(backend).set_tags(eid, {key: value})
        return f"Tag {key} set."

    return run_action(backend, actor, "set_tags", eid, reason, run, detail=f"{key}={value}"[:300])


def set_flow_tag(backend: Backend, actor: str, flow_id: str, key: str, value: str, reason: str) -> ActionResult:
    def run() -> str:
        Flows(backend).set_tags(flow_id, {key: value})
        return f"Tag {key} set."

    return run_action(backend, actor, "set_flow_tags", flow_id, reason, run, detail=f"{key}={value}"[:300])
