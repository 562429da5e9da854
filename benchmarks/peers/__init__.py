"""Peer task queues on the same Valkey, each with a minimal setup and a no-op task that only marks
(benchmarks.recorder): RQ (SimpleWorker), Celery (Valkey broker and result backend, prefork), Dramatiq
(Redis broker), arq (10 ms poll)."""
