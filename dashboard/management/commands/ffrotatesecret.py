from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
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
        chosen = parser.add_mutually_exclusive_group()
        chosen.add_argument("--secret-file", metavar="PATH",
                            help="read the new even-length hex secret from PATH (default: generate 32 random bytes)")
        chosen.add_argument("--secret-stdin", action="store_true", help="read the new hex secret from stdin")
        # Removed: argv shows in `ps` and /proc/<pid>/cmdline to every user of the machine. Kept only to say so.
        chosen.add_argument("--secret", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--grace-ms", type=int, default=None, help="grace of the previous kid, ms")
        parser.add_argument("--list", action="store_true", help="only list the current and still-accepted kids")

    def chosen_secret(self, opts: dict[str, Any]) -> str:
        """The secret from --secret-file or --secret-stdin ("" = generate one); never from argv."""
        if opts["secret"] is not None:
            raise CommandError("--secret was removed: a secret on the command line is visible to every user of this "
                               "machine (ps, /proc). Use --secret-file PATH or --secret-stdin, with a new secret.")
        if opts["secret_stdin"]:
            raw = sys.stdin.read()
        elif opts["secret_file"]:
            try:
                raw = Path(opts["secret_file"]).read_text()
            except OSError as e:
                raise CommandError(f"cannot read --secret-file: {e.strerror}") from None
        else:
            return ""
        secret = raw.strip()
        if not secret:
            raise CommandError("the chosen secret is empty")
        return secret

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            backend = Backend.connect(settings.FF_SETTINGS)
            if not opts["list"]:
                if not opts["new_kid"]:
                    raise CommandError("name the new kid (e.g. `ffrotatesecret k2`), or pass --list")
                given = self.chosen_secret(opts)
                secret = given or hmac_secrets.generate_secret()
                r = hmac_secrets.rotate(backend, opts["new_kid"], secret, opts["grace_ms"])
                # Every rotation is in the audit trail, whichever door made it (here: a shell on the server).
                audit.record(backend, actor=f"cli:{getpass.getuser()}", action="rotate_waitpoint_secret",
                             target=f"kid:{r.new_kid}", reason="", outcome="ok" if not r.failed else
                             f"refused: {', '.join(sorted(set(r.failed.values())))}",
                             detail=f"rotated={len(r.rotated) + len(r.unchanged)} failed={len(r.failed)} "
                                    f"in_progress={len(r.in_progress)}{' (secret given)' if given else ''}")
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
