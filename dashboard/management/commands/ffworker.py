from __future__ import annotations

import importlib
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore import metrics
from ffcore.backend import Backend
from ffcore.embedded import resolve_settings
from ffcore.errors import FFError
from ffcore.worker.worker import Worker, WorkerConfig, registry


def _csv(raw: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in raw.split(",") if x.strip())


class Command(BaseCommand):
    help = "Run a worker: claim executions for the given lanes and run the handlers registered by --module."
    requires_system_checks: list[str] = []  # a worker process needs no Django checks (nor a database)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--module", required=True, action="append", help="module registering @handler(...)s")
        parser.add_argument("--lanes", default="default", help="comma-separated lanes to claim from")
        parser.add_argument("--capabilities", default="", help="comma-separated capability tokens")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--lease-ttl-ms", type=int, default=settings.FF_SETTINGS.lease_ttl_ms)
        parser.add_argument("--worker-id", default="worker")
        parser.add_argument("--drain-timeout", type=float, default=30.0, help="seconds to finish in-flight tasks")
        parser.add_argument("--scheduler", default="",
                            help="take grants from a scheduler instead of claiming on its own: 'valkey' (in process) "
                                 "or the server's URL (token from FF_API_TOKEN); see docs/worker-guide.md")
        parser.add_argument("--replace-library", action="store_true",
                            help="replace a flowfabric library that is not ours (default: refuse to start)")

    def handle(self, *args: Any, **opts: Any) -> None:
        for name in opts["module"]:
            try:
                importlib.import_module(name)
            except ImportError as e:
                raise CommandError(f"cannot import handler module {name!r}: {e}") from None
        if not registry.handlers:
            raise CommandError(f"no handlers registered by {', '.join(opts['module'])} (use ffcore.worker.handler)")
        if opts["lease_ttl_ms"] < 100:
            raise CommandError("--lease-ttl-ms must be at least 100")
        cfg = WorkerConfig(lanes=_csv(opts["lanes"]), worker_id=opts["worker_id"],
                           capabilities=_csv(opts["capabilities"]),
                           lease_ttl_ms=opts["lease_ttl_ms"], concurrency=opts["concurrency"],
                           drain_timeout_s=opts["drain_timeout"], scheduler=opts["scheduler"])
        try:
            ff = resolve_settings(settings.FF_SETTINGS, settings.DATA_DIR)
            backend = Backend.connect(replace(ff, replace_library=ff.replace_library or opts["replace_library"]))
            if backend.upstream is not None:  # our workers claim through functions only our library has
                raise CommandError(f"ffworker does not run against {backend.upstream.label}: use upstream's worker "
                                   "SDK there (docs/upstream.md)")
            backend.observer = metrics.observe_fcall  # FCALL latency in /metrics covers this process too
            worker = Worker(backend, cfg)
            # The names the Workers page shows: the worker id, then the instance id.
            self.stdout.write(f"worker {cfg.worker_id} · instance {cfg.worker_instance_id} · lanes "
                              f"{','.join(cfg.lanes)} · {len(registry.handlers)} handlers")
            self.stdout.flush()
            worker.run()
        except FFError as e:
            raise CommandError(str(e)) from None
        self.stdout.write(f"worker {cfg.worker_id} · instance {cfg.worker_instance_id} stopped after "
                          f"{worker.completed} tasks")
