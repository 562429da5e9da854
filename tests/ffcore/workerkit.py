"""Running real workers in a test: each worker's loop on a thread of its own, past its subscription."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ffcore.worker.worker import Worker


@contextmanager
def running(workers: Sequence[Worker], *, listening: bool = True, timeout_s: float = 5.0
            ) -> Iterator[list[threading.Thread]]:
    """Start every worker's run loop (and, with `listening`, wait until each listens on the wake hub); yields their
    threads, in the order of `workers`, and stops them on the way out."""
    threads = [threading.Thread(target=w.run, kwargs={"install_signal_handlers": False}, daemon=True)
               for w in workers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + timeout_s
        while listening and not all(w.claimer.listening for w in workers):
            assert time.monotonic() < deadline, "the workers did not start listening"
            time.sleep(0.01)
        yield threads
    finally:
        for w in workers:
            w.stop()
        for t in threads:
            t.join(10)
