"""Upstream FlowFabric's released library (../shared/upstream/, test data only): where to find it.

CI clones main somewhere and keeps ../shared beside the original checkout (as .ci/run finds the conformance
kit): FF_SHARED_DIR, else ../shared next to this checkout, else next to the clone's origin. Missing is a
failure, never a skip."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import REPO


def shared_dir() -> Path:
    candidates = [Path(os.environ["FF_SHARED_DIR"])] if os.environ.get("FF_SHARED_DIR") else []
    candidates.append(REPO.parent / "shared")
    origin = subprocess.run(["git", "remote", "get-url", "origin"], cwd=REPO, capture_output=True, text=True)
    if origin.returncode == 0 and origin.stdout.strip():
        candidates.append(Path(origin.stdout.strip()).parent / "shared")
    for c in candidates:
        if (c / "upstream").is_dir():
            return c
    raise FileNotFoundError(f"../shared/upstream not found (looked in {[str(c) for c in candidates]})")


def upstream_v015_source() -> str:
    return (shared_dir() / "upstream" / "flowfabric-v0.15.0" / "flowfabric.lua").read_text()
