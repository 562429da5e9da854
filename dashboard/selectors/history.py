"""Read models of an execution's History section and its attempts' tracebacks (ffcore.execution.history)."""

from __future__ import annotations

from ffcore.backend import Backend
from ffcore.execution import history, tracebacks
from ffcore.execution.client import Execution

from .sections import detail_section


@detail_section("history")
def history_section(backend: Backend, ex: Execution) -> history.HistoryPage | None:
    """The first page of the History (later pages: the history page, `?cursor=`)."""
    return history.page(backend, str(ex.execution_id))


@detail_section("tracebacks")
def traceback_section(backend: Backend, ex: Execution) -> dict[int, str]:
    """Attempt index -> the traceback its handler raised (one MGET)."""
    return tracebacks.read_many(backend, str(ex.execution_id), [a.index for a in ex.attempts])
