"""FCALL builders of stream.lua: attempt stream frames."""

from __future__ import annotations
