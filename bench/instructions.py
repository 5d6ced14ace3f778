#!/usr/bin/env python3
"""Instructions per request of one or more payd builds, counted by callgrind: a figure that a
benchmark running beside it on the same CPUs does not move, unlike requests per second. Each
build serves a fresh SQLite database (access log on) under valgrind; after 60 payments and a
warm-up of 20 requests per row, the counters are zeroed, N requests of the row are sent one
after another on one keep-alive connection, and the instructions of every payd thread over them
are divided by N. Rows: payments (fresh keys), get (GET /v1/payments/{id}), list (an account's
list page, limit 20). Payments come one at a time, so each is its own write batch and carries a
whole commit: compare builds with it, not with the batched figures of `make bench`.

    python3 bench/instructions.py PAYD[,PAYD...] [ROWS] [N]

ROWS is a comma-separated list (default get,list); N defaults to 300. Needs valgrind.
Instructions are not time (a memset counts per byte stored, a cache miss not at all): use it to
see what a change removes, and requests per second (bench/ab_builds.py) to see what it buys."""
import glob
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from local_payd import bench_user_and_account, free_port, wait_ready  # noqa: E402


def dumped_instructions(out, row):
    """The instructions of the dump callgrind_control made for row (one file per dump)."""
    total = 0
    for name in glob.glob(out + ".*"):
        text = open(name, errors="replace").read()
        if re.search(r"^desc: Trigger: dump " + re.escape(row) + "$", text, re.M):
            total += int(re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M).group(1))
            os.remove(name)
    return total


def measure(binary, rows, n):
    work = tempfile.mkdtemp(prefix="payd-instructions-")
    db = os.path.join(work, "db.sqlite")
    user, account = bench_user_and_account(binary, db)
    port = free_port()
    out = os.path.join(work, "callgrind.out")
    payd = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                             binary, "serve", "--listen", f"127.0.0.1:{port}", "--db", db,
                             "--access-log=true"], stderr=open(os.path.join(work, "log"), "w"))
    result = {}
    try:
        wait_ready(port, "instructions", 60)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        auth = {"Authorization": "Bearer " + user["api_key"]}
        body = json.dumps({"account_id": account["id"], "amount": 4200, "currency": "USD",
                           "source": "tok_visa"})
        sent = [0]

        def pay():
            sent[0] += 1
            c.request("POST", "/v1/payments", body,
                      dict(auth, **{"Content-Type": "application/json",
                                    "Idempotency-Key": f"instructions-{sent[0]}"}))
            r = c.getresponse()
            r.read()
            assert r.status == 201, r.status

        def getter(path):
            def get():
                c.request("GET", path, headers=auth)
                r = c.getresponse()
                r.read()
                assert r.status == 200, r.status
            return get

        for _ in range(60):
            pay()
        list_path = f"/v1/accounts/{account['id']}/payments?limit=20"
        c.request("GET", list_path, headers=auth)
        payment = json.loads(c.getresponse().read())["data"][0]["id"]
        send = {"payments": pay, "get": getter(f"/v1/payments/{payment}"),
                "list": getter(list_path)}
        for row in rows:
            for _ in range(20):
                send[row]()
            time.sleep(0.3)
            subprocess.run(["callgrind_control", "-z", str(payd.pid)], capture_output=True,
                           check=True)
            for _ in range(n):
                send[row]()
            time.sleep(0.5)
            subprocess.run(["callgrind_control", "-d", row, str(payd.pid)], capture_output=True,
                           check=True)
            time.sleep(0.5)
            result[row] = dumped_instructions(out, row) / n
    finally:
        payd.terminate()
        payd.wait()
    return result


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = (sys.argv[2] if len(sys.argv) > 2 else "get,list").split(",")
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    for binary in sys.argv[1].split(","):
        figures = measure(binary, rows, n)
        print(binary + ": " + ", ".join(f"{row} {figures[row]:,.0f}" for row in rows),
              flush=True)
