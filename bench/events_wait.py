#!/usr/bin/env python3
"""How soon a long-poll (GET /v1/events?wait=N, docs/webhooks.md) answers after the write of the
event it waits for, and what 100 parked waiters cost other requests. Starts its own payd (SQLite,
or PostgreSQL with PAYD_TEST_BACKEND=postgres, as the API tests do).

    PAYD_BIN=build/payd /usr/bin/python3 bench/events_wait.py   (the API tests' Python, with pytest)
"""
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests/api"))
os.environ.setdefault("PAYD_BIN", os.path.join(ROOT, "build/payd"))
from conftest import Payd  # noqa: E402
from test_events_wait import Waiting, now_rfc3339  # noqa: E402

s = Payd(tempfile.mkdtemp(), args=["--rate-limit", "100000/s"]).start()
try:
    u = s.create_user("m")
    lat = []
    for _ in range(40):
        time.sleep(0.01)
        w = Waiting(u, f"/v1/events?created_gte={now_rfc3339()}&wait=20")
        time.sleep(0.1)
        u.create_account()
        written = time.monotonic()
        w.join()
        lat.append((w.answered_at - written) * 1000)
    lat.sort()
    backend = os.environ.get("PAYD_TEST_BACKEND", "sqlite")
    print(f"{backend}: write -> answer over 40 waits: median {statistics.median(lat):.1f} ms, "
          f"p95 {lat[37]:.1f} ms, max {lat[-1]:.1f} ms")
    time.sleep(0.01)
    waiters = [Waiting(u, f"/v1/events?created_gte={now_rfc3339()}&wait=20") for _ in range(100)]
    time.sleep(1.5)
    health = []
    for _ in range(20):
        t = time.monotonic()
        s.request("GET", "/healthz")
        health.append((time.monotonic() - t) * 1000)
    u.create_account()
    written = time.monotonic()
    for w in waiters:
        w.join()
    print(f"{backend}: 100 waiting: /healthz median {statistics.median(health):.1f} ms, max "
          f"{max(health):.1f} ms; all 100 answered "
          f"{(max(w.answered_at for w in waiters) - written) * 1000:.0f} ms after the write")
finally:
    s.stop()
