from __future__ import annotations

import argparse
import getpass
import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ffcore.errors import FFError
from ffcore.execution.client import Client
from ffcore.execution.explain import fmt_ms
from ffcore.schedules import Schedule, ScheduleInvalid, ScheduleStateRefused, parse_interval, state_refusal

from ... import audit_trail
from ...backend import get_backend

WRITES = ("add", "pause", "resume", "trigger", "delete")


def _ascii_int(text: str) -> int:
    """argparse's `int` takes "١٢" as 12: ASCII digits only, like the API and the page."""
    if not re.fullmatch(r"-?[0-9]{1,12}", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits 0-9)")
    return int(text)


class Command(BaseCommand):
    help = ("Recurring schedules: add, list, pause, resume, trigger (fire now) or delete. Writes need --reason and "
            "are audited as cli:<user>. A schedule is named by its id (sch-...) or its name.")
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=("add", "list", *WRITES[1:]))
        parser.add_argument("target", nargs="?", help="add: the new name; others: a schedule id or name")
        parser.add_argument("--namespace", default="default")
        parser.add_argument("--reason", default="", help="why (required for writes; kept in the audit trail)")
        add = parser.add_argument_group("add")
        add.add_argument("--cron", help='5-field cron, e.g. "0 9 * * 1"')
        add.add_argument("--tz", help="IANA time zone of --cron (default UTC)")
        add.add_argument("--every", help='fixed interval: seconds ("90") or words ("5 minutes", "2 h", "30s")')
        add.add_argument("--kind", help="execution kind each fire creates")
        add.add_argument("--lane", default="default")
        add.add_argument("--payload", default="")
        add.add_argument("--priority", type=_ascii_int, default=0)
        add.add_argument("--overlap", default="allow", help="allow | skip | cancel_previous")
        add.add_argument("--catchup", default="1", help='"skip" or how many missed fires to run after downtime')
        add.add_argument("--paused", action="store_true")

    def handle(self, *args: Any, **o: Any) -> None:
        action = o["action"]
        if action in WRITES and not o["reason"].strip():
            raise CommandError(f"{action} needs --reason (it is kept in the audit trail)")
        if action != "list" and not o["target"]:
            raise CommandError(f"{action} needs a schedule {'name' if action == 'add' else 'id or name'}")
        try:
            backend = get_backend()
            client = Client(backend)
            if action == "list":
                self._list(client, o["namespace"])
                return
            actor = f"cli:{getpass.getuser()}"
            if action == "add":
                target, run = f"schedule:{o['target']}", lambda: self._add(client, o, actor)
            else:
                s = self._find(client, o["target"], o["namespace"])
                if refused := state_refusal(s, action):  # a no-op: said, not audited
                    raise CommandError(refused)
                target, run = f"schedule:{s.id}", lambda: self._write(client, action, s, actor)
            try:
                detail = run()
            except Exception as e:
                audit_trail.record(backend, actor=actor, action=f"schedule_{action}", target=target,
                                   reason=o["reason"], error=e)
                raise
            audit_trail.record(backend, actor=actor, action=f"schedule_{action}", target=target, reason=o["reason"],
                               detail=detail)
        except ScheduleInvalid as e:
            raise CommandError("; ".join(f"invalid {f}: {m}" for f, m in e.errors)) from None
        except ScheduleStateRefused as e:
            raise CommandError(e.message) from None
        except FFError as e:
            raise CommandError(str(e)) from None

    def _add(self, client: Client, o: dict[str, Any], actor: str) -> str:
        if not o["kind"]:
            raise CommandError("add needs --kind")
        every = o["every"]
        kw: dict[str, Any] = {
            "name": o["target"], "namespace": o["namespace"], "cron": o["cron"], "timezone": o["tz"],
            "interval_ms": None, "kind": o["kind"], "lane": o["lane"], "payload": o["payload"],
            "priority": o["priority"], "overlap": o["overlap"], "catchup": o["catchup"], "paused": o["paused"]}
        if every is not None:
            try:
                kw["interval_ms"] = parse_interval(every)
            except ScheduleInvalid as bad:  # name the other bad options too, in one answer
                try:
                    client.schedules.check(**{**kw, "interval_ms": 60_000})
                except ScheduleInvalid as more:
                    raise ScheduleInvalid(*bad.errors[0], more.errors) from None
                raise
        s = client.schedules.create(**kw, by=actor)
        self.stdout.write(f"{s.id}  {s.name}: {s.description}; next {self._next(client, s)}")
        return f"{s.id} {s.name}: {s.description}"

    def _write(self, client: Client, action: str, s: Schedule, actor: str) -> str:
        if action == "trigger":
            eid = client.schedules.trigger(s.id, by=actor)
            self.stdout.write(f"{s.id} fired now: execution {eid}")
            return f"execution {eid}"
        if action == "delete":
            client.schedules.delete(s.id, by=actor)
            self.stdout.write(f"{s.id} deleted")
            return s.name
        done = getattr(client.schedules, action)(s.id, by=actor)
        self.stdout.write(f"{s.id} {'paused' if done.paused else 'active'}; next {self._next(client, done)}")
        return s.name

    def _find(self, client: Client, ref: str, namespace: str) -> Schedule:
        s = client.schedules.get(ref) if ref.startswith("sch-") else client.schedules.by_name(ref, namespace)
        if s is None:
            raise CommandError(f"no schedule {ref!r} (in namespace {namespace!r})")
        return s

    def _list(self, client: Client, namespace: str) -> None:
        rows = client.schedules.list(namespace=namespace)
        if not rows:
            self.stdout.write("no schedules")
        for s in rows:
            state = "paused" if s.paused else "active"
            self.stdout.write(f"{s.id}  {s.name}  [{state}]  {s.description}  kind={s.template.kind} "
                              f"lane={s.template.lane}  next {self._next(client, s)}  fires={s.fires}")

    @staticmethod
    def _next(client: Client, s: Schedule) -> str:
        times = client.schedules.upcoming(s, 1)
        return fmt_ms(times[0]) if times else "-"
