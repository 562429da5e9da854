from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore import metrics
from ffcore.backend import Backend
from ffcore.embedded import resolve_settings
from ffcore.engine.registry import serve
from ffcore.errors import FFError
from ffcore.suspension import hmac_secrets


class Command(BaseCommand):
    help = ("Run the background scanners (lease expiry, delayed promoter, timeouts, deadlines, suspension timeouts, "
            "pending waitpoints, recurring schedules...) until stopped.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--replace-library", action="store_true",
                            help="replace a flowfabric library that is not ours (default: refuse to start)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            ff = resolve_settings(settings.FF_SETTINGS, settings.DATA_DIR)
            backend = Backend.connect(replace(ff, replace_library=ff.replace_library or opts["replace_library"]))
            if backend.upstream is not None:  # its own server runs its scanners and owns its secrets
                raise CommandError(f"ffscanners does not run against {backend.upstream.label}: upstream's server "
                                   "runs its own scanners (docs/upstream.md)")
            backend.observer = metrics.observe_fcall  # FCALL latency in /metrics covers this process too
            hmac_secrets.ensure_installed(backend)  # refuses to start without a waitpoint HMAC secret
        except FFError as e:
            raise CommandError(str(e)) from None
        self.stdout.write(f"scanners running against {backend.server}")
        serve(backend)
