"""`ffupindex` (started by `up` in upstream mode instead of ffscanners) runs the reconciler of our `ff:up:`
indexes: no HMAC secret of ours is demanded or installed, upstream's library stays as it was, and the list fills."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

from ffcore import keys
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


def test_up_on_an_upstream_deployment_serves_the_dashboard_and_keeps_our_indexes(tmp_path, made, raw, upstream_server):
    from ffcore.embedded import free_port
    from tests.dashboard.test_up import _wait_http

    digest = upstream_scenario.code_digest(raw)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO,
                            env=_env(tmp_path, FF_VALKEY_URL=upstream_server.url, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert _wait_http(f"http://127.0.0.1:{port}/login/", proc) == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not raw.exists(keys.UP_RECONCILE_STATUS) and proc.poll() is None:
            time.sleep(0.2)
        assert raw.exists(keys.UP_RECONCILE_STATUS)  # ffupindex ran a whole pass
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    assert "upstream mode" in out, out
    assert upstream_scenario.code_digest(raw) == digest
