"""payd/models.py is what scripts/gen_models.py makes of docs/openapi.json: regenerate it and
fail when the checked-in file differs (a stale file after the document changed), and check the
classes resolve."""

import os
import subprocess
import sys
import typing

from conftest import PACKAGE_DIR

import payd.models


def test_models_match_the_openapi_document():
    script = os.path.join(PACKAGE_DIR, "scripts", "gen_models.py")
    out = subprocess.run([sys.executable, script, "--check"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + " (run clients/python/scripts/gen_models.py)"


def test_every_model_resolves():
    for name in payd.models.__all__:
        value = getattr(payd.models, name)
        if isinstance(value, type):
            typing.get_type_hints(value)
    hints = typing.get_type_hints(payd.models.Payment)
    assert "account_id" in hints and "processor_charge_id" in hints
