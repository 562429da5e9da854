from __future__ import annotations

import getpass
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore import audit
from ffcore.backend import Backend
from ffcore.errors import FFError
from ffcore.execution.explain import fmt_ms
from ffcore.suspension import hmac_secrets


class Command(BaseCommand):
    help = ("Rotate the waitpoint HMAC secret on every partition: NEW_KID mints new tokens, the previous kid's "
            "tokens stay valid for the grace window (FF_WAITPOINT_HMAC_GRACE_MS). --list shows the kids.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("new_kid", nargs="?", help="the new key id (no ':'), e.g. k2")
        parser.add_argument("--secret", default="", help="even-length hex secret (default: generate 32 random bytes)")
        parser.add_argument("--grace-ms", type=int, default=None, help="grace of the previous kid, ms")
        parser.add_argument("--list", action="store_true", help="only list the current and still-accepted kids")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            backend = Backend.connect(settings.FF_SETTINGS)
            if not opts["list"]:
                if not opts["new_kid"]:
                    raise CommandError("name the new kid (e.g. `ffrotatesecret k2`), or pass --list")
                secret = opts["secret"] or hmac_secrets.generate_secret()
                r = hmac_secrets.rotate(backend, opts["new_kid"], secret, opts["grace_ms"])
                # Every rotation is in the audit trail, whichever door made it (here: a shell on the server).
                audit.record(backend, actor=f"cli:{getpass.getuser()}", action="rotate_waitpoint_secret",
                             target=f"kid:{r.new_kid}", reason="", outcome="ok" if not r.failed else
                             f"refused: {', '.join(sorted(set(r.failed.values())))}",
                             detail=f"rotated={len(r.rotated) + len(r.unchanged)} failed={len(r.failed)} "
                                    f"in_progress={len(r.in_progress)}{' (secret given)' if opts['secret'] else ''}")
                self.stdout.write(f"kid {r.new_kid}: rotated on {len(r.rotated)} partitions, already current on "
                                  f"{len(r.unchanged)}; previous kids {', '.join(sorted(r.previous_kids)) or '-'} "
                                  f"stay valid for the grace window; {r.expired_kids_removed} expired kids removed")
                if r.in_progress:
                    self.stdout.write(f"{len(r.in_progress)} partitions were being rotated by someone else: run again")
                if r.failed:
                    codes = sorted(set(r.failed.values()))
                    raise CommandError(f"rotation failed on {len(r.failed)} partitions ({', '.join(codes)}): the kid "
                                       f"{r.new_kid} already exists with a different secret; choose a new kid")
            kids = hmac_secrets.list_kids(backend)
        except FFError as e:
            raise CommandError(str(e)) from None
        self.stdout.write(f"current kid: {kids.current_kid or '(none)'}")
        for kid, until in sorted(kids.grace.items()):
            self.stdout.write(f"  {kid} accepted until {fmt_ms(until)}")
