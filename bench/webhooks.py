#!/usr/bin/env python3
"""Events and webhooks benchmarks (docs/webhooks.md), one run, printed as Markdown:

1. The cost of the outbox on a fresh-key payment: wrk POST /v1/payments against payd with
   `--events false`, with events on (no endpoint), and with events on plus one endpoint (each
   payment also queues a delivery, which the worker sends to nginx during the run). Rounds
   alternate between the variants so drift on the shared machine hits all of them alike; each
   variant keeps its best round. payd's CPU per payment is read from /proc around each round.
2. Deliveries per second from one node: N events are written with the endpoint disabled, their
   deliveries are queued in one SQL statement while payd is stopped, and payd is started again:
   the time until the last is delivered to an nginx that answers 204 at once.

    python3 bench/webhooks.py [--payd build/payd] [--seconds 5] [--rounds 3] [--deliveries 20000]
                              [--skip-payments] [--skip-deliveries]

Needs wrk and nginx. SQLite databases and the nginx config live in a temp dir."""

import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def call(port, method, path, key, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {key}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


class Payd:
    def __init__(self, binary, work, name, flags):
        self.binary, self.db = binary, os.path.join(work, name + ".db")
        self.flags, self.log = flags, os.path.join(work, name + ".log")
        self.proc = None

    def start(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db,
             "--access-log=false", *self.flags], stderr=open(self.log, "ab"))
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("payd did not start")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)

    def cli(self, *args):
        return json.loads(subprocess.run([self.binary, *args, "--db", self.db], check=True,
                                         capture_output=True, text=True).stdout)


def start_nginx(work):
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off; worker_processes 1; pid {work}/nginx.pid; error_log {work}/nginx.err;
events {{ worker_connections 4096; }}
http {{ access_log off; client_body_temp_path {work}/body; proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fcgi; uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  keepalive_requests 1000000;
  server {{ listen 127.0.0.1:{port}; location / {{ return 204; }} }} }}
""")
    proc = subprocess.Popen(["nginx", "-c", conf, "-p", work])
    time.sleep(0.3)
    return proc, port


def wrk_payments(payd, account, key, seconds):
    env = dict(os.environ, BENCH_API_KEY=key, BENCH_ACCOUNT=account,
               BENCH_NONCE=os.urandom(4).hex())
    before = cpu_seconds(payd.proc.pid)
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{seconds}s", "-s",
                          os.path.join(ROOT, "bench/wrk/post_payments.lua"),
                          f"http://127.0.0.1:{payd.port}/"], env=env, capture_output=True,
                         text=True, check=True).stdout
    cpu = cpu_seconds(payd.proc.pid) - before
    requests = int(next(l for l in out.splitlines() if "requests in" in l).split()[0])
    non2xx = [l for l in out.splitlines() if "Non-2xx" in l]
    return {"rps": requests / seconds, "cpu_us": cpu / requests * 1e6,
            "errors": non2xx[0].strip() if non2xx else ""}


def bench_payments(args, work, nginx_port):
    variants = {
        "events off (--events false)": (["--events", "false"], False),
        "events on, no endpoint": ([], False),
        "events on, one endpoint (delivered during the run)": ([], True),
    }
    servers = {}
    for name, (flags, endpoint) in variants.items():
        p = Payd(args.payd, work, f"pay{len(servers)}",
                 ["--rate-limit", "100000000/s", *flags]).start()
        user = p.cli("user", "create", "bench", "--rate-limit", "100000000/s")
        account = p.cli("account", "create", "--user", user["user_id"], "--currency", "USD")
        if endpoint:
            call(p.port, "POST", "/v1/webhook_endpoints", user["api_key"],
                 {"url": f"http://127.0.0.1:{nginx_port}/hook", "events": ["*"]})
        servers[name] = (p, account["id"], user["api_key"])
    results = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (p, account, key) in servers.items():
            results[name].append(wrk_payments(p, account, key, args.seconds))
    delivered = None
    p, _, _ = servers["events on, one endpoint (delivered during the run)"]
    time.sleep(2)
    with sqlite3.connect(p.db) as c:
        delivered = c.execute("SELECT status, COUNT(*) FROM webhook_deliveries "
                              "GROUP BY status").fetchall()
    for p, _, _ in servers.values():
        p.stop()
    return results, delivered


def bench_deliveries(args, work, nginx_port):
    p = Payd(args.payd, work, "deliveries",
             ["--rate-limit", "100000000/s", *args.delivery_flags.split()]).start()
    user = p.cli("user", "create", "bench", "--rate-limit", "100000000/s")
    ep = call(p.port, "POST", "/v1/webhook_endpoints", user["api_key"],
              {"url": f"http://127.0.0.1:{nginx_port}/hook", "events": ["*"]})
    call(p.port, "PATCH", f"/v1/webhook_endpoints/{ep['id']}", user["api_key"], {"disabled": True})
    # N events through the API (accounts are the cheapest change), none queued yet
    env = dict(os.environ, BENCH_API_KEY=user["api_key"])
    made = 0
    while made < args.deliveries:
        out = subprocess.run(["wrk", "-t2", "-c32", "-d2s", "-s",
                              os.path.join(ROOT, "bench/wrk/post_accounts.lua"),
                              f"http://127.0.0.1:{p.port}/"], env=env, capture_output=True,
                             text=True, check=True).stdout
        made += int(next(l for l in out.splitlines() if "requests in" in l).split()[0])
    p.stop()
    with sqlite3.connect(p.db) as c:
        c.execute("UPDATE webhook_endpoints SET disabled = 0")
        c.execute("INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, "
                  "next_attempt_at, lease_until, lease_id, created_at) "
                  "SELECT (SELECT id FROM webhook_endpoints), id, 'pending', 0, 0, 0, 0, "
                  "created_at FROM events")
        queued = c.execute("SELECT COUNT(*) FROM webhook_deliveries").fetchone()[0]
    started = time.time()
    p.start()
    cpu0 = cpu_seconds(p.proc.pid)
    with sqlite3.connect(p.db) as c:
        while c.execute("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'"
                        ).fetchone()[0] < queued:
            time.sleep(0.02)
    elapsed = time.time() - started
    cpu = cpu_seconds(p.proc.pid) - cpu0
    p.stop()
    return queued, elapsed, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--payd", default=os.path.join(ROOT, "build/payd"))
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--deliveries", type=int, default=20000)
    ap.add_argument("--delivery-flags", default="", help="extra payd flags for part 2")
    ap.add_argument("--skip-payments", action="store_true")
    ap.add_argument("--skip-deliveries", action="store_true")
    args = ap.parse_args()
    for tool in ("wrk", "nginx"):
        if not shutil.which(tool):
            raise SystemExit(f"bench: {tool} is not installed")
    work = tempfile.mkdtemp(prefix="payd-webhooks-bench.")
    nginx, nginx_port = start_nginx(work)
    try:
        results, delivered = ({}, None) if args.skip_payments else bench_payments(
            args, work, nginx_port)
        queued, elapsed, cpu = (None, None, None) if args.skip_deliveries else bench_deliveries(
            args, work, nginx_port)
    finally:
        nginx.send_signal(signal.SIGQUIT)
        nginx.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}\n")
    # the median of each round's ratio to the first variant's run just before it: paired rounds
    # see the same load, so this reads through drift better than the best rounds alone
    print("| fresh-key payments | best req/s | payd CPU µs/payment (that round) "
          "| median per-round req/s ratio | every round req/s |")
    print("|---|---|---|---|---|")
    base, base_rounds = None, None
    for name, rounds in results.items():
        best = max(rounds, key=lambda r: r["rps"])
        base, base_rounds = base or best, base_rounds or rounds
        ratios = sorted(r["rps"] / b["rps"] - 1 for r, b in zip(rounds, base_rounds))
        median = (ratios[len(ratios) // 2] + ratios[(len(ratios) - 1) // 2]) / 2
        print(f"| {name} | {best['rps']:.0f} ({best['rps'] / base['rps'] - 1:+.1%}) | "
              f"{best['cpu_us']:.0f} ({best['cpu_us'] / base['cpu_us'] - 1:+.1%}) | "
              f"{median:+.1%} | " + ", ".join(f"{r['rps']:.0f}" for r in rounds)
              + (f" {best['errors']}" if best["errors"] else "") + " |")
    print(f"\ndeliveries of the endpoint run, 2 s after it: {delivered}\n")
    if queued is not None:
        print(f"deliveries from one node: {queued} in {elapsed:.2f} s = {queued / elapsed:.0f}/s "
              f"(start-up included), payd CPU {cpu / queued * 1e6:.0f} µs per delivery")


if __name__ == "__main__":
    main()
