"""The task modules each system's own worker CLI loads in S1 and S5 (benchmarks/systems.py has the command
lines). Each defines one task that runs the shared body (benchmarks.recorder.mark) and nothing else: the
peers' defaults, no extra middleware, result backend or settings beyond the server's address."""
