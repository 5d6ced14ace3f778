"""Shared helpers for the Python client's tests: the package is imported from this checkout
(test_install.py checks the installed one), and a small scripted HTTP server plays answers."""

import http.server
import json
import os
import sys
import threading

import pytest

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(PACKAGE_DIR))
CONFORMANCE_DIR = os.path.join(ROOT, "clients", "conformance")
sys.path.insert(0, PACKAGE_DIR)


class Scripted:
    """A loopback HTTP server that answers each request with the next scripted answer:
    (status, headers, body) or "drop" (close without answering). Records every request."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []  # dict(method, path, headers, body)
        scripted = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def handle_one(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                scripted.requests.append(dict(method=self.command, path=self.path,
                                              headers=headers, body=body))
                answer = (scripted.answers.pop(0) if scripted.answers
                          else (500, {}, {"code": "script_ended"}))
                if answer == "drop":
                    self.close_connection = True
                    return
                status, headers, payload = answer
                raw = json.dumps(payload).encode() if payload is not None else b""
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/problem+json" if status >= 400
                                 else "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = handle_one

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    servers = []

    def make(*answers):
        s = Scripted(answers)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


class FakeTime:
    """A clock that only sleep() moves, so the whole policy runs without waiting."""

    def __init__(self, wall=1_800_000_000.0):
        self.now = 1000.0
        self.wall = wall
        self.sleeps = []

    def clock(self):
        return self.now

    def wall_clock(self):
        return self.wall + (self.now - 1000.0)

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time():
    return FakeTime()
