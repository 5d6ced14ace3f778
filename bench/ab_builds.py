#!/usr/bin/env python3
"""Two payd builds in alternating rounds, pinned as `make bench` is (wrk with one thread on
CPU 0, payd on CPU 1), each on a fresh SQLite database with its access log on: fresh-key
payments, GET of one payment, and an account's list page (limit 20), 4 s each. One line per
build per round, each row's requests per second and payd's own CPU time per request (its utime
and stime from /proc over the wrk run, divided by the requests served: a figure a neighbour's
load moves much less than requests per second); compare within a round, over several rounds.

    python3 bench/ab_builds.py OLD_PAYD NEW_PAYD [ROUNDS]

Build an older commit beside the tree with `git worktree add /tmp/old COMMIT` and
`cmake -S /tmp/old -B /tmp/old/build && cmake --build /tmp/old/build --target payd`."""
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from local_payd import (bench_user_and_account, cpu_seconds, free_port,  # noqa: E402
                        wait_ready)

WRK_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk")


def wrk(pid, port, script, env, seconds=4):
    """(requests per second, payd's CPU µs per request) of one pinned wrk run."""
    before = cpu_seconds(pid)
    out = subprocess.run(["taskset", "-c", "0", "wrk", "-t1", "-c64", f"-d{seconds}s", "-s",
                          os.path.join(WRK_SCRIPTS, script), f"http://127.0.0.1:{port}/"],
                         env=dict(os.environ, **env), capture_output=True, text=True,
                         timeout=60).stdout
    used = cpu_seconds(pid) - before
    served = int(re.search(r"(\d+) requests in", out).group(1))
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), used / served * 1e6


def one_run(binary, label):
    work = tempfile.mkdtemp(prefix="payd-ab-")
    db = os.path.join(work, "db.sqlite")
    user, account = bench_user_and_account(binary, db)
    port = free_port()
    payd = subprocess.Popen(["taskset", "-c", "1", binary, "serve", "--listen",
                             f"127.0.0.1:{port}", "--db", db, "--access-log=true"],
                            stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, "ab_builds")
        env = {"BENCH_API_KEY": user["api_key"], "BENCH_ACCOUNT": account["id"],
               "BENCH_NONCE": str(time.time())}
        payments = wrk(payd.pid, port, "post_payments.lua", env)
        list_path = f"/v1/accounts/{account['id']}/payments?limit=20"
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", list_path, headers={"Authorization": "Bearer " + user["api_key"]})
        payment = json.loads(c.getresponse().read())["data"][0]["id"]
        get = wrk(payd.pid, port, "get.lua", dict(env, BENCH_PATH=f"/v1/payments/{payment}"))
        page = wrk(payd.pid, port, "get.lua", dict(env, BENCH_PATH=list_path))
        rows = [("payments", payments), ("GET", get), ("list page", page)]
        print(f"{label}: " + ", ".join(f"{name} {rate:,.0f}/s {cpu:.1f} µs"
                                        for name, (rate, cpu) in rows), flush=True)
    finally:
        payd.terminate()
        payd.wait()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for _ in range(int(sys.argv[3]) if len(sys.argv) > 3 else 2):
        for binary in sys.argv[1:3]:
            one_run(binary, binary)
