#!/usr/bin/env python3
"""One hostile client against one normal client, at payd's default flags (standard library only).

Starts payd on a fresh SQLite file with only --listen and --db given. From 127.0.0.2, HOSTILE
connections each send complete headers for a POST with a 1,000-byte body and one body byte, then
one byte every TRICKLE seconds; each one is re-opened the moment it is cut (answered 429, 408,
or closed), for SECONDS. Meanwhile, from 127.0.0.1 and in a process of its own (so the load
generator's loop never delays it), one normal client opens a new connection for each request, in
turn GET /healthz, GET /v1/users/me and POST /v1/accounts (an API key made with `payd user
create`), every 10 ms. Prints JSON: the normal client's latency percentiles and errors (any
answer but 200/201, or a failed connection), and what the hostile client got.

usage: bench/one_client.py [--payd build/payd] [--hostile 4096] [--seconds 45] [--trickle 5] [--pin]
"""
import argparse
import http.client
import json
import multiprocessing
import os
import resource
import selectors
import socket
import statistics
import subprocess
import tempfile
import time

from local_payd import cpu_seconds, free_port, raise_fd_limit, wait_ready

HOSTILE_ADDRESS = "127.0.0.2"
NORMAL_ADDRESS = "127.0.0.1"
IP_BIND_ADDRESS_NO_PORT = 24  # Linux: the port is picked at connect, from the whole 4-tuple
HEAD = (b"POST /v1/accounts HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{")


def normal_client(port, key, seconds, out):
    """A new connection per request, as a health probe or a fresh client would."""
    requests = [("GET", "/healthz", None), ("GET", "/v1/users/me", None),
                ("POST", "/v1/accounts", b'{"currency":"USD"}')]
    latencies, connects, errors, statuses = [], [], 0, {}
    per_path = {}
    began = time.monotonic()
    slow_at = []  # seconds into the run of each request over 50 ms
    stop = time.monotonic() + seconds
    i = 0
    while time.monotonic() < stop:
        method, path, body = requests[i % len(requests)]
        i += 1
        started = time.perf_counter()
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10,
                                           source_address=(NORMAL_ADDRESS, 0))
            c.connect()
            connects.append((time.perf_counter() - started) * 1000)
            headers = {"Authorization": f"Bearer {key}"}
            if body:
                headers["Content-Type"] = "application/json"
            c.request(method, path, body=body, headers=headers)
            r = c.getresponse()
            r.read()
            c.close()
            statuses[r.status] = statuses.get(r.status, 0) + 1
            errors += r.status not in (200, 201)
        except OSError:
            statuses["failed"] = statuses.get("failed", 0) + 1
            errors += 1
        latencies.append((time.perf_counter() - started) * 1000)
        per_path.setdefault(f"{method} {path}", []).append(latencies[-1])
        if latencies[-1] > 50:
            slow_at.append(round(time.monotonic() - began, 1))
        time.sleep(0.01)
    out.put({"latencies": latencies, "connects": sorted(connects), "errors": errors,
             "slow_at": slow_at,
             "p99_by_request": {k: round(percentile(sorted(v), 0.99), 2)
                                for k, v in per_path.items()},
             "statuses": statuses})


class Hostile:
    """HOSTILE slow-body connections from one address, each re-opened as soon as it is cut."""

    def __init__(self, port, count):
        self.port, self.count = port, count
        self.sel = selectors.DefaultSelector()
        self.open = {}  # socket -> "connecting" | "sent"
        self.answers = {}  # first status line word -> count
        self.opened = self.cut = self.connect_failed = 0

    def reopen(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((HOSTILE_ADDRESS, 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.open[s] = "connecting"
        self.sel.register(s, selectors.EVENT_WRITE)
        self.opened += 1

    def drop(self, s, answer=b""):
        if answer.startswith(b"HTTP/1.1 "):
            status = answer[9:12].decode()
            self.answers[status] = self.answers.get(status, 0) + 1
        self.sel.unregister(s)
        del self.open[s]
        s.close()
        self.cut += 1
        self.reopen()

    def serve(self, key):
        s = key.fileobj
        if self.open[s] == "connecting":
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.connect_failed += 1
                return self.drop(s)
            try:
                s.send(HEAD)
            except OSError:
                return self.drop(s)
            self.open[s] = "sent"
            self.sel.modify(s, selectors.EVENT_READ)
            return
        try:
            answer = s.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            answer = b""
        self.drop(s, answer)  # an answer is always a refusal with Connection: close

    def trickle(self):
        for s, state in list(self.open.items()):
            if state == "sent":
                try:
                    s.send(b" ")  # a byte now and then: never idle, never complete
                except OSError:
                    pass

    def run(self, seconds, trickle_every):
        for _ in range(self.count):
            self.reopen()
        stop = time.monotonic() + seconds
        next_trickle = time.monotonic() + trickle_every
        while time.monotonic() < stop:
            for key, _ in self.sel.select(timeout=0.05):
                if key.fileobj in self.open:
                    self.serve(key)
            if time.monotonic() >= next_trickle:
                self.trickle()
                next_trickle += trickle_every
        for s in list(self.open):
            s.close()


def percentile(sorted_values, q):
    return sorted_values[max(0, int(len(sorted_values) * q) - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--payd", default="build/payd")
    ap.add_argument("--hostile", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--trickle", type=float, default=5)
    ap.add_argument("--generator-nice", type=int, default=0,
                    help="lower the hostile loop's CPU priority by this much (it shares the "
                         "machine's cores with payd, which a remote attacker would not)")
    ap.add_argument("--pin", action="store_true",
                    help="the bench's pinned method: payd on CPU 1, the hostile loop and the "
                         "normal client on CPU 0 (so the load generator never takes payd's CPU)")
    ap.add_argument("payd_args", nargs="*", help="more `payd serve` flags, after --")
    args = ap.parse_args()
    raise_fd_limit(args.hostile * 2 + 1024, "one_client")  # payd inherits it

    tmp = tempfile.mkdtemp(prefix="payd-one-client-")
    db = os.path.join(tmp, "payd.db")
    port = free_port()
    log = open(os.path.join(tmp, "payd.log"), "wb")
    payd = subprocess.Popen([args.payd, "serve", "--listen", f"127.0.0.1:{port}", "--db", db]
                            + args.payd_args,
                            stdout=log, stderr=log)
    if args.pin:
        os.sched_setaffinity(payd.pid, {1})
        os.sched_setaffinity(0, {0})  # this process; the normal client inherits it at its fork
    try:
        wait_ready(port, "one_client")
        made = subprocess.run([args.payd, "user", "create", "bench", "--db", db],
                              capture_output=True, text=True, check=True)
        key = json.loads(made.stdout)["api_key"]
        out = multiprocessing.Queue()
        normal = multiprocessing.Process(target=normal_client,
                                         args=(port, key, args.seconds, out))
        hostile = Hostile(port, args.hostile)
        started = time.monotonic()
        payd_cpu_before = cpu_seconds(payd.pid)
        own = resource.getrusage(resource.RUSAGE_SELF)
        normal.start()
        os.nice(args.generator_nice)  # after the fork: payd and the normal client keep theirs
        hostile.run(args.seconds, args.trickle)
        payd_cpu = cpu_seconds(payd.pid) - payd_cpu_before
        after = resource.getrusage(resource.RUSAGE_SELF)
        generator_cpu = (after.ru_utime + after.ru_stime) - (own.ru_utime + own.ru_stime)
        got = out.get(timeout=60)
        normal.join()
        lat = sorted(got["latencies"])
        print(json.dumps({
            "hostile_connections": args.hostile,
            "seconds": round(time.monotonic() - started, 1),
            "hostile_opened": hostile.opened,
            "hostile_answers": dict(sorted(hostile.answers.items())),
            "hostile_cut_without_answer": hostile.cut - sum(hostile.answers.values()),
            "hostile_connect_failed": hostile.connect_failed,
            "payd_cpu_s": round(payd_cpu, 1),
            "generator_cpu_s": round(generator_cpu, 1),
            "load_average_1m": os.getloadavg()[0],
            "normal_requests": len(lat),
            "normal_statuses": {str(k): v for k, v in sorted(got["statuses"].items(),
                                                             key=lambda kv: str(kv[0]))},
            "normal_error_rate": round(got["errors"] / len(lat), 4) if lat else None,
            "normal_p50_ms": round(statistics.median(lat), 2) if lat else None,
            "normal_p99_ms": round(percentile(lat, 0.99), 2) if lat else None,
            "normal_max_ms": round(lat[-1], 2) if lat else None,
            "normal_connect_p99_ms": round(percentile(got["connects"], 0.99), 2)
            if got["connects"] else None,
            "normal_over_50ms": sum(1 for v in lat if v > 50),
            "normal_p99_by_request_ms": got["p99_by_request"],
            "normal_over_50ms_at_s": got["slow_at"],
        }))
    finally:
        payd.terminate()
        payd.wait(30)
        log.close()


if __name__ == "__main__":
    main()
