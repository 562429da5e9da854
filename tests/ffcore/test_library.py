"""The library loader against a real Valkey."""

import redis

from ffcore import functions as F
from ffcore import library


def test_ff_version_is_the_contract_version(backend):
    assert backend.client.fcall("ff_version", 0) == b"6"
    assert backend.call(F.build_version()).status == library.build_version()


def test_joined_source_follows_the_order_file():
    src = library.library_source()
    assert src.startswith("#!lua name=flowfabric\n")
    positions = [src.index(f"-- source: lua/{name}\n") for name in library.file_order()]
    assert positions == sorted(positions)
    assert library.file_order()[:2] == ["helpers.lua", "version.lua"]


def test_registers_every_contract_function(backend):
    libs = backend.client.function_list(library="flowfabric")
    names = {f[b"name"].decode() if isinstance(f, dict) else None for f in libs[0][b"functions"]} if isinstance(
        libs[0], dict) else set()
    if not names:  # RESP2 shape: flat lists
        flat = libs[0]
        fns = flat[flat.index(b"functions") + 1]
        names = {fn[fn.index(b"name") + 1].decode() for fn in fns}
    assert "ff_version" in names and "ff_build_version" in names
    assert "ff_create_execution" in names


def test_an_fcall_after_function_flush_reloads_once_and_succeeds(backend):
    backend.client.function_flush()
    try:
        backend.client.fcall("ff_version", 0)
        raise AssertionError("function should be gone")
    except redis.ResponseError:
        pass
    assert backend.call(F.version()).status == "6"


def test_ensure_loaded_is_a_no_op_when_current(backend):
    before = backend.client.function_dump()
    assert library.ensure_loaded(backend.client) == library.build_version()
    assert backend.client.function_dump() == before
