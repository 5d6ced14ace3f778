"""The README's promise for `make run`: on a new database the demo bootstrap prints an API key
and curl commands that work as printed."""

import os
import re
import signal
import subprocess
import time

from conftest import PAYD, free_port

SCRIPT = os.path.join(os.path.dirname(__file__), "../../scripts/run-demo.sh")


def test_demo_bootstrap_prints_working_commands(tmp_path):
    port = free_port()
    env = dict(os.environ, PAYD_DB=str(tmp_path / "demo.db"), PAYD_LISTEN=f"127.0.0.1:{port}")
    proc = subprocess.Popen(["bash", SCRIPT, PAYD], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        lines = []
        deadline = time.time() + 20
        while time.time() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if line.startswith("Serving on"):
                break
        text = "".join(lines)
        key = re.search(r"export PAYD_API_KEY=(\S+)", text).group(1)
        # the multi-line curl command as printed, continuation lines included
        pay = re.search(r"(curl -i -X POST .*?)\n\n", text, re.S).group(1)
        listing = re.search(r"(curl -s http\S+ .*)", text).group(1)
        shell_env = dict(os.environ, PAYD_API_KEY=key)
        for _ in range(50):  # the server prints "Serving" just before it listens
            if subprocess.run(["curl", "-s", f"http://127.0.0.1:{port}/healthz"],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        first = subprocess.run(pay, shell=True, capture_output=True, text=True, env=shell_env)
        second = subprocess.run(pay, shell=True, capture_output=True, text=True, env=shell_env)
        assert "HTTP/1.1 201" in first.stdout, first.stdout
        assert "Idempotent-Replayed: true" in second.stdout, second.stdout
        listed = subprocess.run(listing, shell=True, capture_output=True, text=True, env=shell_env)
        assert '"object":"list"' in listed.stdout and '"amount":4200' in listed.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
