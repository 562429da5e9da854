"""A/B of the wake (#38 item 3): hand-off (FF_TOKEN_WAKE unset) vs the token-list prototype (=1), plus Dramatiq,
interleaved rounds on one embedded Valkey. Run from a tree with prototype.diff applied:

    PYTHONPATH=<tree> python ab.py <rounds> <n> <per_call|paced|batched|threads> <rate> [nodq]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from benchmarks.queues import Bench
from benchmarks.systems import all_systems
from ffcore.embedded import EmbeddedValkey

KEEP = ("tasks_per_s", "p50_ms", "valkey_cpu_us", "workers_cpu_us", "producer_cpu_us", "commands_per_task")


def main() -> None:
    rounds, n, mode, rate = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
    conc = int(os.environ.get("CONC", "64"))
    systems = all_systems(conc)
    ours = systems[0]
    dramatiq = next(s for s in systems if "Dramatiq" in s.name)
    plan = [("handoff", ours, "0"), ("token", ours, "1")]
    if "nodq" not in sys.argv:
        plan.append(("dramatiq", dramatiq, "0"))
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedValkey(Path(tmp) / "v", persistent=False).start()
        marks = EmbeddedValkey(Path(tmp) / "m", persistent=False).start()
        try:
            bench = Bench(server.url, marks.url, conc, 2)
            for r in range(rounds):
                for label, system, token in plan:
                    os.environ["FF_TOKEN_WAKE"] = token  # the producer and workers inherit it
                    got = bench.run(system, mode, n, rate)
                    if "error" in got:
                        print(label, "ERROR", got["error"][:300], flush=True)
                        continue
                    total = got["valkey_cpu_us"] + got["workers_cpu_us"] + got["producer_cpu_us"]
                    print(f"r{r} {label:9s} " + " ".join(f"{k}={got[k]:.1f}" for k in KEEP) + f" total={total:.0f}",
                          flush=True)
        finally:
            server.stop()
            marks.stop()


if __name__ == "__main__":
    main()
