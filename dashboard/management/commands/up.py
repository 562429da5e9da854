from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.runner import Up, UpOptions
from ffcore.errors import FFError


class Command(BaseCommand):
    help = "Start Valkey (embedded unless FF_VALKEY_URL is set), load the library, serve the dashboard."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-scanners", action="store_true", help="do not start the background scanners")
        parser.add_argument("--demo", action="store_true",
                            help="also run demo workers and a continuous demo workload, with a demo operator account")
        parser.add_argument("--replace-library", action="store_true",
                            help="replace a flowfabric library that is not ours (default: refuse to start)")
        parser.add_argument("--access-log", nargs="?", const="-", default=None, metavar="PATH",
                            help="write the HTTP access log to this terminal (no PATH) or to PATH; by default it "
                                 "goes to <data dir>/logs/access.log")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            code = Up(UpOptions(host=opts["host"], port=opts["port"], scanners=not opts["no_scanners"],
                                demo=opts["demo"], replace_library=opts["replace_library"],
                                access_log=opts["access_log"]), out=self.stdout).run()
        except FFError as e:
            raise CommandError(str(e)) from None
        if code:
            raise CommandError("stopped because a child process exited")
