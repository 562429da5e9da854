"""tests.keyspace.Watch, which the form sweep relies on to prove that a refused request wrote nothing."""

from __future__ import annotations

from tests.keyspace import Watch


def test_the_watch_names_written_keys_and_only_those(backend):
    backend.client.set("a", "1")
    watch = Watch(backend)
    assert watch.wrote() == []
    backend.client.get("a")
    assert watch.wrote() == []  # a read moves nothing
    backend.client.set("b", "2")
    backend.client.hset("h", "f", "v")
    assert watch.wrote() == ["b", "h"]
    backend.client.set("a", "1")  # written, but byte-identical
    assert watch.wrote() == []
    backend.client.delete("b")
    assert watch.wrote() == ["b"]
