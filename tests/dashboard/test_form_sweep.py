"""Every dashboard form fed bad input answers 4xx, shows the error, and leaves Valkey byte-identical (issue #12).

Bad input: missing, blank and 1 MB values, invalid UTF-8 (raw, percent-encoded, multipart), bodies past
DATA_UPLOAD_MAX_MEMORY_SIZE or with too many fields, negative / NaN / infinite / huge numbers, unknown enum
strings, and ids from another partition, of something else, naming nothing or malformed. The POST routes
are read from the URL conf, so a new form without a row in `form_routes.FORMS` fails
test_every_post_route_of_the_pages_is_swept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.test import Client as DjangoClient

from tests.dashboard.form_routes import AUTH_FORMS, FORMS, Form, World, build_world, page_patterns, sample_path
from tests.dashboard_fixtures import PASSWORD
from tests.keyspace import Watch, changed, keyspace

pytestmark = pytest.mark.django_db

MB = 1024 * 1024
FORM_TYPE = "application/x-www-form-urlencoded"


@pytest.fixture
def world(seed, dashboard_backend) -> World:
    w = build_world(dashboard_backend, seed)
    # The seed's workers leave ring-probe turn markers (5 s PX): one expiring between a request's before and
    # after snapshots on a slow machine read as a write (CI flake). They are bookkeeping, not state.
    for lanes in dashboard_backend.client.scan_iter(match="ff:ring:*"):
        dashboard_backend.client.delete(lanes)
    return w


# ------------------------------------------------------------------ requests
Send = Callable[[DjangoClient, World, str, Form, dict[str, str]], Any]


def _form(**override: str | None) -> Send:
    return lambda c, w, name, f, h: c.post(f.url(name, w), urlencode(f.data(w, **override)), content_type=FORM_TYPE,
                                           **h)


def _raw(field: str, raw: bytes) -> Send:
    """The valid submission with `field` replaced by raw (not percent-encoded) bytes."""

    def send(c: DjangoClient, w: World, name: str, f: Form, h: dict[str, str]) -> Any:
        body = urlencode(f.data(w, **{field: None})).encode() + b"&" + f.prefixed(field).encode() + b"=" + raw
        return c.generic("POST", f.url(name, w), body, content_type=FORM_TYPE, **h)

    return send


def _multipart(field: str, raw: bytes) -> Send:
    """multipart/form-data with `field` holding raw bytes (the test client would encode a bytes value per byte)."""

    def send(c: DjangoClient, w: World, name: str, f: Form, h: dict[str, str]) -> Any:
        parts = [(k.encode(), v.encode()) for k, v in f.data(w, **{field: None}).items()] + [
            (f.prefixed(field).encode(), raw)]
        body = b"".join(b"--B\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % kv for kv in parts)
        return c.generic("POST", f.url(name, w), body + b"--B--\r\n", content_type="multipart/form-data; boundary=B",
                         **h)

    return send


def _id(arg: str, value: Callable[[World], str]) -> Send:
    return lambda c, w, name, f, h: c.post(f.url(name, w, **{arg: value(w)}), urlencode(f.data(w)),
                                           content_type=FORM_TYPE, **h)


def _query(query: str) -> Send:
    def send(c: DjangoClient, w: World, name: str, f: Form, h: dict[str, str]) -> Any:
        return c.post(f"{f.url(name, w).split('?')[0]}?{query}", urlencode(f.data(w)), content_type=FORM_TYPE, **h)

    return send


def _huge(c: DjangoClient, w: World, name: str, f: Form, h: dict[str, str]) -> Any:
    body = urlencode({**f.data(w), "filler": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + MB)})
    return c.post(f.url(name, w), body, content_type=FORM_TYPE, **h)


def _many_fields(c: DjangoClient, w: World, name: str, f: Form, h: dict[str, str]) -> Any:
    body = urlencode(f.data(w)) + "".join(f"&f{i}=1" for i in range(settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1))
    return c.post(f.url(name, w), body, content_type=FORM_TYPE, **h)


# ------------------------------------------------------------------ cases
@dataclass(frozen=True)
class Case:
    label: str
    send: Send
    #: The field whose error must be shown next to it (data-error), or None for a whole-request error.
    field: str | None
    status: tuple[int, ...] = (400,)
    #: Text the response must contain when no field is named.
    says: str = ""


#: For the forms that act on no target (sign-in, sign-out).
NOWHERE = World(*[""] * 10)
NUMBERS = ["-1", "NaN", "nan", "inf", "-Infinity", "1e309", "1.5", "9" * 5000, "0x10", " "]
#: What a whole-request refusal shows: the form's outcome line (a refused id) or the 400 page (unreadable body).
REFUSED = 'class="outcome bad"'
UNREADABLE = "could not be read"


def cases(name: str, f: Form) -> list[Case]:
    sample = f.fields(NOWHERE)
    optional = {"payload", "idempotency_key"}
    out: list[Case] = []
    for field in sample:
        if field not in optional:
            out += [Case(f"missing-{field}", _form(**{field: None}), field),
                    Case(f"blank-{field}", _form(**{field: "   "}), field)]
        out += [Case(f"1MB-{field}", _form(**{field: "x" * MB}), field),
                Case(f"utf8-raw-{field}", _raw(field, b"ok\xff\xfeok"), field),
                Case(f"utf8-percent-{field}", _raw(field, b"ok%C3%28%FFok"), field),
                Case(f"utf8-multipart-{field}", _multipart(field, b"ok\xc3\x28ok"), field)]
    for field in f.numbers:
        out += [Case(f"number-{field}-{v[:8]}", _form(**{field: v}), field) for v in NUMBERS]
    for field in f.enums:
        out += [Case(f"enum-{field}-{v!r}", _form(**{field: v}), field) for v in ("delete", "Cancel", "cancel\x00")]
    for arg, lookalikes in f.ids.items():
        out += [Case(f"id-{arg}-{label}", _id(arg, value), None, (404,), REFUSED) for label, value in lookalikes]
    out += [Case("body-over-the-cap", _huge, None, (400,), UNREADABLE),
            Case("too-many-fields", _many_fields, None, (400,), UNREADABLE)]
    return out


#: A list filter that does not parse must refuse the bulk action, not widen it to every execution.
BULK_FILTERS = [Case(f"filter-{k}-{v}", _query(urlencode({"lane": "default", "kind": "report", k: v})), k)
                for k, v in [("state", "exploded"), ("limit", "-1"), ("limit", "NaN"), ("tag", "novalue"),
                             ("cursor", "zzz")]]
EXTRA: dict[str, list[Case]] = {
    "wp_signal": [Case(f"payload-{label}", _form(payload=v), "payload") for label, v in [
        ("nan", '{"a": NaN}'), ("infinity", "[Infinity]"), ("1e309", '{"a": 1e309}'), ("not-json", "{nope"),
        ("deep", "[" * 30_000 + "]" * 30_000), ("lone-surrogate", '"\\ud800"')]]
    + [Case("name-control", _form(name="a\x07b"), "name"),
       Case("idempotency-key-bad", _form(idempotency_key="a b/c"), "idempotency_key")],
    "bulk_preview": BULK_FILTERS,
    "bulk_run": BULK_FILTERS,
}


def _problem(r: Any, case: Case, htmx: bool, f: Form, wrote: list[str], *, or_error: str = "") -> str | None:
    """What is wrong with the answer to one bad request, or None (`or_error`: another acceptable data-error)."""
    body = r.content.decode(errors="replace")
    if wrote:
        return f"wrote {wrote[:5]}"
    if r.status_code not in case.status:
        return f"status {r.status_code}, expected {case.status}: {body[:200]!r}"
    if case.field is not None and not any(f'data-error="{e}"' in body for e in (case.field, or_error) if e):
        return f"no error next to {case.field}: {body[:200]!r}"
    if case.field is None and case.says not in body:
        return f"no {case.says!r}: {body[:200]!r}"
    if (htmx or f.partial_only) and "<html" in body:
        return "an htmx request got a whole page"
    return None


@pytest.mark.parametrize("name", list(FORMS))
def test_bad_input_is_a_4xx_with_the_error_shown_and_nothing_written(operator_client, world, dashboard_backend,
                                                                   name):
    """Every case, with and without htmx; all failures are listed at once."""
    f = FORMS[name]
    failures = []
    watch = Watch(dashboard_backend)
    for case in cases(name, f) + EXTRA.get(name, []):
        for htmx in (True, False):
            r = case.send(operator_client, world, name, f, {"HTTP_HX_REQUEST": "true"} if htmx else {})
            problem = _problem(r, case, htmx, f, watch.wrote())
            if problem:
                failures.append(f"{case.label} (htmx={htmx}): {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", list(FORMS))
def test_the_valid_submission_the_sweep_starts_from_is_accepted(operator_client, world, dashboard_backend, name):
    """So each refusal above is about the bad value, not about a dead target."""
    f = FORMS[name]
    before = keyspace(dashboard_backend)
    r = _form()(operator_client, world, name, f, {"HTTP_HX_REQUEST": "true"})
    assert r.status_code == 200, r.content[:500]
    assert (changed(before, keyspace(dashboard_backend)) != []) == f.writes


def test_every_post_route_of_the_pages_is_swept(operator, dashboard_backend):
    """A POST route added to the URL conf without a row in FORMS (or AUTH_FORMS) fails here."""
    accepting = set()
    for p in page_patterns():
        c = DjangoClient()
        c.force_login(operator)
        if c.post(sample_path(p), {}).status_code != 405:
            accepting.add(p.name)
    assert accepting == set(FORMS) | set(AUTH_FORMS)


def test_sign_in_refuses_bad_input_with_a_400_and_the_error_shown(client, operator, dashboard_backend, settings):
    """Wrong credentials (what bad bytes in a username or password amount to) are a form-wide error."""
    # An unknown user still costs one hash (timing); a cheap hasher keeps ~20 refusals fast.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
    settings.AXES_FAILURE_LIMIT = 1000  # this sweep is ~20 refusals; throttling has its own test
    f = AUTH_FORMS["login"]
    failures = []
    for case in cases("login", f):
        before = keyspace(dashboard_backend)
        r = case.send(client, NOWHERE, "login", f, {})
        problem = _problem(r, case, False, f, changed(before, keyspace(dashboard_backend)), or_error="__all__")
        if problem:
            failures.append(f"{case.label}: {problem}")
    assert not failures, "\n".join(failures)
    assert "_auth_user_id" not in client.session
    r = client.post("/login/", {"username": operator.username, "password": PASSWORD})
    assert r.status_code == 302 and client.session["_auth_user_id"] == str(operator.pk)


def test_sign_out_survives_unreadable_bodies_and_writes_nothing(operator, dashboard_backend):
    f = AUTH_FORMS["logout"]
    for send, status in [(_huge, 400), (_many_fields, 400), (_raw("next", b"/\xff\xfe"), 302)]:
        c = DjangoClient()
        c.force_login(operator)
        before = keyspace(dashboard_backend)
        r = send(c, NOWHERE, "logout", f, {})
        assert r.status_code == status, r.content[:300]
        assert changed(before, keyspace(dashboard_backend)) == []
        if status == 400:
            assert UNREADABLE in r.content.decode()
