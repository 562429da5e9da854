from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore import audit, lane_spread
from ffcore.errors import FFError
from ffcore.partition import spread_partitions

from ...backend import get_backend


class Command(BaseCommand):
    help = ("Show or set how many partitions a lane's new solo executions spread over (docs/deployment.md, "
            "'A lane bigger than one node'): `fflane LANE` shows it, `fflane LANE --spread K` sets it.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("lane")
        parser.add_argument("--spread", type=int, default=None, help="1 (its own partition only) up to 64")
        parser.add_argument("--reason", default="", help="why, for the audit trail")

    def handle(self, *args: Any, **opts: Any) -> None:
        lane = opts["lane"]
        try:
            backend = get_backend()
            count = backend.settings.partitions.flow
            if opts["spread"] is not None:
                before = lane_spread.get_spread(backend, lane)
                lane_spread.set_spread(backend, lane, opts["spread"])
                audit.record(backend, actor=f"cli:{getpass.getuser()}", action="set_lane_spread",
                             target=f"lane:{lane}", reason=opts["reason"], outcome="ok",
                             detail=f"spread {before} -> {opts['spread']}")
            spread = lane_spread.get_spread(backend, lane)
        except FFError as e:
            raise CommandError(str(e)) from None
        parts = ", ".join(str(p) for p in spread_partitions(lane, spread, count))
        self.stdout.write(f"lane {lane}: new executions spread over {spread} partition(s): {parts}")
