from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore.backend import Backend
from ffcore.embedded import resolve_settings
from ffcore.errors import FFError
from ffcore.upstream import reconcile


class Command(BaseCommand):
    help = ("On an upstream FlowFabric deployment: keep the indexes the pages need that upstream does not keep "
            "(ff:up:*, docs/upstream.md) until stopped. `up` starts it in upstream mode.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--interval-ms", type=int, default=reconcile.Reconciler.interval_ms,
                            help="time between two ticks (each costs 7 commands per flow partition, pipelined)")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["interval_ms"] < 100:
            raise CommandError("--interval-ms must be at least 100")
        try:
            backend = Backend.connect(resolve_settings(settings.FF_SETTINGS, settings.DATA_DIR))
        except FFError as e:
            raise CommandError(str(e)) from None
        if backend.upstream is None:
            raise CommandError("ffupindex runs against an upstream FlowFabric deployment only; on our own library "
                               "ffscanners keeps the indexes")
        self.stdout.write(f"upstream index reconciler running against {backend.server} ({backend.upstream.label})")
        reconcile.serve(backend, interval_ms=opts["interval_ms"])
