"""Schedule input checks shared by every door (#36 Why-4): exact-match names and ids (no trailing newline),
ASCII-only catch-up, plain-English intervals, nan/inf refused, strict types, every bad field named at once,
state-aware pause/resume; and the DST fall-back day in a real zone, fired by the scanner against Valkey."""

from __future__ import annotations

from datetime import datetime

import pytest

from ffcore import functions as F
from ffcore.engine.schedule_scanner import ScheduleScanner
from ffcore.errors import ERRORS, InvalidId, InvalidInput
from ffcore.execution.client import Client
from ffcore.execution.tags import check_tags
from ffcore.ids import ExecutionId
from ffcore.keys import SchedKeys
from ffcore.schedules import ScheduleInvalid, ScheduleStateRefused, Spec, parse_interval
from ffcore.schedules.model import check_catchup, partition_of
from tests.keyspace import keyspace


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


@pytest.mark.parametrize("text, expected", [
    ("every 5 minutes", 300_000), ("every 2 h", 7_200_000), ("every 30s", 30_000), ("every minute", 60_000),
    ("Every 1 Day", 86_400_000), ("every 10 s", 10_000), ("every 1500 ms", 1500), ("90", 90_000), ("1.5", 1500),
    ("every 2 hours", 7_200_000), ("every 3 mins", 180_000),
])
def test_an_interval_is_read_in_the_words_an_operator_types(text, expected):
    assert parse_interval(text) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", float("nan"), float("inf"), "every 5 fortnights", "²",
                                  "every ١٢ s", "minute", "every", "", "5 minutes ago", "1e3"])
def test_anything_else_is_refused_saying_what_is_accepted(text):
    with pytest.raises(ScheduleInvalid) as e:
        parse_interval(text)
    assert e.value.field == "spec.interval_ms"
    assert "every 5 minutes" in e.value.message or "finite" in e.value.message


@pytest.mark.parametrize("kw, field", [
    ({"name": "nightly\n"}, "name"),
    ({"catchup": "²"}, "catchup"),
    ({"catchup": "١٢"}, "catchup"),
    ({"catchup": True}, "catchup"),
    ({"catchup": 1001}, "catchup"),
    ({"interval_ms": "1000", "cron": None}, "spec.interval_ms"),
    ({"interval_ms": True, "cron": None}, "spec.interval_ms"),
    ({"priority": "5"}, "template.priority"),
    ({"paused": "yes"}, "paused"),
    ({"kind": "report\n"}, "template.kind"),
])
def test_bad_input_is_refused_by_field_with_nothing_written(backend, kw, field):
    before = keyspace(backend)
    args = {"name": "nightly", "kind": "report", "cron": "0 9 * * 1", **kw}
    with pytest.raises(ScheduleInvalid) as e:
        Client(backend).schedules.create(**args)
    assert e.value.field == field, e.value.errors
    assert "int()" not in e.value.message and "base 10" not in e.value.message
    assert keyspace(backend) == before


def test_catchup_as_ascii_digits_or_skip_is_accepted():
    assert (check_catchup("12"), check_catchup("skip"), check_catchup(0)) == (12, 0, 0)


def test_every_bad_field_is_named_in_one_refusal(backend):
    with pytest.raises(ScheduleInvalid) as e:
        Client(backend).schedules.create(name="bad\n", kind="", cron="61 * * * *", timezone="Moon/Base",
                                         overlap="sometimes", catchup="²")
    fields = [f for f, _ in e.value.errors]
    assert {"name", "template.kind", "overlap", "catchup"} <= set(fields)
    assert "spec.timezone" in fields or "spec.cron" in fields
    assert len(e.value.details) == len(fields)


def test_an_update_names_every_bad_field_at_once_and_changes_nothing(backend):
    client = Client(backend)
    s = client.schedules.create(name="weekly", kind="report", cron="0 9 * * 1")
    with pytest.raises(ScheduleInvalid) as e:
        client.schedules.update(s.id, name="x\n", overlap="never", catchup=True)
    assert [f for f, _ in e.value.errors] == ["overlap", "catchup", "name"]
    assert client.schedules.get(s.id) == s


def test_pause_of_a_paused_and_resume_of_an_active_schedule_are_refused(backend):
    client = Client(backend)
    s = client.schedules.create(name="tick", kind="beat", interval_ms=60_000)
    with pytest.raises(ScheduleStateRefused, match="already active"):
        client.schedules.resume(s.id)
    client.schedules.pause(s.id)
    with pytest.raises(ScheduleStateRefused, match="already paused"):
        client.schedules.pause(s.id)
    assert client.schedules.get(s.id).paused


@pytest.mark.parametrize("bad", ["sch-1-0123456789abcdef\n"])
def test_a_schedule_id_with_a_trailing_newline_is_not_an_id(bad):
    with pytest.raises(InvalidId):
        partition_of(bad)


def test_execution_ids_kinds_and_tag_keys_with_a_trailing_newline_are_refused(backend):
    good = str(ExecutionId.mint(3))
    with pytest.raises(InvalidId):
        ExecutionId(good + "\n")
    with pytest.raises(InvalidInput):
        Client(backend).create_call(kind="report\n")
    with pytest.raises(InvalidInput):
        Client(backend).create_call(kind="report", tags={"team.name\n": "a"})
    with pytest.raises(ERRORS["invalid_tag_key"]):
        check_tags({"team.name\n": "a"})


# ------------------------------------------------------------------ DST fall-back, fired by the scanner
def _fires_through(backend, cron: str, first: int, start: str, end: str) -> list[int]:
    """Plant the schedule's next fire time at `first`, tick the scanner on every minute from `start` to `end`
    (UTC), and return the fire times of the runs it made, oldest first."""
    client = Client(backend)
    s = client.schedules.create(name="nightly", kind="report", cron=cron, timezone="Europe/Berlin")
    backend.call(F.schedule_put(SchedKeys(s.partition, s.id), expect=s.version, next_fire_at=first, fields={}))
    scanner = ScheduleScanner(backend)
    for t in range(ms(start), ms(end) + 1, 60_000):
        scanner.tick(now_ms=t)
    return sorted(r.fire_at for r in client.schedules.runs(s.id, 50) if r.outcome == "fired")


def test_a_fixed_wall_time_fires_once_on_the_berlin_fall_back_day(backend):
    # 31 October 2027: 02:00-03:00 happens twice in Berlin (CEST 00:00-01:00 UTC, then CET 01:00-02:00 UTC).
    fired = _fires_through(backend, "30 2 * * *", ms("2027-10-31T00:30:00+00:00"),
                           "2027-10-30T23:50:00+00:00", "2027-10-31T02:10:00+00:00")
    assert fired == [ms("2027-10-31T00:30:00+00:00")]  # the first 02:30 (CEST); not again at 02:30 CET


def test_an_every_30_minutes_cron_keeps_firing_through_both_passes_of_the_repeated_hour(backend):
    fired = _fires_through(backend, "*/30 * * * *", ms("2027-10-31T00:00:00+00:00"),
                           "2027-10-30T23:55:00+00:00", "2027-10-31T02:00:00+00:00")
    assert fired == [ms(f"2027-10-31T{h}+00:00") for h in ("00:00:00", "00:30:00", "01:00:00", "01:30:00",
                                                            "02:00:00")]


def test_a_fixed_wall_time_the_spring_gap_skips_fires_once_just_after_it():
    spec = Spec.build(cron="30 2 * * *", timezone="Europe/Berlin")
    assert spec.upcoming(ms("2027-03-27T12:00:00+00:00"), 2) == [
        ms("2027-03-28T01:00:00+00:00"), ms("2027-03-29T00:30:00+00:00")]  # 03:00 CEST, then 02:30 CEST
