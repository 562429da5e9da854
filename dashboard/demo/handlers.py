"""Demo handlers (`ffworker --module dashboard.demo.handlers`): a varied, realistic-looking workload."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from ffcore.worker.task import ClaimedTask
from ffcore.worker.worker import handler

from .ids import TOKEN_BUDGET

WORDS = ("the", "engine", "streams", "tokens", "while", "a", "worker", "holds", "its", "lease", "and", "renews",
         "it", "every", "few", "seconds", "until", "done", "durable", "execution", "flows", "signal")


@handler("split")
def split(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.2, 0.6))
    return {"chunks": 4}


@handler("chunk")
def chunk(task: ClaimedTask) -> dict[str, Any]:
    for pct in (25, 50, 75, 100):
        time.sleep(random.uniform(0.2, 0.6))
        task.update_progress(pct, f"chunk {pct}%")
    return {"rows": random.randint(100, 999)}


@handler("merge")
def merge(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.3, 0.8))
    return {"merged": True}


@handler("mirror")
def mirror(task: ClaimedTask) -> dict[str, Any]:
    # Mostly quick, now and then slow: the slowest of three is usually still running when two have the release.
    time.sleep(random.uniform(3.0, 6.0) if random.random() < 0.4 else random.uniform(0.3, 1.2))
    return {"sha256": "9f2c" + "".join(random.choice("0123456789abcdef") for _ in range(12))}


@handler("publish")
def publish(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.2, 0.5))
    return {"published": True}


@handler("extract")
def extract(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.2, 0.5))
    return {"records": random.randint(10, 99)}


@handler("transform")
def transform(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.2, 0.5))
    if task.attempt_index == 0:
        raise ConnectionError("upstream API timed out (first attempt always fails in the demo)")
    return {"ok": True}


@handler("validate")
def validate(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(0.2)
    raise ValueError("schema mismatch: field 'amount' is not a number")


@handler("load")
def load(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.2, 0.4))
    return {"loaded": True}


@handler("approve")
def approve(task: ClaimedTask) -> Any:
    """Waits for a human: suspend on `approved` until someone signals it from the waitpoints inbox."""
    signals = task.resume_signals()
    if signals:
        s = signals[0]
        return {"approved_by": s.source_identity, "payload": (s.payload or b"").decode("utf-8", "replace")}
    task.suspend("approved", timeout_ms=30 * 60_000, timeout_behavior="fail", reason_code="waiting_for_approval")
    return None


@handler("llm")
def llm(task: ClaimedTask) -> Any:
    """Streams token frames for several seconds and charges tokens to the demo budget; stops when the budget is
    exhausted. More frames than the stream page shows at once (200), so "Load earlier" has something to load."""
    prompt = task.json().get("prompt", "")
    task.append_frame("prompt", prompt)
    for i in range(random.randint(210, 260)):
        if task.lease_lost.is_set():
            return None
        text = " ".join(random.choice(WORDS) for _ in range(random.randint(1, 3)))
        task.append_frame("token", text)
        used = task.report_usage(TOKEN_BUDGET, {"tokens": 3 + len(text) // 4}, f"chunk-{i}")
        if used.hard_breach:
            task.append_frame("error", "token budget exhausted")
            task.fail("budget_exceeded: demo token budget is exhausted", "budget_exceeded")
            return None
        time.sleep(random.uniform(0.015, 0.035))
    task.append_frame("done", json.dumps({"finish_reason": "stop"}))
    return {"finish_reason": "stop"}


@handler("email")
def email(task: ClaimedTask) -> dict[str, Any]:
    time.sleep(random.uniform(0.05, 0.2))
    return {"sent": True}


@handler("reminder")
def reminder(task: ClaimedTask) -> dict[str, Any]:
    return {"reminded": True}
