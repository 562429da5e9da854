"""`up --demo`: a demo operator account and a live, varied workload within a minute."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

from ffcore.backend import Backend
from ffcore.budgets.budgets import get_budget
from ffcore.embedded import free_port, resolve_settings
from ffcore.execution import listing
from ffcore.execution.client import Client
from ffcore.settings import Settings
from tests.conftest import REPO


def test_up_demo_brings_every_kind_of_work_to_life(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FF_")}
    env.update({"FF_DATA_DIR": str(tmp_path), "DJANGO_SECRET_KEY": "test"})
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--demo", "--port", str(free_port())], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        url = password = None
        while url is None or password is None:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
            if m := re.search(r"embedded Valkey on (valkey://\S+)", line):
                url = m.group(1)
            if m := re.search(r"username: demo\s+password: (\S+)", line):
                password = m.group(1)
        backend = Backend.connect(resolve_settings(Settings.from_url(url), tmp_path))  # the password from FF_DATA_DIR
        c = Client(backend)
        from dashboard.demo.ids import TOKEN_BUDGET

        def alive() -> set[str]:
            lanes = c.lanes()
            seen = set()
            for lane, counts in listing.count_by_lane_state(backend, lanes).items():
                seen |= {f"{lane}:{k}" for k, v in counts.items() if v}
            return seen

        def failed() -> list:  # the always-failing pipeline step
            return listing.list_executions(backend, listing.Query(state="failed", limit=5), c.lanes()).rows

        # Polled together: on a loaded machine the failing step may end after the others.
        deadline = time.monotonic() + 90
        want = {"approvals:suspended", "demo:terminal", "emails:terminal", "llm:terminal"}
        while time.monotonic() < deadline and not (want <= alive() and failed()):
            time.sleep(1)
        assert want <= alive(), alive()
        assert failed()
        budget = get_budget(backend, TOKEN_BUDGET)
        assert budget is not None and budget.dimensions[0].usage > 0
        assert "(shown only once)" in "".join(lines)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 0


def test_the_demo_reviewer_approves_the_longest_waiting_approval_and_audits_it(backend):
    from dashboard.demo.workload import auto_approve
    from ffcore import audit
    from ffcore.suspension import hmac_secrets
    from tests.ffcore.suspension_support import SECRET, claimed

    hmac_secrets.install(backend, SECRET)
    auto_approve(backend)  # nothing waiting: nothing happens
    assert audit.recent(backend) == []
    first, second = (claimed(backend, kind="approve", lane="approvals") for _ in range(2))
    first.suspend("approved", timeout_ms=60_000)
    second.suspend("approved", timeout_ms=600_000)
    auto_approve(backend)
    c = Client(backend)
    assert (c.get_state(first.execution_id), c.get_state(second.execution_id)) == ("waiting", "suspended")
    (entry,) = audit.recent(backend)
    assert (entry.actor, entry.action, entry.target, entry.outcome) == ("demo-reviewer", "signal",
                                                                        first.execution_id, "ok")


def test_the_demo_mirror_flow_publishes_at_its_quorum_and_its_page_shows_the_cancelled_mirror(dashboard_backend,
                                                                                                operator_client,
                                                                                                viewer_client):
    """The demo's edge-group flow (v0.13): publish waits on a quorum of 2 of 3 mirrors; the mirror still running
    when two succeeded is cancelled, and the flow page's edge-group section says so."""
    from django.test import Client

    from dashboard.demo.workload import mirror_flow
    from ffcore.flows.flows import Flows
    from ffcore.flows.reads import describe_flow

    flows = Flows(dashboard_backend)
    fid = mirror_flow(flows)
    snap = describe_flow(dashboard_backend, fid)
    assert snap is not None
    (group,) = snap.edge_groups
    assert (group.policy, group.total_deps) == ({"kind": "quorum", "k": 2, "on_satisfied": "cancel_remaining"}, 3)
    mirrors = sorted({e.upstream for e in flows.get(fid).edges})
    for eid in mirrors[:2]:
        _succeed_on(dashboard_backend, fid, eid)
    from ffcore.flows.dag import resolve_outgoing

    resolve_outgoing(dashboard_backend, [(mirrors[2], fid, "cancelled")])  # as the completion listener does
    snap = describe_flow(dashboard_backend, fid)
    (group,) = snap.edge_groups
    assert group.group_state == "satisfied" and group.cancelled_siblings == [mirrors[2]]
    assert (group.failed_count, group.sibling_cancelled_count) == (1, 1)  # upstream's count kept; ours says why
    page = operator_client.get(f"/flows/{fid}/").content.decode()
    cancelled = page.split("<td data-cancelled>", 1)[1].split("</td>", 1)[0]
    assert "quorum" in page and mirrors[2].split(":")[-1] in cancelled and mirrors[0].split(":")[-1] not in cancelled
    assert "2 succeeded · 1 cancelled by the group</td>" in page  # not "1 failed": the quorum cancelled it
    # The table alone, as the live push renders it: the same words; a viewer reads it, nobody signed out does.
    table = operator_client.get(f"/flows/{fid}/groups").content.decode()
    assert table.lstrip().startswith('<table class="grid" id="edge-group-table" data-live=')
    assert "2 succeeded · 1 cancelled by the group</td>" in table and "<details" not in table
    assert viewer_client.get(f"/flows/{fid}/groups").status_code == 200
    anonymous = Client().get(f"/flows/{fid}/groups")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert operator_client.get("/flows/ffffffff-ffff-4fff-bfff-ffffffffffff/groups").status_code == 404


def _succeed_on(backend, fid: str, eid: str) -> None:
    from ffcore.flows.dag import resolve_outgoing
    from tests.ffcore.invariants import claim, complete

    complete(backend, eid, claim(backend, eid, lane="demo"))
    resolve_outgoing(backend, [(eid, fid, "success")])
