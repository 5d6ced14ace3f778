"""A local webhook receiver for the tests: records every request (headers, raw body, when),
can refuse a share of attempts with 500 or drop the connection without answering, and notices
two attempts of the same event in flight at once."""

import hashlib
import hmac
import http.server
import json
import random
import threading
import time


def sign(secret, t, body):
    """The Payd-Signature payd sends (§15), computed independently of the C code."""
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


class Receiver:
    def __init__(self, fail_rate=0.0, drop_rate=0.0, hold=0.0, seed=None, gate=None):
        """gate: a threading.Event every request waits for before it is answered."""
        self.fail_rate, self.drop_rate, self.hold, self.gate = fail_rate, drop_rate, hold, gate
        self.waiting = 0         # requests held at the gate right now
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests = []       # every request: dict(event_id, signature, body, outcome, at)
        self.in_flight = {}      # (path, event id) -> attempts being handled now
        self.overlaps = []       # (path, event id) seen twice at the same moment
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                event_id = self.headers.get("Payd-Event-Id")
                attempt_key = (self.path, event_id)  # one delivery: an endpoint and an event
                with receiver.lock:
                    roll = receiver.random.random()
                    n = receiver.in_flight.get(attempt_key, 0)
                    if n:
                        receiver.overlaps.append(attempt_key)
                    receiver.in_flight[attempt_key] = n + 1
                try:
                    if receiver.gate is not None:
                        with receiver.lock:
                            receiver.waiting += 1
                        receiver.gate.wait(30)
                        with receiver.lock:
                            receiver.waiting -= 1
                    if receiver.hold:
                        time.sleep(receiver.random.random() * receiver.hold)
                    if roll < receiver.drop_rate:
                        outcome = "dropped"
                    elif roll < receiver.drop_rate + receiver.fail_rate:
                        outcome = "failed"
                    else:
                        outcome = "ok"
                    with receiver.lock:
                        receiver.requests.append(dict(
                            event_id=event_id, signature=self.headers.get("Payd-Signature"),
                            content_type=self.headers.get("Content-Type"), body=body,
                            outcome=outcome, at=time.time(), path=self.path,
                            headers={k.lower(): v for k, v in self.headers.items()}))
                finally:
                    with receiver.lock:
                        receiver.in_flight[attempt_key] -= 1
                if outcome == "dropped":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                status = 200 if outcome == "ok" else 500
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            # the default backlog of 5 overflows when payd opens many connections at once, and a
            # dropped SYN is sent again only a second later
            request_queue_size = 128

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_port}/hooks"

    def delivered(self):
        """Event id -> parsed body, for attempts answered 200 (deduplicated)."""
        with self.lock:
            return {r["event_id"]: json.loads(r["body"]) for r in self.requests
                    if r["outcome"] == "ok"}

    def wait_for(self, predicate, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(self):
                return True
            time.sleep(0.05)
        return False

    def close(self):
        self.server.shutdown()
        self.server.server_close()
