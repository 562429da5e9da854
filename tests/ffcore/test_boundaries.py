"""ffcore stays framework-free."""

import subprocess
import sys

from tests.conftest import REPO


def test_importing_ffcore_does_not_import_django():
    code = (
        "import sys, pkgutil, importlib, ffcore\n"
        "for m in pkgutil.walk_packages(ffcore.__path__, 'ffcore.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [n for n in sys.modules if n.split('.')[0] in ('django', 'channels', 'ninja')]\n"
        "print(len(list(pkgutil.walk_packages(ffcore.__path__))), bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert int(out.stdout.split()[0]) >= 8  # the walk really visited the modules
