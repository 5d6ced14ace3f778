"""`pip install ./clients/python` works offline: into a fresh venv (no system site packages, so
no setuptools or wheel anywhere), with no package index, pip's own build isolation on; the
package's in-tree backend (build_backend/payd_build.py) needs nothing else. Then the installed
package is imported and used from there, outside the checkout, and uninstalled cleanly."""

import os
import shutil
import subprocess
import sys

from conftest import CONFORMANCE_DIR, PACKAGE_DIR

USE_INSTALLED = r"""
import json, sys
import payd
assert payd.__file__.startswith(sys.prefix), payd.__file__   # the installed copy, not the checkout
from importlib import resources
assert resources.files("payd").joinpath("py.typed").is_file()
vectors = json.load(open(sys.argv[1]))
case = vectors["verify"][0]
event = payd.webhooks.verify(case["secret"], case["headers"], case["payload"], now=case["now"])
assert event == json.loads(case["payload"])
c = payd.Client("sk_x", "http://127.0.0.1:9", max_retries=0, deadline=5)
try:
    c.payments.retrieve("pay_1")
except payd.APIConnectionError as e:
    assert e.status == 0 and e.attempts == 1
print("ok", payd.__version__)
"""


def run(*args, **kw):
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)
    assert out.returncode == 0, f"{args}: {out.stdout}\n{out.stderr}"
    return out.stdout


def test_pip_install_offline_into_a_venv(tmp_path):
    # a copy, so the build's own files (build/, *.egg-info) stay out of the checkout
    source = tmp_path / "python"
    shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns(
        "tests", "__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    out = run(python, "-m", "pip", "install", "--no-index", "./python", cwd=tmp_path, env=env)
    assert "Successfully installed payd-client-0.1.0" in out, out
    shown = run(python, "-m", "pip", "show", "payd-client", env=env)
    requires = [line for line in shown.splitlines() if line.startswith("Requires:")]
    assert requires == ["Requires:"] or requires == ["Requires: "], shown  # no runtime dependency
    vectors = os.path.join(CONFORMANCE_DIR, "standard-webhooks-vectors.json")
    out = run(python, "-c", USE_INSTALLED, vectors, cwd=tmp_path, env=env)
    assert out.startswith("ok 0.1.0"), out
    run(python, "-m", "pip", "uninstall", "-y", "payd-client", env=env)  # the RECORD is whole
    leftovers = list((venv / "lib").glob("python3*/site-packages/payd*"))
    assert leftovers == [], leftovers
