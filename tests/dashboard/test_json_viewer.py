"""The execution page survives any payload or result: any nesting depth, huge strings, NaN, bytes that are not
UTF-8, lone surrogates; it stays small and never renders input as markup."""

from __future__ import annotations

import json

import pytest

from ffcore.execution.client import Client
from ffcore.worker.worker import Worker, WorkerConfig

pytestmark = pytest.mark.django_db

DEEP_ARRAY = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"<script>alert(1)</script>":' + '{"k":' * 9_999 + '"<b>end</b>"' + "}" * 10_000
#: The page's size with both sections rendered, whatever the input (an empty page is about 10 KB).
PAGE_BOUND_BYTES = 600_000


def _page(viewer_client, backend, data: bytes) -> str:
    """The execution page of an execution whose payload is `data` and whose worker completed it with `data`."""
    c = Client(backend)
    eid = c.create(kind="viewer-test", payload=data).execution_id
    (task,) = Worker(backend, WorkerConfig(worker_id="w-json")).claim_next(1)
    assert task.execution_id == eid
    task.complete(data)
    r = viewer_client.get(f"/executions/{eid}/")
    assert r.status_code == 200
    assert len(r.content) < PAGE_BOUND_BYTES
    return r.content.decode()


def _sections(html: str) -> list[str]:
    """The Input and Result sections of an execution page."""
    return [html.split(f'<div id="{name}">')[1].split("</section>")[0] for name in ("input", "result")]


@pytest.mark.parametrize("doc", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
def test_a_document_nested_10000_deep_is_drawn_to_64_levels_and_folds_the_rest(viewer_client, dashboard_backend,
                                                                                doc):
    html = _page(viewer_client, dashboard_backend, doc.encode())
    assert html.count('data-kind="json"') == 2  # payload and result, both as trees
    for section in _sections(html):
        assert section.count('data-json="fold"') == 1
        assert section.count('<details class="jn" open>') == 64
        assert "more characters</small></details>" in section  # the folded source is long: cut too
    # The folded rest is shown as escaped text, never as markup.
    assert "<script>alert(1)</script>" not in html and "<b>end</b>" not in html
    if doc is DEEP_OBJECT:
        assert html.count('<span class="jk">&lt;script&gt;alert(1)&lt;/script&gt;:</span>') == 2


def test_a_1_mib_string_is_shown_as_truncated_text(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, json.dumps("x" * (1 << 20)).encode())
    assert html.count('data-kind="text"') == 2
    assert html.count(f"{(1 << 20) + 2} bytes · text · truncated") == 2


def test_a_long_string_inside_a_document_is_cut_with_a_note(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, json.dumps({"big": "y" * 60_000, "n": 1}).encode())
    assert html.count('data-kind="json"') == 2
    assert html.count("… 55904 more characters") == 2
    assert '<span class="jk">n:</span> <span class="jv">1</span>' in html


def test_a_wide_document_shows_the_first_values_and_counts_the_rest(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, json.dumps([0] * 30_000, separators=(",", ":")).encode())
    assert html.count("[…] 30000 items") == 2
    assert html.count('data-json="more">28001 more…') == 2


def test_bytes_that_are_not_utf8_are_shown_as_a_hex_dump(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, b'{"a": "\xff\xfe\x00<script>"}')
    assert html.count('data-kind="hex"') == 2
    assert "7b 22 61 22 3a 20 22 ff fe 00 3c 73" in html


def test_nan_and_infinity_are_shown_as_written(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, b'{"a": NaN, "b": [Infinity, -Infinity], "c": 1e400}')
    assert html.count('data-kind="json"') == 2
    for shown in ('<span class="jk">a:</span> <span class="jv">NaN</span>',
                  '<span class="jk">0:</span> <span class="jv">Infinity</span>',
                  '<span class="jk">1:</span> <span class="jv">-Infinity</span>',
                  '<span class="jk">c:</span> <span class="jv">1e400</span>'):
        assert html.count(shown) == 2


def test_a_lone_surrogate_is_shown_escaped(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, b'{"\\ud800": "\\udfff"}')
    assert html.count('<span class="jk">\\ud800:</span> <span class="jv">&quot;\\udfff&quot;</span>') == 2


def test_text_after_a_document_is_not_json_and_is_shown_as_text(viewer_client, dashboard_backend):
    html = _page(viewer_client, dashboard_backend, b'{"a": 1} <img src=x onerror=alert(1)>')
    assert html.count('data-kind="text"') == 2
    assert "<img" not in html
