"""`up`'s console (#36 Why-4): a refused form (4xx) is the user's answer, logged in the access log only — Django's
"Bad Request: /..." warning stays off the console; a 5xx still reaches it with its traceback."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse
from django.utils.log import log_response

pytestmark = pytest.mark.django_db


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def console() -> Iterator[Collect]:
    """What reaches the root logger's handlers (the console handler of settings.LOGGING sits there)."""
    h = Collect()
    logging.getLogger().addHandler(h)
    yield h
    logging.getLogger().removeHandler(h)


def test_a_refused_form_logs_nothing_for_the_console(operator_client, dashboard_backend, console):
    body = urlencode({"new-name": "x", "new-when": "every 5 fortnights", "new-reason": ""})
    r = operator_client.post(reverse("schedule_create"), body, content_type="application/x-www-form-urlencoded")
    assert r.status_code == 400
    assert operator_client.get("/no-such-page/").status_code == 404
    assert [x.getMessage() for x in console.records if x.name == "django.request"] == []


def test_a_server_error_still_reaches_the_console(console):
    request = RequestFactory().get("/executions/")
    log_response("Internal Server Error: %s", request.path, response=HttpResponse(status=500), request=request)
    log_response("Bad Request: %s", request.path, response=HttpResponse(status=400), request=request)
    assert [(x.levelname, x.getMessage()) for x in console.records if x.name == "django.request"] == [
        ("ERROR", "Internal Server Error: /executions/")]
