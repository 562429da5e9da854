"""FCALL builders of suspension.lua + signal.lua: suspend, resume, waitpoints, signals, HMAC secrets."""

from __future__ import annotations
