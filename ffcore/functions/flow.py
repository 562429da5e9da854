"""FCALL builders of flow.lua: flows, members, dependency edges, cancel_flow."""

from __future__ import annotations
