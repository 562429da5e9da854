"""The loader never clobbers a `flowfabric` library that is not ours (issue #22, item 4): a foreign one is
refused with one line naming its version and left loaded, unless replacing it is asked for explicitly."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace

import pytest
from django.core.management import CommandError, call_command

from ffcore import library
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.settings import Settings
from tests.conftest import REPO


def fake_library(version: str, names: list[str], build: str | None = None) -> str:
    """A library named flowfabric whose functions answer nothing useful; ff_version answers `version`."""
    lines = ["#!lua name=flowfabric", f"redis.register_function('ff_version', function() return '{version}' end)"]
    if build is not None:
        lines.append(f"redis.register_function('ff_build_version', function() return '{build}' end)")
    lines += [f"redis.register_function('{n}', function() return 0 end)" for n in names if n != "ff_version"]
    return "\n".join(lines) + "\n"


#: Neither ours nor a known upstream release: ff_version "35" (no upstream release answers it), 59 functions,
#: some named like ours.
FOREIGN = fake_library("35", sorted(library.UPSTREAM_V020_FUNCTIONS) + [f"ff_later_{i}" for i in range(12)])
#: Shaped like upstream v0.14-v0.15 (ff_version "34", v0.2.0's 47 functions among 59): operated, not refused.
UPSTREAM_LIKE = fake_library("34", sorted(library.UPSTREAM_V020_FUNCTIONS) + [f"ff_later_{i}" for i in range(12)])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey(tmp_path_factory.mktemp("foreign"), persistent=False).start()
    yield s
    s.stop()


@pytest.fixture
def settings_with(server: EmbeddedValkey) -> Iterator[Settings]:
    client = Backend.connect(Settings.from_url(server.url), load=False).client
    client.function_flush()
    yield Settings.from_url(server.url)
    client.function_flush()


def _load(settings: Settings, source: str) -> bytes:
    c = Backend.connect(settings, load=False).client
    c.function_load(source, replace=True)
    return c.function_dump()


def test_a_foreign_library_is_refused_with_its_version_and_left_loaded(settings_with):
    before = _load(settings_with, FOREIGN)
    with pytest.raises(library.ForeignLibrary) as e:
        Backend.connect(settings_with)
    assert "ff_version '35'" in str(e.value) and "59 functions" in str(e.value) and "--replace-library" in str(e.value)
    assert "\n" not in str(e.value)
    c = Backend.connect(settings_with, load=False).client
    assert c.function_dump() == before and c.fcall("ff_version", 0) == b"35"


def test_a_library_shaped_like_upstream_v015_is_operated_in_upstream_mode_and_left_loaded(settings_with):
    before = _load(settings_with, UPSTREAM_LIKE)
    b = Backend.connect(settings_with)  # no flag, no refusal: upstream mode
    assert b.upstream is not None and b.upstream.release == "v0.14-v0.15"
    assert b.client.function_dump() == before and b.client.fcall("ff_version", 0) == b"34"


def test_the_library_command_exits_with_one_line_and_replaces_only_when_asked(settings_with, server):
    _load(settings_with, FOREIGN)
    cmd = [sys.executable, "-m", "ffcore.library", "--url", server.url]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1 and "'35'" in out.stderr
    c = Backend.connect(settings_with, load=False).client
    assert c.fcall("ff_version", 0) == b"35"
    out = subprocess.run([*cmd, "--replace-library"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == library.build_version() and c.fcall("ff_version", 0) == b"6"


def test_ffworker_and_ffscanners_refuse_to_start_on_a_foreign_library(settings_with, server, monkeypatch):
    from django.conf import settings as dj

    _load(settings_with, FOREIGN)
    monkeypatch.setattr(dj, "FF_SETTINGS", settings_with)
    for command, args in (("ffworker", ["--module", "tests.worker_handlers"]), ("ffscanners", [])):
        with pytest.raises(CommandError) as e:
            call_command(command, *args)
        assert "ff_version '35'" in str(e.value), command
    assert Backend.connect(settings_with, load=False).client.fcall("ff_version", 0) == b"35"


def test_ffworker_and_ffscanners_refuse_to_start_on_an_upstream_deployment(settings_with, monkeypatch):
    from django.conf import settings as dj

    before = _load(settings_with, UPSTREAM_LIKE)
    monkeypatch.setattr(dj, "FF_SETTINGS", settings_with)
    for command, args in (("ffworker", ["--module", "tests.worker_handlers"]), ("ffscanners", [])):
        with pytest.raises(CommandError) as e:
            call_command(command, *args)
        assert "upstream FlowFabric v0.14-v0.15" in str(e.value) and "docs/upstream.md" in str(e.value), command
    c = Backend.connect(settings_with, load=False).client
    assert c.function_dump() == before and not c.keys("ff:sec:*")  # no secret of ours installed


@pytest.mark.parametrize(("version", "names", "build", "why"), [
    ("6", ["ff_version", "ff_create_execution"], None, "a contract-version library with other functions"),
    ("6", sorted(library.UPSTREAM_V020_FUNCTIONS), "other-1.0", "the contract set with someone else's build"),
    ("5", sorted(library.UPSTREAM_V020_FUNCTIONS - {"ff_rotate_waitpoint_hmac_secret"}), None, "upstream's v5"),
])
def test_other_libraries_are_refused_too(settings_with, version, names, build, why):
    _load(settings_with, fake_library(version, names, build))
    with pytest.raises(library.ForeignLibrary):
        Backend.connect(settings_with)


@pytest.mark.parametrize(("version", "names", "build"), [
    ("6", sorted(library.UPSTREAM_V020_FUNCTIONS), None),  # upstream v0.2.0 itself: ours is call-compatible
    ("6", ["ff_version"], "ffpy-0.0.9+0123456789ab"),  # an older build of ours
])
def test_upstream_v020_and_older_builds_of_ours_are_replaced(settings_with, version, names, build):
    _load(settings_with, fake_library(version, names, build))
    b = Backend.connect(settings_with)
    assert b.build == library.build_version() and b.client.fcall("ff_version", 0) == b"6"


def test_replace_library_setting_replaces_a_foreign_one(settings_with):
    _load(settings_with, FOREIGN)
    b = Backend.connect(replace(settings_with, replace_library=True))
    assert b.client.fcall("ff_build_version", 0).decode() == library.build_version()


def test_self_heal_does_not_replace_a_foreign_library_either(settings_with):
    b = Backend.connect(settings_with)  # ours, loaded
    b.client.function_load(FOREIGN, replace=True)  # someone else's arrives meanwhile
    from ffcore import functions as F

    with pytest.raises(library.ForeignLibrary):
        b.call(F.build_version())  # missing in theirs: the self-heal looks, and refuses
    assert b.client.fcall("ff_version", 0) == b"35"
