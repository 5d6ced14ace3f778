"""payctl listen as a developer runs it (docs/webhooks.md): it long-polls /v1/events, so an
event reaches the local URL within a second of its write; --events forwards only some types; and
every forward carries the Standard Webhooks headers beside Payd-Signature, checked here by an
independent verifier."""

import base64
import hashlib
import hmac
import http.server
import json
import os
import subprocess
import threading
import time

import pytest

from conftest import PAYCTL, Payd
from receiver import sign

SECRET = "whsec_" + base64.b64encode(b"a listen test secret!!").decode()  # padded base64


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


class Target:
    """The local URL: records each POST's headers, body and arrival time, answers 200."""

    def __init__(self):
        self.requests, self.lock = [], threading.Lock()
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with target.lock:
                    target.requests.append(dict(headers={k.lower(): v for k, v in
                                                         self.headers.items()},
                                                body=body, at=time.monotonic()))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_for(self, count, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            time.sleep(0.01)
        raise AssertionError(f"{len(self.requests)} forwarded, {count} expected")

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def standard_webhooks_verify(secret, headers, body, now, tolerance=300):
    """The Standard Webhooks check, written from the specification."""
    msg_id, ts = headers.get("webhook-id"), headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not ts or not signatures or not ts.isdigit():
        return False
    if abs(now - int(ts)) > tolerance:
        return False
    key = secret.removeprefix("whsec_")
    key = base64.b64decode(key + "=" * (-len(key) % 4))
    expected = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body,
                                         hashlib.sha256).digest()).decode()
    return any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected)
               for s in signatures.split(" "))


def start_listen(user, target, state, *extra):
    env = dict(os.environ, PAYD_URL=user.server.url, PAYD_API_KEY=user.key)
    proc = subprocess.Popen([PAYCTL, "listen", "--forward-to", target.url, "--state", state,
                             "--secret", SECRET, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(0.5)  # its first pass is done: it waits on the long-poll now
    assert proc.poll() is None, proc.stderr.read()
    return proc


def stop(proc):
    proc.terminate()
    proc.wait(10)


def test_an_event_reaches_the_local_url_within_a_second(server, tmp_path):
    u = server.create_user("prompt")
    account = u.create_account()
    target = Target()
    proc = start_listen(u, target, str(tmp_path / "state.json"))
    try:
        time.sleep(1.5)  # well past any fixed polling period: this one must wait on the server
        for n in range(1, 4):
            assert u.pay(account).status == 201
            paid_at = time.monotonic()
            got = target.wait_for(n)
            assert got[-1]["at"] - paid_at < 1.0, got[-1]["at"] - paid_at
            time.sleep(0.3)
    finally:
        stop(proc)
        target.close()
    assert [json.loads(r["body"])["type"] for r in target.requests] == ["payment.succeeded"] * 3
    for r in target.requests:
        event = json.loads(r["body"])
        assert r["headers"]["webhook-id"] == event["id"] == r["headers"]["payd-event-id"]
        assert standard_webhooks_verify(SECRET, r["headers"], r["body"], time.time())
        t = int(r["headers"]["webhook-timestamp"])
        assert r["headers"]["payd-signature"] == sign(SECRET, t, r["body"])
        # a changed body, id or stale timestamp is refused by the same verifier
        assert not standard_webhooks_verify(SECRET, r["headers"], r["body"] + b" ", time.time())
        assert not standard_webhooks_verify(SECRET, dict(r["headers"], **{"webhook-id": "x"}),
                                            r["body"], time.time())
        assert not standard_webhooks_verify(SECRET, r["headers"], r["body"], time.time() + 600)


def test_events_forwards_only_the_types_asked_for(server, tmp_path):
    u = server.create_user("filtered")
    target = Target()
    proc = start_listen(u, target, str(tmp_path / "state.json"),
                        "--events", "payment.succeeded,refund.succeeded")
    try:
        account = u.create_account()  # account.created: not forwarded
        paid = u.pay(account)
        assert paid.status == 201
        refund = u.post(f"/v1/payments/{paid.json['id']}/refunds", {"amount": 100},
                        idem=os.urandom(8).hex())
        assert refund.status == 201, refund
        got = target.wait_for(2)
        time.sleep(1.0)  # nothing more comes
    finally:
        stop(proc)
        target.close()
    assert [json.loads(r["body"])["type"] for r in target.requests] == [
        "payment.succeeded", "refund.succeeded"]
    assert len(got) == 2


def test_a_secret_that_is_not_base64_is_refused(server, tmp_path):
    u = server.create_user("bad-secret")
    env = dict(os.environ, PAYD_URL=server.url, PAYD_API_KEY=u.key)
    out = subprocess.run([PAYCTL, "listen", "--forward-to", "http://127.0.0.1:9/", "--state",
                          str(tmp_path / "s.json"), "--secret", "whsec_no!", "--once"],
                         capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 2 and "base64" in out.stderr, out
