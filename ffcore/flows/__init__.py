"""Flows: membership, dependency edges, the DAG resolver, staged plans, topology reads and cancel cascades."""
