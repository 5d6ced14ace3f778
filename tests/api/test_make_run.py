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


ROOT = os.path.join(os.path.dirname(__file__), "../..")


def test_make_run_shows_the_key_first(tmp_path):
    """`make run` on a fresh build directory: the compile happens, but the first thing on the
    screen (stdout and stderr alike) is the demo's message with its key, not build chatter."""
    port = free_port()
    env = dict(os.environ, PAYD_DB=str(tmp_path / "demo.db"), PAYD_LISTEN=f"127.0.0.1:{port}")
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    proc = subprocess.Popen(["make", "-C", ROOT, "--no-print-directory", "run",
                             f"BUILD={tmp_path / 'build'}", "JOBS=2",
                             "CMAKE_FLAGS=-DCMAKE_BUILD_TYPE=Debug"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        lines = []
        deadline = time.time() + 240
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("Serving on"):
                break
        shown = [line for line in lines if line.strip()]
        assert shown and shown[0].startswith("payd demo user created"), "".join(lines[:20])
        assert any(line.strip().startswith("export PAYD_API_KEY=sk_") for line in shown[:3])
        assert (tmp_path / "build" / "payd").exists()  # it did build
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
