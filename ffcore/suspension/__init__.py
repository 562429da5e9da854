"""Suspension and signals: waitpoint signals, the pending-waitpoint inbox and the HMAC secret ring."""
