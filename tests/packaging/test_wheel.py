"""The package installs: a wheel built from this tree, installed into a clean venv outside the checkout,
loads the function library, runs a worker from an outside module and serves the dashboard (smoke_wheel.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Top-level entries a build never reads: VCS data, local state, earlier builds.
_NOT_SOURCE_TOP = {".git", "var", "build", "dist"}
#: Anywhere in the tree.
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.egg-info", ".*_cache", ".hypothesis", "node_modules")


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = set(_NOT_SOURCE(folder, names))
    if Path(folder).resolve() == REPO:
        skip |= _NOT_SOURCE_TOP & set(names)
    return skip


def _env() -> dict[str, str]:
    """This environment without what would point the venv back at the checkout or at the test's Valkey."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "DJANGO_SETTINGS_MODULE", "PYTHONSTARTUP"}
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("FF_")}


def _run(cmd: list[str], cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=cwd, timeout=400)
    assert done.returncode == 0, f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.timeout(600)
def test_the_wheel_carries_its_assets_and_works_installed_outside_the_checkout(tmp_path: Path) -> None:
    started = time.monotonic()
    # Built from a copy: setuptools builds in the source tree (build/, *.egg-info), and this checkout is shared.
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=_ignore)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)])
    [wheel] = (tmp_path / "dist").glob("flowfabric_py-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("ffcore/lua/ORDER", "ffcore/lua/helpers.lua", "dashboard/templates/dashboard/login.html",
                 "dashboard/templates/404.html", "dashboard/static/dashboard/app.css",
                 "dashboard/static/vendor/htmx-2.0.11.min.js"):
        assert name in names, f"{name} is missing from {wheel.name}"

    # A clean venv (no system site-packages, so the checkout's editable install is not visible); the outer
    # pip installs into it (--python), which skips bootstrapping a pip of its own.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", str(wheel)])

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = shutil.copy(Path(__file__).with_name("smoke_wheel.py"), elsewhere)
    out = _run([str(python), str(script), "--checkout", str(REPO)], cwd=elsewhere)
    assert out.count("ok: ") == 5, out
    print(out, f"wheel build, venv, install and smoke checks: {time.monotonic() - started:.0f} s", sep="")
