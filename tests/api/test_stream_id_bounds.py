"""Stream ids that look valid but are not (issue #37): beyond 2^64−1, or `0-0` as an exclusive bound, on
every door — pages, REST read, REST tail, the audit page — answer 4xx (or an empty page), never a 500 with
Valkey's internals; and a command Valkey refuses on a read is a 400 that does not echo Valkey's text."""

from __future__ import annotations

import pytest
import redis
from django.test import Client as DjangoClient

from dashboard.api import streams as stream_routes
from ffcore.errors import InvalidInput
from ffcore.execution.client import Client
from ffcore.streams import streams
from ffcore.worker.worker import Registry, Worker, WorkerConfig

pytestmark = pytest.mark.django_db

TOO_BIG = ("18446744073709551616-0", "0-18446744073709551616", "99999999999999999999-0")
MAX = "18446744073709551615-18446744073709551615"


@pytest.fixture
def task(dashboard_backend):
    Client(dashboard_backend).create(kind="job")
    (t,) = Worker(dashboard_backend, WorkerConfig(worker_instance_id="w-ids"), Registry()).claim_next(1)
    for n in range(3):
        t.append_frame("log", f"frame {n}")
    return t


@pytest.fixture
def pages(viewer) -> DjangoClient:
    c = DjangoClient()
    c.force_login(viewer)
    return c


def _api(t) -> str:
    return f"/v1/executions/{t.execution_id}/attempts/{t.attempt_index}/stream"


def test_ids_beyond_64_bits_are_refused_by_the_one_parser():
    for bad in TOO_BIG:
        with pytest.raises(InvalidInput):
            streams.parse_id(bad)
    assert streams.parse_id(MAX) == (2**64 - 1, 2**64 - 1)


@pytest.mark.parametrize("bad", TOO_BIG)
def test_out_of_range_ids_answer_4xx_on_the_rest_read_and_tail(client, task, bad):
    for url in (f"{_api(task)}?from={bad}", f"{_api(task)}?to={bad}", f"{_api(task)}/tail?after={bad}"):
        r = client.get(url)
        assert r.status_code == 422, url
        assert "ERR" not in r.content.decode() and "Lua" not in r.content.decode()


def test_the_largest_id_as_a_tail_cursor_is_an_empty_answer(client, task):
    r = client.get(f"{_api(task)}/tail?after={MAX}")
    assert r.status_code == 200 and r.json()["count"] == 0


@pytest.mark.parametrize("bad", TOO_BIG)
def test_out_of_range_ids_answer_400_on_the_stream_page_and_the_audit_page(pages, task, bad):
    url = f"/executions/{task.execution_id}/attempts/{task.attempt_index}/stream/?before={bad}"
    assert pages.get(url).status_code == 400
    assert pages.get(f"/audit/?before={bad}").status_code == 400


def test_zero_as_an_exclusive_bound_is_an_empty_page_not_a_crash(pages, task):
    url = f"/executions/{task.execution_id}/attempts/{task.attempt_index}/stream/?before=0-0"
    r = pages.get(url, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "frame 0" not in r.content.decode()
    assert pages.get("/audit/?before=0-0").status_code == 200


def test_exclusive_bounds_at_either_end_read_nothing(dashboard_backend, task):
    assert streams.read_latest(dashboard_backend, task.execution_id, task.attempt_index, 10, before="0-0").frames == []
    assert streams.read_latest(dashboard_backend, task.execution_id, task.attempt_index, 10, before=MAX).frames
    with pytest.raises(InvalidInput):
        streams.read_stream(dashboard_backend, task.execution_id, task.attempt_index, TOO_BIG[0])


def test_a_read_valkey_refuses_is_a_400_without_valkeys_text(client, pages, task, monkeypatch):
    class Refusing:
        def read(self, *a, **kw):
            raise redis.ResponseError("ERR Error running script f_123: @user_script:42: secret internals")

    monkeypatch.setattr(stream_routes, "stream_pool", lambda: Refusing())
    r = client.get(_api(task))
    assert r.status_code == 400 and "internals" not in r.content.decode() and "script" not in r.content.decode()

    def refuse(*a, **kw):
        raise redis.ResponseError("ERR invalid end ID for the interval")

    monkeypatch.setattr("dashboard.views.streams.sel.stream_page", refuse)
    page = pages.get(f"/executions/{task.execution_id}/attempts/{task.attempt_index}/stream/")
    assert page.status_code == 400 and "interval" not in page.content.decode()
