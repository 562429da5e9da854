"""The `up --demo` workload: handlers for the demo workers and a generator that keeps every page alive."""
