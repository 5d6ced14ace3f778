"""The package's type hints hold: `mypy --strict` over the package and the generator (Debian's
python3-mypy; skipped where it is not installed)."""

import os
import subprocess
import sys

import pytest

from conftest import PACKAGE_DIR

pytest.importorskip("mypy")


def test_mypy_strict():
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", os.devnull,
                          "payd", os.path.join("scripts", "gen_models.py")],
                         cwd=PACKAGE_DIR, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
