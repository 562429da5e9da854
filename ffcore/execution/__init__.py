"""Executions from the caller's side: the Client, listing, bulk operations and the why-not-running explanation."""
