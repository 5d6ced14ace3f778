#!/usr/bin/env python3
"""Slow bodies against one normal client (standard library only).

Starts payd on a fresh SQLite file, opens SLOW connections that each send complete headers for a
POST with a 1,000-byte body, then one body byte every TRICKLE seconds, and meanwhile runs one
normal client doing keep-alive GET /healthz. Prints JSON: the normal client's latency
percentiles, how many slow connections were answered 408 and closed, and the latest cut relative
to the body deadline.

usage: bench/slow_body.py [--payd build/payd] [--slow 4096] [--body-timeout 5] [--trickle 1]
"""
import argparse
import http.client
import json
import os
import selectors
import socket
import statistics
import subprocess
import tempfile
import threading
import time

from local_payd import free_port, raise_fd_limit, wait_ready


def normal_client(port, stop, latencies, statuses):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.is_set():
        started = time.perf_counter()
        try:
            conn.request("GET", "/healthz")
            r = conn.getresponse()
            r.read()
            statuses.append(r.status)
        except OSError:
            statuses.append(0)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        latencies.append((time.perf_counter() - started) * 1000)
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--payd", default="build/payd")
    ap.add_argument("--slow", type=int, default=4096)
    ap.add_argument("--body-timeout", type=float, default=5)
    ap.add_argument("--trickle", type=float, default=1)
    args = ap.parse_args()
    raise_fd_limit(args.slow * 2 + 512, "slow_body")
    tmp = tempfile.mkdtemp(prefix="payd-slow-body-")
    port = free_port()
    log = open(os.path.join(tmp, "payd.log"), "wb")
    payd = subprocess.Popen(
        [args.payd, "serve", "--listen", f"127.0.0.1:{port}", "--db",
         os.path.join(tmp, "payd.db"), "--max-connections", str(args.slow + 1024),
         # every connection comes from 127.0.0.1: this measures deadlines, not the per-client cap
         "--max-connections-per-client", str(args.slow + 1024),
         "--body-timeout", f"{int(args.body_timeout * 1000)}ms", "--access-log", "false"],
        stdout=log, stderr=log)
    try:
        wait_ready(port, "slow_body")
        sel = selectors.DefaultSelector()
        head = (b"POST /v1/accounts HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000\r\n\r\n{")
        slow = {}
        opened = time.monotonic()
        for _ in range(args.slow):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(head)
            s.setblocking(False)
            slow[s] = {"sent": time.monotonic(), "answer": b"", "closed": None}
            sel.register(s, selectors.EVENT_READ)
        all_sent = time.monotonic()

        stop = threading.Event()
        latencies, statuses = [], []
        t = threading.Thread(target=normal_client, args=(port, stop, latencies, statuses))
        t.start()
        next_trickle = time.monotonic() + args.trickle
        give_up = all_sent + args.body_timeout + 10
        while any(v["closed"] is None for v in slow.values()) and time.monotonic() < give_up:
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    chunk = s.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    chunk = b""
                slow[s]["answer"] += chunk
                if not chunk:
                    slow[s]["closed"] = time.monotonic()
                    sel.unregister(s)
            if time.monotonic() >= next_trickle:
                for s, v in slow.items():
                    if v["closed"] is None:
                        try:
                            s.send(b" ")  # a byte now and then: never idle, never complete
                        except OSError:
                            pass
                next_trickle += args.trickle
        stop.set()
        t.join()

        cut = [v["closed"] - v["sent"] for v in slow.values() if v["closed"] is not None]
        answered_408 = sum(1 for v in slow.values() if v["answer"].startswith(b"HTTP/1.1 408"))
        lat = sorted(latencies)
        result = {
            "slow_connections": args.slow,
            "open_seconds": round(all_sent - opened, 2),
            "body_timeout_s": args.body_timeout,
            "slow_cut": len(cut),
            "slow_answered_408": answered_408,
            "slowest_cut_s": round(max(cut), 2) if cut else None,
            "all_cut_within_deadline_plus_1s": len(cut) == args.slow
            and max(cut) <= args.body_timeout + 1,
            "normal_requests": len(lat),
            "normal_non_200": sum(1 for s in statuses if s != 200),
            "normal_p50_ms": round(statistics.median(lat), 2) if lat else None,
            "normal_p99_ms": round(lat[int(len(lat) * 0.99) - 1], 2) if lat else None,
            "normal_max_ms": round(lat[-1], 2) if lat else None,
        }
        print(json.dumps(result))
        for s in slow:
            s.close()
    finally:
        payd.terminate()
        payd.wait(30)
        log.close()


if __name__ == "__main__":
    main()
