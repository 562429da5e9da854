"""Waitpoint tokens and secrets: rejected tokens reveal nothing, boot install, rotation with a grace window."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from ffcore.errors import ERRORS, ConfigError
from ffcore.functions import Signal
from ffcore.keys import ExecKeys, PartitionKeys
from ffcore.reads import decode_map, text
from ffcore.suspension import hmac_secrets
from ffcore.suspension.signals import Signals
from tests.ffcore.suspension_support import SECRET, check, claimed, core, signal

OTHER = "ff" * 32


def _forged(out, secret: str = OTHER, kid: str = "k1") -> str:
    return f"{kid}:" + hmac.new(bytes.fromhex(secret), b"anything", hashlib.sha1).hexdigest()


def test_the_token_matches_the_contract_hmac(hb):
    t = claimed(hb)
    out = t.suspend("go")
    wp = decode_map(hb.client.hgetall(ExecKeys(t.execution_id).idx.waitpoint(out.waitpoint_id)))
    msg = f"{out.waitpoint_id}|{out.waitpoint_key}|{wp['created_at']}".encode()
    assert out.token == "k1:" + hmac.new(bytes.fromhex(SECRET), msg, hashlib.sha1).hexdigest()


@pytest.mark.parametrize(("make_token", "code"), [
    (lambda out: "", "missing_token"),
    (lambda out: "garbage", "invalid_token"),
    (lambda out: "k1:" + "0" * 40, "invalid_token"),
    (lambda out: _forged(out), "invalid_token"),
    (lambda out: out.token.replace("k1:", "k9:"), "invalid_token"),
    (lambda out: out.token[:-1] + ("0" if out.token[-1] != "0" else "1"), "invalid_token"),
])
def test_bad_tokens_are_rejected_and_change_nothing_but_the_failure_stamp(hb, make_token, code):
    t = claimed(hb)
    out = t.suspend("go")
    before = core(hb, t.execution_id)
    with pytest.raises(ERRORS[code]):
        signal(hb, t.execution_id, out.waitpoint_id, make_token(out), "go")
    after = core(hb, t.execution_id)
    assert after.pop("last_hmac_validation_failed_at")
    assert after == before
    assert hb.client.zcard(ExecKeys(t.execution_id).signals) == 0
    check(hb, t.execution_id)


def test_a_bad_token_is_refused_before_the_execution_state_is_revealed(hb):
    # A finished execution would say target_not_signalable to a valid token; a bad one only learns "invalid".
    t = claimed(hb)
    out = t.suspend("go")
    signal(hb, t.execution_id, out.waitpoint_id, out.token, "go")
    with pytest.raises(ERRORS["target_not_signalable"]):
        signal(hb, t.execution_id, out.waitpoint_id, out.token, "go")
    with pytest.raises(ERRORS["invalid_token"]):
        signal(hb, t.execution_id, out.waitpoint_id, _forged(out), "go")
    # An unknown waitpoint id is an invalid token too, not "not found".
    with pytest.raises(ERRORS["invalid_token"]):
        signal(hb, t.execution_id, "6ba7b810-9dad-11d1-80b4-00c04fd430c8", out.token, "go")


def test_a_token_of_another_waitpoint_is_refused(hb):
    a, b = claimed(hb), claimed(hb)
    out_a, out_b = a.suspend("go"), b.suspend("go")
    with pytest.raises(ERRORS["invalid_token"]):
        signal(hb, a.execution_id, out_a.waitpoint_id, out_b.token, "go")
    assert core(hb, a.execution_id)["public_state"] == "suspended"


def test_a_previous_secret_is_accepted_within_the_grace_window_and_refused_after(hb):
    t = claimed(hb)
    out = t.suspend(["one", "two"])
    report = hmac_secrets.rotate(hb, "k2", OTHER, grace_ms=400)
    assert report.ok and len(report.rotated) == hb.settings.partitions.flow
    assert report.previous_kids == {"k1"}
    kids = hmac_secrets.list_kids(hb)
    assert kids.current_kid == "k2" and set(kids.grace) == {"k1"}
    assert signal(hb, t.execution_id, out.waitpoint_id, out.token, "one").effect == "appended_to_waitpoint"
    new = claimed(hb).suspend("go")
    assert new.token.startswith("k2:")
    time.sleep(0.45)
    with pytest.raises(ERRORS["token_expired"]):
        signal(hb, t.execution_id, out.waitpoint_id, out.token, "two")
    assert core(hb, t.execution_id)["public_state"] == "suspended"
    assert hmac_secrets.list_kids(hb).grace == {}


def test_rotation_is_idempotent_and_refuses_a_conflicting_secret(hb):
    first = hmac_secrets.rotate(hb, "k2", OTHER)
    again = hmac_secrets.rotate(hb, "k2", OTHER)
    assert first.rotated and again.unchanged and not again.rotated and again.ok
    clash = hmac_secrets.rotate(hb, "k2", "ab" * 32)
    assert set(clash.failed.values()) == {"rotation_conflict"} and not clash.ok
    with pytest.raises(ConfigError):
        hmac_secrets.rotate(hb, "bad:kid", OTHER)
    with pytest.raises(ConfigError):
        hmac_secrets.rotate(hb, "k3", "abc")


def test_a_partition_locked_by_another_rotation_is_reported_in_progress(hb):
    from ffcore import keys

    hb.client.set(keys.rotate_lock(3), "someone-else", px=5000)
    report = hmac_secrets.rotate(hb, "k2", OTHER)
    assert report.in_progress == [3] and not report.ok
    assert text(hb.client.hget(PartitionKeys(3).hmac_secrets, "current_kid")) == "k1"
    assert hb.client.get(keys.rotate_lock(3)) == b"someone-else"
    assert hb.client.get(keys.rotate_lock(4)) is None


def test_boot_install_never_overwrites_a_stored_secret_and_repairs_a_torn_one(backend):
    r = hmac_secrets.install(backend, SECRET)
    assert r.installed == backend.settings.partitions.flow
    again = hmac_secrets.install(backend, SECRET)
    assert again.matched == backend.settings.partitions.flow
    backend.client.hdel(PartitionKeys(7).hmac_secrets, "secret:k1")
    other = hmac_secrets.install(backend, OTHER)
    assert (other.repaired, other.mismatched) == (1, backend.settings.partitions.flow - 1)
    assert text(backend.client.hget(PartitionKeys(8).hmac_secrets, "secret:k1")) == SECRET


def test_an_engine_process_refuses_to_start_without_any_secret(backend):
    from dataclasses import replace

    with pytest.raises(ConfigError, match="FF_WAITPOINT_HMAC_SECRET"):
        hmac_secrets.ensure_installed(backend)
    with_secret = replace(backend, settings=replace(backend.settings, waitpoint_hmac_secret=SECRET))
    assert hmac_secrets.ensure_installed(with_secret).installed == backend.settings.partitions.flow
    assert hmac_secrets.ensure_installed(backend) is None  # installed by another process: fine


def test_suspending_without_secrets_is_refused_and_keeps_the_lease(backend):
    t = claimed(backend)
    with pytest.raises(ERRORS["hmac_secret_not_initialized"]):
        t.suspend("go")
    assert not t.consumed
    assert check(backend, t.execution_id)["public_state"] == "active"


def test_the_generated_secret_is_persisted_privately(tmp_path):
    s = hmac_secrets.persisted_secret(tmp_path)
    assert len(s) == 64 and hmac_secrets.persisted_secret(tmp_path) == s
    assert (tmp_path / hmac_secrets.SECRET_FILE).stat().st_mode & 0o077 == 0


def test_a_stored_token_lets_a_trusted_caller_signal_without_seeing_it(hb):
    t = claimed(hb)
    out = t.suspend("go")
    got = Signals(hb).deliver_with_stored_token(t.execution_id, out.waitpoint_id, Signal("go", source_type="operator"))
    assert got.resumed
    other = claimed(hb)
    with pytest.raises(ERRORS["waitpoint_not_found"]):  # a waitpoint of another execution
        Signals(hb).deliver_with_stored_token(other.execution_id, out.waitpoint_id, Signal("go"))
