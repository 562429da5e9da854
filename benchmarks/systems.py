"""The systems S1 and S5 compare, each run the way its users run it: its own worker CLI, as separate
processes (each command line below is one process session), its defaults plus the server's address.

A system's client calls live in benchmarks/producer.py (`client` names them); the task modules the CLIs
load are in benchmarks/peers/.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks.recorder import redis_url

#: Argv lists of one system's worker processes: (url, processes, our handler threads per process).
Commands = Callable[[str, int, int], list[list[str]]]


@dataclass(frozen=True)
class System:
    name: str
    #: The worker side as run, for the tables.
    setup: str
    commands: Commands
    #: benchmarks.producer's client for it, and the call it makes per task.
    client: str
    per_call: str
    #: What its batch API is, or None: then the batched table shows its per-call rounds and says so.
    batch_api: str | None = None
    #: A second worker setup of a system listed before it: only in the per-call table (the batched and
    #: threads tables keep one row per system).
    variant: bool = False
    #: Fewer tasks per run for a system this slow (RQ's fork per job: ≈ 30-100 tasks/s here), said in its row.
    max_n: int | None = None
    #: The package whose absence (the bench extra not installed) makes it "not measured", and its CLI.
    package: str | None = None
    cli: str | None = None

    def unavailable(self) -> str | None:
        """None when it can run here, else why not."""
        if self.package and importlib.util.find_spec(self.package) is None:
            return f"{self.package} not installed (pip install -e '.[bench]', see benchmarks/README.md)"
        if self.cli and shutil.which(self.cli) is None:
            return f"its `{self.cli}` command is not on PATH"
        return None


def _ours(url: str, processes: int, concurrency: int) -> list[list[str]]:
    return [[sys.executable, "manage.py", "ffworker", "--module", "benchmarks.peers.ff_tasks", "--lanes", "bench",
             "--concurrency", str(concurrency), "--worker-id", f"bench-{k}"] for k in range(processes)]


def _ours_defaults(url: str, processes: int, concurrency: int) -> list[list[str]]:
    """ffworker with its own default concurrency (4 handler threads)."""
    return [[sys.executable, "manage.py", "ffworker", "--module", "benchmarks.peers.ff_tasks", "--lanes", "bench",
             "--worker-id", f"bench-{k}"] for k in range(processes)]


def _dramatiq(url: str, processes: int, concurrency: int) -> list[list[str]]:
    return [["dramatiq", "-p", str(processes), "-t", "8", "benchmarks.peers.dramatiq_tasks"]]


def _celery(url: str, processes: int, concurrency: int) -> list[list[str]]:
    return [["celery", "-A", "benchmarks.peers.celery_tasks", "worker", "-c", str(processes), "-P", "prefork"]]


def _rq(worker_class: str | None) -> Commands:
    extra = ["-w", worker_class] if worker_class else []
    return lambda url, processes, concurrency: [["rq", "worker", *extra, "-u", redis_url(url)]] * processes


def _arq(settings: str) -> Commands:
    return lambda url, processes, concurrency: [["arq", f"benchmarks.peers.arq_tasks.{settings}"]] * processes


def all_systems(concurrency: int) -> list[System]:
    return [
        System("FlowFabric (ours)", f"`manage.py ffworker --concurrency {concurrency}` × 2 processes", _ours,
               "ours", "create()", batch_api="create_many, batches of 100"),
        System("FlowFabric (ours), ffworker's default concurrency", "`manage.py ffworker` × 2 processes (4 handler "
               "threads each)", _ours_defaults, "ours", "create()", variant=True),
        System("Dramatiq", "`dramatiq -p 2 -t 8` (its defaults here), Redis broker, default middleware",
               _dramatiq, "dramatiq", "send()", package="dramatiq", cli="dramatiq"),
        System("Celery", "`celery worker -c 2 -P prefork`, Valkey broker, no result backend (its default)",
               _celery, "celery", "delay()", batch_api="group(…).apply_async(), 100 per group (one LPUSH each)",
               package="celery", cli="celery"),
        System("RQ, SimpleWorker", "`rq worker -w rq.worker.SimpleWorker` × 2 processes",
               _rq("rq.worker.SimpleWorker"), "rq", "enqueue()", batch_api="enqueue_many, batches of 100",
               package="rq", cli="rq"),
        System("RQ, forking Worker", "`rq worker` × 2 processes (its default: a fork per job)", _rq(None), "rq",
               "enqueue()", variant=True, max_n=1000, package="rq", cli="rq"),
        System("arq, defaults", "`arq …WorkerSettings` × 2 processes (500 ms poll, max_jobs 10)",
               _arq("WorkerSettings"), "arq", "enqueue_job()", variant=True, package="arq", cli="arq"),
        System("arq, 10 ms poll", "`arq …FastPoll` × 2 processes (poll_delay 10 ms, max_jobs 10)",
               _arq("FastPoll"), "arq", "enqueue_job()", package="arq", cli="arq"),
    ]
