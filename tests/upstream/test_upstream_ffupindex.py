"""`ffupindex` (started by `up` in upstream mode instead of ffscanners) runs the reconciler of our `ff:up:`
indexes: no HMAC secret of ours is demanded or installed, upstream's library stays as it was, and the list fills."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import quote

from ffcore import keys
from ffcore.keys import ExecKeys
from tests import upstream_scenario
from tests.conftest import REPO
from tests.dashboard.test_up import _env


def test_ffupindex_keeps_our_indexes_and_touches_nothing_else(tmp_path, made, raw, upstream_server,
                                                                         upstream_settings):
    digest = upstream_scenario.code_digest(raw)
    secrets = {k: raw.hgetall(k) for k in raw.keys("ff:sec:*")}
    proc = subprocess.Popen([sys.executable, "manage.py", "ffupindex"], cwd=REPO,
                            env=_env(tmp_path, FF_VALKEY_URL=upstream_server.url, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    parts = range(upstream_settings.partitions.flow)

    def listed() -> int:
        pipe = raw.pipeline(transaction=False)
        for n in parts:
            pipe.zcard(keys.up_created(n))
        return sum(pipe.execute())

    try:
        deadline = time.monotonic() + 20  # polled: the output is read only once the process has stopped
        while time.monotonic() < deadline and listed() < len(made.executions()) and proc.poll() is None:
            time.sleep(0.2)
        assert listed() == len(made.executions())
        assert raw.sismember(keys.UP_LANES, upstream_scenario.LANE)
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=30)[0]
    assert proc.returncode == 0, out
    assert re.search(r"upstream index reconciler running against .*upstream FlowFabric v0\.14-v0\.15", out), out
    assert upstream_scenario.code_digest(raw) == digest
    assert {k: raw.hgetall(k) for k in raw.keys("ff:sec:*")} == secrets


def _http(method: str, url: str, token: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_up_on_an_upstream_deployment_lists_and_cancels_over_rest_and_leaves_the_library_as_it_was(
        tmp_path, made, raw, upstream_server):
    """The issue's "Done when", over real HTTP: `up` with no flag and no secret of ours serves the dashboard,
    its ffupindex fills the list, `GET /v1/executions` lists the scenario and a cancel over REST goes through
    upstream's library."""
    from ffcore.embedded import free_port
    from tests.dashboard.test_up import _wait_http

    digest, dump = upstream_scenario.code_digest(raw), raw.function_dump()
    secrets = {k: raw.hgetall(k) for k in raw.keys("ff:sec:*")}
    port, token = free_port(), "up-e2e-token"
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO,
                            env=_env(tmp_path, FF_VALKEY_URL=upstream_server.url, FF_API_TOKEN=token,
                                     PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_http(f"{base}/login/", proc) == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not raw.exists(keys.UP_RECONCILE_STATUS) and proc.poll() is None:
            time.sleep(0.2)
        assert raw.exists(keys.UP_RECONCILE_STATUS)  # ffupindex ran a whole pass
        status, body = _http("GET", f"{base}/v1/executions?limit=100", token)
        assert status == 200, body
        assert sorted(r["execution_id"] for r in body["executions"]) == sorted(made.executions())
        victim = made.solo[0]
        status, body = _http("POST", f"{base}/v1/executions/{quote(victim, safe='')}/cancel", token,
                             {"reason": "cancelled over REST"})
        assert status == 200, body
        core = {a.decode(): b.decode() for a, b in raw.hgetall(ExecKeys(victim).core).items()}
        assert (core["lifecycle_phase"], core["terminal_outcome"]) == ("terminal", "cancelled")
        status, body = _http("GET", f"{base}/v1/executions/{quote(victim, safe='')}", token)
        assert status == 200 and body["public_state"] == "cancelled", body
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    assert "upstream mode" in out, out
    assert upstream_scenario.code_digest(raw) == digest and raw.function_dump() == dump
    assert {k: raw.hgetall(k) for k in raw.keys("ff:sec:*")} == secrets
