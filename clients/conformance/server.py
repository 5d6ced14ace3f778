#!/usr/bin/env python3
"""The scripted server every payd client replays the conformance scenarios against (README.md).

Standard library only. One scenario at a time: POST /_conformance/load/{name} loads it, each
other request is checked against the next scripted exchange and answered with its response, and
GET /_conformance/report tells whether the client did exactly what the scenario expects.
"""
import argparse
import email.utils
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scenarios")
CONTROL = "/_conformance/"


class Script:
    """The loaded scenario and what the client has sent so far (shared by all connections)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.scenario = None
        self.requests = []
        self.failures = []

    def load(self, scenario):
        with self.lock:
            self.scenario = scenario
            self.requests = []
            self.failures = []

    def next_exchange(self, request):
        """Records the request, checks it, and returns the response it gets (or None when the
        script has run out)."""
        with self.lock:
            if self.scenario is None:
                self.failures.append("a request came before any scenario was loaded")
                return None
            index = len(self.requests)
            previous = self.requests[-1] if self.requests else None
            self.requests.append(request)
            exchanges = self.scenario["exchanges"]
            if index >= len(exchanges):
                self.failures.append(
                    f"request {index + 1} ({request['method']} {request['path']}) is beyond the "
                    f"{len(exchanges)} the scenario scripts"
                )
                return None
            self.failures.extend(
                f"request {index + 1}: {text}"
                for text in check_request(self.scenario, exchanges[index]["request"], request, previous)
            )
            self.failures.extend(check_key(self.scenario, self.requests))
            return exchanges[index]["response"]

    def report(self):
        with self.lock:
            failures = list(self.failures)
            if self.scenario is not None and len(self.requests) < len(self.scenario["exchanges"]):
                failures.append(
                    f"{len(self.requests)} requests came, the scenario scripts "
                    f"{len(self.scenario['exchanges'])}"
                )
            return {
                "scenario": self.scenario and self.scenario["name"],
                "ok": self.scenario is not None and not failures,
                "failures": failures,
                "requests": self.requests,
            }


def check_request(scenario, want, got, previous):
    problems = []
    for name in ("method", "path"):
        if name in want and want[name] != got[name]:
            problems.append(f"{name} is {got[name]!r}, the scenario expects {want[name]!r}")
    for name, value in (want.get("query") or {}).items():
        if value is None and name in got["query"]:
            problems.append(f"query {name!r} is present, the scenario expects it absent")
        elif value is not None and got["query"].get(name) != str(value):
            problems.append(f"query {name!r} is {got['query'].get(name)!r}, the scenario expects {value!r}")
    if got["authorization"] != "Bearer " + scenario.get("api_key", "sk_conformance"):
        problems.append(f"Authorization is {got['authorization']!r}")
    if previous is not None:
        gap = got["at_ms"] - previous["at_ms"]
        if "min_gap_ms" in want and gap < want["min_gap_ms"]:
            problems.append(f"came {gap} ms after the previous one, sooner than {want['min_gap_ms']} ms")
        if "max_gap_ms" in want and gap > want["max_gap_ms"]:
            problems.append(f"came {gap} ms after the previous one, later than {want['max_gap_ms']} ms")
    return problems


def check_key(scenario, requests):
    """Every POST carries one Idempotency-Key: the caller's when the call gives one. Checked as
    each request arrives, so a failure names the first request that broke the rule."""
    posts = [r for r in requests if r["method"] == "POST"]
    if not posts or requests[-1]["method"] != "POST":
        return []
    latest = posts[-1]["idempotency_key"]
    given = scenario["call"].get("idempotency_key")
    if latest is None:
        return [f"POST {len(posts)} carries no Idempotency-Key"]
    if given is not None and latest != given:
        return [f"POST {len(posts)} carries Idempotency-Key {latest!r}, not the caller's {given!r}"]
    if latest != posts[0]["idempotency_key"]:
        return [f"POST {len(posts)} carries Idempotency-Key {latest!r}, the first carried "
                f"{posts[0]['idempotency_key']!r}"]
    return []


def header_value(value):
    """`@http-date+N`: the HTTP-date N seconds from now, as a server's Retry-After may be."""
    if isinstance(value, str) and value.startswith("@http-date+"):
        return email.utils.formatdate(time.time() + int(value[len("@http-date+"):]), usegmt=True)
    return str(value)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    script = None  # set by main()

    def log_message(self, format, *args):  # the suite's output is the report, not an access log
        pass

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def do_PATCH(self):
        self.handle_any()

    def do_DELETE(self):
        self.handle_any()

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        if url.path.startswith(CONTROL):
            return self.control(url.path[len(CONTROL):])
        request = {
            "method": self.command,
            "path": url.path,
            "query": dict(parse_qsl(url.query, keep_blank_values=True)),
            "idempotency_key": self.headers.get("Idempotency-Key"),
            "authorization": self.headers.get("Authorization"),
            "at_ms": int(time.monotonic() * 1000),
            "body": body.decode("utf-8", "replace"),
        }
        response = self.script.next_exchange(request)
        if response is None:
            return self.send_json(500, {"code": "conformance_unexpected_request"})
        if response.get("drop"):
            # the lost answer: the request was read whole, and not a byte comes back
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        headers = {name: header_value(value) for name, value in (response.get("headers") or {}).items()}
        self.send_json(response["status"], response.get("body"), headers)

    def control(self, command):
        if self.command == "POST" and command.startswith("load/"):
            name = command[len("load/"):]
            path = os.path.join(SCENARIOS, name + ".json")
            if "/" in name or not os.path.exists(path):
                return self.send_json(404, {"code": "no_such_scenario", "name": name})
            with open(path) as f:
                scenario = json.load(f)
            self.script.load(scenario)
            return self.send_json(200, scenario)
        if self.command == "GET" and command == "report":
            return self.send_json(200, self.script.report())
        return self.send_json(404, {"code": "no_such_control"})

    def send_json(self, status, body, headers=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        kind = "application/problem+json" if status >= 400 else "application/json"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    args = parser.parse_args()
    Handler.script = Script()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
