"""On a cluster, metric counts ride the multi-slot pipelines they are flushed with and read back whole."""

from __future__ import annotations

from ffcore import metrics
from ffcore.engine import status
from ffcore.flows.cancel import backlog_depth


def test_counts_flushed_with_a_scanner_status_write_read_back_on_a_cluster(cbackend):
    metrics.inc(metrics.ATTEMPT_OUTCOME, "c-lane", "ok", n=3)
    metrics.observe(metrics.SCANNER_CYCLE_SECONDS, 0.02, "c-scan")
    status.write(cbackend, "c-scan", lag_ms=0, ticks=1, acted=0, errors=0)
    got = {s.family.name: s for s in metrics.read_all(cbackend)}
    assert got["ff_attempt_outcome_total"].counts[("c-lane", "ok")] >= 3
    buckets, total = got["ff_scanner_cycle_duration_seconds"].hists[("c-scan",)]
    assert buckets[-1] == ("+Inf", 1.0) and dict(buckets)["0.01"] == 0 and dict(buckets)["0.05"] == 1
    assert abs(total - 0.02) < 1e-9
    assert backlog_depth(cbackend) == 0
