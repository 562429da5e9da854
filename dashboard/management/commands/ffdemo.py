from __future__ import annotations

import signal
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dashboard.demo.workload import run
from ffcore.backend import Backend
from ffcore.errors import FFError


class Command(BaseCommand):
    help = "Generate the demo workload (flows, retries, approvals, LLM streams, rate limits) until stopped."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between workload ticks")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            backend = Backend.connect(settings.FF_SETTINGS)
        except FFError as e:
            raise CommandError(str(e)) from None
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        run(backend, stop, opts["interval"])
