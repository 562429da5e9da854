"""Stable ids of the demo's budget and quota, so restarts reuse them."""

import uuid

_NS = uuid.UUID("8a3c7f1e-0d52-4c7e-9a61-2f3b7e0c9d14")
TOKEN_BUDGET = str(uuid.uuid5(_NS, "demo-token-budget"))
EMAIL_QUOTA = str(uuid.uuid5(_NS, "demo-email-quota"))
LANES = ("demo", "llm", "emails", "approvals")
