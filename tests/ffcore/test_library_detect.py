"""Which `flowfabric` library a Valkey holds, read without touching it (issue #40 item 1), against upstream's
real v0.15.0 library: it is recognised by name, never loaded over — not by a start, not by a self-heal, even
with FF_REPLACE_LIBRARY=1 — and left byte-for-byte as it was."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from ffcore import functions as F
from ffcore import library
from ffcore.backend import Backend
from ffcore.embedded import EmbeddedValkey
from ffcore.settings import Settings
from ffcore.upstream import NotOnUpstream
from tests.upstream_library import upstream_v015_source


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    s = EmbeddedValkey(tmp_path_factory.mktemp("detect"), persistent=False).start()
    yield s
    s.stop()


@pytest.fixture
def settings(server: EmbeddedValkey) -> Iterator[Settings]:
    client = Backend.connect(Settings.from_url(server.url), load=False).client
    client.function_flush()
    yield Settings.from_url(server.url)
    client.function_flush()


def test_an_empty_server_and_our_library_are_told_apart(settings):
    client = Backend.connect(settings, load=False).client
    assert library.detect(client).kind == "none"
    b = Backend.connect(settings)
    found = library.detect(b.client)
    assert found.kind == "ours" and found.build == b.build and found.replaceable and not found.is_upstream


def test_upstream_v015_is_recognised_and_refused_with_its_release_named(settings):
    client = Backend.connect(settings, load=False).client
    client.function_load(upstream_v015_source())
    before = client.function_dump()
    found = library.detect(client)
    assert (found.kind, found.contract, found.functions) == ("upstream-v0.14-v0.15", "34", 59)
    assert found.is_upstream and not found.replaceable
    with pytest.raises(library.ForeignLibrary) as e:
        library.refuse_foreign(client)
    assert "upstream FlowFabric v0.14-v0.15" in str(e.value) and "59 functions" in str(e.value)
    assert client.function_dump() == before


def test_connecting_to_upstream_v015_operates_it_without_loading_or_healing(settings):
    client = Backend.connect(settings, load=False).client
    client.function_load(upstream_v015_source())
    before = client.function_dump()
    b = Backend.connect(settings)  # no flag: upstream mode
    assert b.upstream is not None and b.upstream.release == "v0.14-v0.15"
    assert "upstream FlowFabric v0.14-v0.15" in b.build
    with pytest.raises(NotOnUpstream):
        b.call(F.build_version())  # a function only ours has: refused, never reloaded
    with pytest.raises(NotOnUpstream):
        b.call_many([F.build_version()])
    assert client.function_dump() == before


def test_a_self_heal_never_replaces_upstreams_library_even_with_replace_library_set(settings):
    b = Backend.connect(replace(settings, replace_library=True))  # ours, loaded on purpose
    b.client.function_load(upstream_v015_source(), replace=True)  # an upstream deployment's arrives meanwhile
    before = b.client.function_dump()
    with pytest.raises(library.ForeignLibrary):
        b.call(F.build_version())  # ff_build_version is missing there: the self-heal looks, and refuses
    with pytest.raises(library.ForeignLibrary):
        b.call_many([F.build_version()])
    assert b.client.function_dump() == before and b.client.fcall("ff_version", 0) == b"34"
