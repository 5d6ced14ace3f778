#!/usr/bin/env python3
"""10,000 idle keep-alive connections held open beside a normal client.

Starts payd on a fresh SQLite database (pinned to CPU 1), makes one payment, then alternates
rounds: wrk (pinned to CPU 0, 1 thread, 16 connections) reads that payment for S seconds with
nothing else open, then again with N idle connections open. payd runs with --idle-timeout and
--header-timeout raised to 600 s: by default an idle keep-alive connection is closed after
--header-timeout (10 s), as the slowloris guard wants. Each idle connection has made one
keep-alive request (GET /healthz) and read its answer, so payd holds it as a served, idle
client, the way a browser or a pooled client leaves one. Prints, per round and as medians of
the rounds: the reader's throughput and p99 with and without the idle connections, payd's RSS
before and after they opened, and the RSS per idle connection (the growth over payd's RSS
before the first round: memory freed by a round's closes is reused by the next, not returned); and checks that every idle
connection is still open at the end of its round (payd must neither drop nor refuse them).

    python3 bench/idle_connections.py                  (10,000 connections, 3 rounds of 10 s)
    python3 bench/idle_connections.py --conns 2000 --rounds 1 --seconds 5

Needs wrk (scripts/install-deps.sh bench) and build/payd. Timings are a benchmark's, never a
test's: the figures go to bench/RESULTS.md with the command.
"""
import argparse
import json
import os
import re
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from local_payd import bench_user_and_account, free_port, raise_fd_limit, wait_ready  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAYD = os.path.join(ROOT, "build", "payd")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def open_idle(port, n, rnd):
    """n connections, each after one answered keep-alive request, from 127.0.0.x source
    addresses of the round's own (a bind to port 0 searches past ports that an earlier round's
    sockets still hold)."""
    request = b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: keep-alive\r\n\r\n"
    socks, sel = [], selectors.DefaultSelector()
    for i in range(n):
        s = socket.socket()
        s.bind((f"127.0.{10 + rnd}.{2 + i // 20000}", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(request)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, bytearray())
        socks.append(s)
    waiting, deadline = n, time.time() + 60
    while waiting and time.time() < deadline:
        for key, _ in sel.select(timeout=1):
            data = key.fileobj.recv(4096)
            key.data.extend(data)
            if not data or b"\r\n\r\n" in key.data:
                if not data or not key.data.startswith(b"HTTP/1.1 200"):
                    sys.exit(f"idle connection refused: {bytes(key.data[:80])!r}")
                sel.unregister(key.fileobj)
                waiting -= 1
    if waiting:
        sys.exit(f"{waiting} idle connections got no answer")
    return socks


def still_open(socks):
    alive = 0
    for s in socks:
        try:
            if s.recv(1) != b"":  # closed reads b""; an unasked answer would be a fault
                alive += 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive


def wrk(port, path, seconds, key):
    env = dict(os.environ, BENCH_API_KEY=key, BENCH_PATH=path)
    out = subprocess.run(
        ["taskset", "-c", "0", "wrk", "-t1", "-c16", f"-d{seconds}s", "--latency",
         "-s", os.path.join(ROOT, "bench", "wrk", "get.lua"), f"http://127.0.0.1:{port}"],
        env=env, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p99 = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    return rps, float(p99.group(1)) * scale


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    args = ap.parse_args()
    raise_fd_limit(args.conns + 1024, "idle_connections")
    work = tempfile.mkdtemp(prefix="payd-idle-")
    db = os.path.join(work, "payd.db")
    user, account = bench_user_and_account(PAYD, db, "idle-bench")
    port = free_port()
    payd = subprocess.Popen(
        ["taskset", "-c", "1", PAYD, "serve", "--listen", f"127.0.0.1:{port}", "--db", db,
         "--access-log", "false", "--max-connections", str(args.conns + 256),
         "--max-connections-per-client", str(args.conns + 256), "--idle-timeout", "600s", "--header-timeout", "600s"],
        stdout=open(os.path.join(work, "payd.log"), "w"), stderr=subprocess.STDOUT)
    try:
        wait_ready(port, "idle_connections")
        import http.client
        c = http.client.HTTPConnection("127.0.0.1", port)
        c.request("POST", "/v1/payments",
                  json.dumps({"account_id": account["id"], "amount": 1000, "currency": "USD",
                              "source": "tok_visa"}),
                  {"Authorization": "Bearer " + user["api_key"], "Idempotency-Key": "idle-1",
                   "Content-Type": "application/json"})
        r = c.getresponse()
        payment = json.loads(r.read())
        if r.status != 201:
            sys.exit(f"payment: {r.status} {payment}")
        path = "/v1/payments/" + payment["id"]
        wrk(port, path, 2, user["api_key"])  # warm up
        rows = []
        baseline = rss_kb(payd.pid)
        for rnd in range(args.rounds):
            quiet_rps, quiet_p99 = wrk(port, path, args.seconds, user["api_key"])
            before = rss_kb(payd.pid)
            t0 = time.time()
            socks = open_idle(port, args.conns, rnd)
            opened_s = time.time() - t0
            after = rss_kb(payd.pid)
            busy_rps, busy_p99 = wrk(port, path, args.seconds, user["api_key"])
            alive = still_open(socks)
            for s in socks:  # a reset, not a close: no TIME_WAIT left behind for the next round
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            row = dict(quiet_rps=quiet_rps, quiet_p99=quiet_p99, idle_rps=busy_rps,
                       idle_p99=busy_p99, rss_before_mb=before / 1024, rss_after_mb=after / 1024,
                       kb_per_conn=(after - baseline) / args.conns, open_s=opened_s, alive=alive)
            rows.append(row)
            print(f"round {rnd + 1}: without {quiet_rps:,.0f}/s p99 {quiet_p99:.2f} ms | with "
                  f"{args.conns:,} idle {busy_rps:,.0f}/s p99 {busy_p99:.2f} ms | RSS "
                  f"{before / 1024:.1f} -> {after / 1024:.1f} MB "
                  f"({(after - baseline) / args.conns:.1f} KB/conn over the {baseline / 1024:.1f} MB at start) | opened in {opened_s:.1f} s, "
                  f"{alive:,} still open", flush=True)
            if alive != args.conns:
                sys.exit(f"payd closed {args.conns - alive} idle connections")
            time.sleep(2)  # payd notices the closes before the next quiet round
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"median of {args.rounds}: without {med['quiet_rps']:,.0f}/s p99 "
              f"{med['quiet_p99']:.2f} ms; with {args.conns:,} idle {med['idle_rps']:,.0f}/s "
              f"p99 {med['idle_p99']:.2f} ms (p99 x{med['idle_p99'] / med['quiet_p99']:.2f}, "
              f"throughput x{med['idle_rps'] / med['quiet_rps']:.2f}); "
              f"{med['kb_per_conn']:.1f} KB of RSS per idle connection")
    finally:
        payd.terminate()
        payd.wait()


if __name__ == "__main__":
    main()
