"""The dashboard's POST routes as the form sweep sees them: real targets, valid fields, what can be bad.

`World` holds one real target of every kind (executions, a suspended execution's waitpoint, a pending
waitpoint, a flow, a budget); `FORMS` says, per URL name, which target a route acts on, the fields of a
valid submission and which of them are numbers or enums, and which URL arguments are ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.urls import URLPattern, URLResolver, get_resolver, reverse

from dashboard.api.main import api
from ffcore.backend import Backend
from ffcore.budgets.budgets import create_budget
from ffcore.budgets.quotas import create_quota_policy
from ffcore.execution.client import Client
from ffcore.flows.flows import Flows
from ffcore.ids import ExecutionId
from ffcore.suspension import hmac_secrets
from tests.dashboard_fixtures import Seed
from tests.ffcore.suspension_support import SECRET, claimed
from tests.keyspace import MISSING_EID, MISSING_UUID


@dataclass(frozen=True)
class World:
    waiting: str  # an execution waiting for a worker
    active: str  # an execution holding a lease
    failed: str  # a finished (failed) execution: replayable
    suspended: str  # a suspended execution ...
    suspended_wid: str  # ... and its active waitpoint
    pending: str  # an active execution ...
    pending_wid: str  # ... with a pending waitpoint
    flow_id: str
    budget_id: str
    quota_id: str
    schedule_id: str = ""  # a schedule (#26)


def build_world(b: Backend, seed: Seed) -> World:
    """The seeded executions plus a suspended one, a pending waitpoint, a flow, a budget and a quota policy."""
    hmac_secrets.install(b, SECRET)
    s = claimed(b, kind="approve", lane="approvals")
    wid = s.suspend(["legal"], timeout_ms=600_000, reason_code="waiting_for_approval").waitpoint_id
    p = claimed(b, kind="callback", lane="mail")
    pending_wid = p.create_pending_waitpoint(expires_in_ms=600_000).waitpoint_id
    flows = Flows(b)
    fid = flows.create(kind="sweep")
    flows.build(fid, [{"kind": "only"}])
    bid, _ = create_budget(b, hard={"tokens": 100})
    qid, _ = create_quota_policy(b, window_seconds=60, max_requests_per_window=5)
    sid = Client(b).schedules.create(name="sweep", kind="sweep", interval_ms=3_600_000).id
    return World(seed.waiting, seed.active, seed.failed, s.execution_id, wid, p.execution_id, pending_wid, fid, bid,
                 qid, sid)


def other_partition(eid: str) -> str:
    """The same UUID under a partition tag it does not live on: well-formed, names nothing."""
    e = ExecutionId(eid)
    return f"{{fp:{(e.partition_index + 1) % 256}}}:{e.uuid}"


@dataclass(frozen=True)
class Form:
    #: URL kwargs of the real target.
    target: Callable[[World], dict[str, str]]
    #: A valid submission (unprefixed field names).
    fields: Callable[[World], dict[str, str]] = lambda w: {"reason": "sweep"}
    prefix: str = ""
    numbers: tuple[str, ...] = ()
    enums: tuple[str, ...] = ()
    #: Query string the form posts to (bulk actions carry the list filters there).
    query: str = ""
    #: URL kwargs that name something, with the lookalikes to try in their place: (label, value of the world).
    ids: dict[str, tuple[tuple[str, Callable[[World], str]], ...]] = field(default_factory=dict)
    #: The form is rendered as a partial even without htmx (bulk preview / confirm).
    partial_only: bool = False
    #: A valid submission writes to Valkey (not the read-only preview, nor sign-in/out).
    writes: bool = True

    def prefixed(self, name: str) -> str:
        return f"{self.prefix}-{name}" if self.prefix else name

    def data(self, w: World, **override: str | None) -> dict[str, str]:
        """The valid submission with some fields replaced (None drops the field), names prefixed."""
        merged: dict[str, str | None] = {**self.fields(w), **override}
        return {self.prefixed(k): v for k, v in merged.items() if v is not None}

    def url(self, name: str, w: World, **args: str) -> str:
        path = reverse(name, kwargs={**self.target(w), **args})
        return f"{path}?{self.query}" if self.query else path


def _eid_lookalikes(real: Callable[[World], str]) -> tuple[tuple[str, Callable[[World], str]], ...]:
    return (("other-partition", lambda w: other_partition(real(w))),
            ("far-partition", lambda w: f"{{fp:65535}}:{ExecutionId(real(w)).uuid}"),
            ("missing", lambda w: MISSING_EID),
            ("malformed", lambda w: ExecutionId(real(w)).uuid))


def _uuid_lookalikes(other: Callable[[World], str]) -> tuple[tuple[str, Callable[[World], str]], ...]:
    return (("someone-elses", other), ("missing", lambda w: MISSING_UUID), ("malformed", lambda w: "not-a-uuid"))


def _saved_view(username: str) -> int:
    """A saved view of this user (created for the sweep; the user is made when the fixture has not)."""
    from django.contrib.auth.models import User

    from dashboard.models import SavedView

    user, _ = User.objects.get_or_create(username=username)
    return SavedView.objects.get_or_create(user=user, name="sweep view", defaults={"query": "lane=default"})[0].pk


def _execution(real: Callable[[World], str], prefix: str, **kw: object) -> Form:
    return Form(target=lambda w: {"eid": real(w)}, prefix=prefix, ids={"eid": _eid_lookalikes(real)}, **kw)  # type: ignore[arg-type]


SCHEDULE_FIELDS = {"reason": "sweep", "name": "sweep", "kind": "sweep", "lane": "default", "when": "every 60 s",
                   "timezone": "UTC", "priority": "0", "overlap": "allow", "catchup": "1", "payload": ""}
SCHEDULE_LOOKALIKES = (("missing", lambda w: "sch-1-0123456789abcdef"), ("malformed", lambda w: "not-a-schedule"))

BULK_QUERY = urlencode({"lane": "default", "kind": "report"})

FORMS: dict[str, Form] = {
    "act_cancel": _execution(lambda w: w.waiting, "cancel"),
    "act_replay": _execution(lambda w: w.failed, "replay"),
    "act_revoke": _execution(lambda w: w.active, "revoke"),
    "act_priority": _execution(lambda w: w.waiting, "priority", numbers=("priority",),
                               fields=lambda w: {"reason": "sweep", "priority": "7"}),
    "act_take": _execution(lambda w: w.waiting, "take", numbers=("lease_seconds",),
                           fields=lambda w: {"reason": "sweep", "lease_seconds": "60"}),
    "bulk_preview": Form(target=lambda w: {}, query=BULK_QUERY, enums=("action",), partial_only=True, writes=False,
                         fields=lambda w: {"reason": "sweep", "action": "cancel"}),
    # The seed holds three "report" executions on lane default; the confirm count must match them.
    "bulk_run": Form(target=lambda w: {}, query=BULK_QUERY, enums=("action",), numbers=("confirm_count",),
                     partial_only=True, fields=lambda w: {"reason": "sweep", "action": "cancel", "confirm_count": "3"}),
    "wp_signal": Form(target=lambda w: {"eid": w.suspended, "wid": w.suspended_wid},
                      fields=lambda w: {"reason": "sweep", "name": "legal", "payload": '{"ok": true}',
                                        "idempotency_key": "sweep-1"},
                      ids={"eid": _eid_lookalikes(lambda w: w.suspended),
                           "wid": _uuid_lookalikes(lambda w: w.pending_wid)}),
    "wp_resume": Form(target=lambda w: {"eid": w.suspended}, ids={"eid": _eid_lookalikes(lambda w: w.suspended)}),
    # Bulk signal (issue #25): every waitpoint of a filter (the world's one suspended execution on lane approvals).
    "wp_bulk_preview": Form(target=lambda w: {}, query="lane=approvals", enums=("mode",), writes=False,
                            fields=lambda w: {"reason": "sweep", "mode": "filter", "name": "legal", "payload": ""}),
    "wp_bulk_run": Form(target=lambda w: {}, query="lane=approvals", enums=("mode",), numbers=("confirm_count",),
                        fields=lambda w: {"reason": "sweep", "mode": "filter", "name": "legal", "payload": "",
                                          "confirm_count": "1"}),
    # The dark/light choice is a cookie: it writes nothing to Valkey.
    "theme": Form(target=lambda w: {}, enums=("theme",), writes=False, fields=lambda w: {"theme": "light"}),
    "wp_close": Form(target=lambda w: {"eid": w.pending, "wid": w.pending_wid},
                     ids={"eid": _eid_lookalikes(lambda w: w.pending),
                          "wid": _uuid_lookalikes(lambda w: w.suspended_wid)}),
    "flow_cancel": Form(target=lambda w: {"flow_id": w.flow_id}, prefix="cancel",
                        ids={"flow_id": _uuid_lookalikes(lambda w: w.budget_id)}),
    "budget_reset": Form(target=lambda w: {"budget_id": w.budget_id}, prefix="reset",
                         ids={"budget_id": _uuid_lookalikes(lambda w: w.quota_id)}),
    "execution_tags": _execution(lambda w: w.waiting, "tag",
                                 fields=lambda w: {"reason": "sweep", "key": "ops.owner", "value": "ana"}),
    "flow_tags": Form(target=lambda w: {"flow_id": w.flow_id}, prefix="tag",
                      fields=lambda w: {"reason": "sweep", "key": "ops.owner", "value": "ana"},
                      ids={"flow_id": _uuid_lookalikes(lambda w: w.budget_id)}),
    # Saved views (issue #25) live in the database: a valid save writes nothing to Valkey.
    "view_save": Form(target=lambda w: {}, writes=False, fields=lambda w: {"name": "sweep", "query": "lane=default"}),
    "view_delete": Form(target=lambda w: {"view_id": str(_saved_view("otto"))}, writes=False, fields=lambda w: {},
                        ids={"view_id": (("someone-elses", lambda w: str(_saved_view("vera"))),
                                         ("missing", lambda w: "999999"))}),
    # Schedules (#26): a new one, the world's schedule edited, and its operator actions.
    "schedule_create": Form(target=lambda w: {}, prefix="new", numbers=("priority", "catchup"), enums=("overlap",),
                            fields=lambda w: {**SCHEDULE_FIELDS, "name": "sweep-new"}),
    "schedule_edit": Form(target=lambda w: {"schedule_id": w.schedule_id}, prefix="edit",
                          numbers=("priority", "catchup"), enums=("overlap",), fields=lambda w: SCHEDULE_FIELDS,
                          ids={"schedule_id": SCHEDULE_LOOKALIKES}),
    "schedule_act": Form(target=lambda w: {"schedule_id": w.schedule_id}, prefix="act", enums=("action",),
                         fields=lambda w: {"reason": "sweep", "action": "trigger"},
                         ids={"schedule_id": SCHEDULE_LOOKALIKES}),
}

#: Sign-in and sign-out accept POST too; they write nothing to Valkey (sessions live in the database).
AUTH_FORMS: dict[str, Form] = {
    "login": Form(target=lambda w: {}, writes=False,
                  fields=lambda w: {"username": "nobody", "password": "wrong-password"}),
    "logout": Form(target=lambda w: {}, writes=False, fields=lambda w: {}),
}

#: Values for every URL argument a dashboard page takes, so each pattern can be turned into a path.
SAMPLE_ARGS = {"eid": MISSING_EID, "wid": MISSING_UUID, "flow_id": MISSING_UUID, "budget_id": MISSING_UUID,
               "quota_id": MISSING_UUID, "job": MISSING_UUID, "attempt": "0", "frame_id": "1-0", "view_id": "999999",
               "schedule_id": "sch-1-0123456789abcdef", "which": "payload"}


def page_patterns() -> list[URLPattern]:
    """Every named URL pattern of the dashboard pages (the REST API under /v1 has its own sweep)."""
    out: list[URLPattern] = []

    def walk(patterns: list[URLPattern | URLResolver]) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if p.namespace != api.urls_namespace:
                    walk(p.url_patterns)
            elif p.name:
                out.append(p)

    walk(get_resolver().url_patterns)
    return out


def sample_path(p: URLPattern) -> str:
    args = set(p.pattern.converters)
    missing = args - set(SAMPLE_ARGS)
    assert not missing, f"route {p.name!r} takes {missing}: add sample values to SAMPLE_ARGS and sweep it"
    return reverse(p.name, kwargs={a: SAMPLE_ARGS[a] for a in args})
