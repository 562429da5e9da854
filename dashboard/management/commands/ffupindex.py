from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ffcore.backend import Backend
from ffcore.embedded import resolve_settings
from ffcore.errors import FFError
from ffcore.upstream import reconcile


class Command(BaseCommand):
    help = ("On an upstream FlowFabric deployment: keep the indexes the pages need that upstream does not keep "
            "(ff:up:*, docs/upstream-reads.md) until stopped. `up` starts it in upstream mode.")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            backend = Backend.connect(resolve_settings(settings.FF_SETTINGS, settings.DATA_DIR))
        except FFError as e:
            raise CommandError(str(e)) from None
        if backend.upstream is None:
            raise CommandError("ffupindex runs against an upstream FlowFabric deployment only; on our own library "
                               "ffscanners keeps the indexes")
        self.stdout.write(f"upstream index reconciler running against {backend.server} ({backend.upstream.label})")
        reconcile.serve(backend)
