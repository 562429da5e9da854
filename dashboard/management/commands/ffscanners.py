from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ffcore import hmac_secrets
from ffcore.backend import Backend
from ffcore.embedded import resolve_settings
from ffcore.engine.registry import serve
from ffcore.errors import FFError


class Command(BaseCommand):
    help = ("Run the background scanners (lease expiry, delayed promoter, timeouts, deadlines, suspension timeouts, "
            "pending waitpoints...) until stopped.")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            backend = Backend.connect(resolve_settings(settings.FF_SETTINGS, settings.DATA_DIR))
            hmac_secrets.ensure_installed(backend)  # refuses to start without a waitpoint HMAC secret
        except FFError as e:
            raise CommandError(str(e)) from None
        self.stdout.write(f"scanners running against {backend.server}")
        serve(backend)
