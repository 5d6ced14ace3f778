"""Events and webhooks (§15): every change writes its event in its own transaction, with the
resource as it was right after that change; a user sees only their own events; webhook
endpoints are validated and managed; deliveries arrive signed, and the library's verifier
(through the example consumer) accepts them and refuses a changed body, timestamp or secret,
or a timestamp outside its window."""

import json
import os
import socket
import subprocess
import threading
import time
from collections import Counter

import pytest

from conftest import PAYCTL, Payd, free_port
from receiver import Receiver, sign

BUILD = os.environ.get("PAYD_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
CONSUMER = os.path.join(BUILD, "example_webhook_consumer")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")),
             args=["--rate-limit", "100000/s", "--webhook-retry-scale", "0.001"]).start()
    yield s
    s.stop()


def numeric(payd_id):
    """The 64-bit id inside "<prefix>_<13 Crockford base32 chars>"."""
    value = 0
    for ch in payd_id.split("_", 1)[1]:
        value = value * 32 + "0123456789abcdefghjkmnpqrstvwxyz".index(ch)
    return value


def key():
    return os.urandom(8).hex()


def all_events(user, **filters):
    """Every event of the user, oldest first, by following next_cursor."""
    out, cursor = [], None
    while True:
        q = "&".join(f"{k}={v}" for k, v in {"limit": 100, **filters}.items())
        r = user.get(f"/v1/events?{q}" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        out += r.json["data"]
        if not r.json["has_more"]:
            return list(reversed(out))
        cursor = r.json["next_cursor"]


def objects(events, type_):
    return [e["data"]["object"] for e in events if e["type"] == type_]


def test_every_change_is_one_event_with_the_resource_as_of_the_change(server):
    u = server.create_user("events")
    a = u.create_account()
    b = u.create_account()
    # an order paid, then refunded in full: order.created, payment.succeeded,
    # order.status_changed (paid), refund.succeeded, order.status_changed (refunded)
    o = u.post("/v1/orders", {"external_order_id": "ext-" + key(), "amount": 700,
                              "currency": "USD"}).json
    pay_key = key()
    paid = u.pay(a, 700, order_id=o["id"], idem=pay_key)
    assert paid.status == 201, paid
    assert u.pay(a, 700, order_id=o["id"], idem=pay_key).header("Idempotent-Replayed") == "true"
    refund = u.post(f"/v1/payments/{paid.json['id']}/refunds", {}, idem=key())
    assert refund.status == 201, refund
    # an order cancelled by PUT, then the same PUT again (no change, no event)
    o2 = u.post("/v1/orders", {"external_order_id": "ext-" + key(), "amount": 5,
                               "currency": "USD"}).json
    for _ in range(2):
        assert u.request("PUT", f"/v1/orders/{o2['id']}/status",
                         {"status": "cancelled"}).status == 200
    # a payment that funds a, a declined one, a transfer that succeeds and one that fails
    funds = u.pay(a, 5000)
    assert funds.status == 201
    declined = u.pay(a, 100, source="tok_chargeDeclined")
    assert declined.status == 402
    seq = "seq-" + key()
    t_ok = u.post("/v1/transfers", {"biz_seq": seq, "from_account": a["id"],
                                    "to_account": b["id"], "amount": 1200, "currency": "USD"})
    assert t_ok.status == 201, t_ok
    assert u.post("/v1/transfers", {"biz_seq": seq, "from_account": a["id"],
                                    "to_account": b["id"], "amount": 1200,
                                    "currency": "USD"}).status == 201  # replay: no event
    t_bad = u.post("/v1/transfers", {"biz_seq": "seq-" + key(), "from_account": b["id"],
                                     "to_account": a["id"], "amount": 10 ** 9,
                                     "currency": "USD"})
    assert t_bad.status == 402 or t_bad.status == 409 or t_bad.status == 422, t_bad
    sku = "sku-" + key()
    assert u.post("/v1/products", {"sku": sku, "name": "mug", "stock": 3}).status == 201
    rsv = u.post(f"/v1/products/{sku}/reservations", {"quantity": 2}, idem=key())
    assert rsv.status == 201, rsv

    events = all_events(u)
    assert Counter(e["type"] for e in events) == {
        "account.created": 2, "order.created": 2, "payment.succeeded": 2, "payment.failed": 1,
        "order.status_changed": 3, "refund.succeeded": 1, "transfer.succeeded": 1,
        "transfer.failed": 1, "reservation.created": 1}
    for e in events:
        assert e["id"].startswith("evt_") and e["object"] == "event"
        assert u.get(f"/v1/events/{e['id']}").json == e

    # each object is the resource right after its change, not as it is now
    assert objects(events, "account.created") == [a, b]
    assert objects(events, "order.created") == [o, o2]
    succeeded = objects(events, "payment.succeeded")
    assert succeeded == [paid.json, funds.json]
    assert succeeded[0]["status"] == "succeeded" and succeeded[0]["refunded_amount"] == 0
    assert u.get(f"/v1/payments/{paid.json['id']}").json["status"] == "refunded"
    assert objects(events, "payment.failed") == [declined.json["payment"]]
    assert objects(events, "refund.succeeded") == [refund.json]
    assert [(x["id"], x["status"]) for x in objects(events, "order.status_changed")] == [
        (o["id"], "paid"), (o["id"], "refunded"), (o2["id"], "cancelled")]
    assert objects(events, "transfer.succeeded") == [t_ok.json]
    failed = objects(events, "transfer.failed")[0]
    assert failed["status"] == "failed" and failed["amount"] == 10 ** 9
    assert objects(events, "reservation.created") == [rsv.json]

    # the table holds nothing the API did not show
    assert server.sql(f"SELECT COUNT(*) FROM events WHERE user_id = {numeric(u.id)}") == len(
        events)


def test_filters_and_pages(server):
    u = server.create_user("filters")
    for _ in range(5):
        u.create_account()
    acct = all_events(u, type="account.created")
    assert len(acct) == 5 and all_events(u, type="payment.succeeded") == []
    page = u.get("/v1/events?limit=2&type=account.created").json
    assert page["has_more"] and len(page["data"]) == 2
    nxt = u.get(f"/v1/events?limit=2&type=account.created&cursor={page['next_cursor']}").json
    assert [e["id"] for e in page["data"] + nxt["data"]] == [e["id"] for e in acct[::-1][:4]]
    mismatch = u.get(f"/v1/events?limit=2&cursor={page['next_cursor']}")
    assert mismatch.status == 400 and mismatch.json["code"] == "cursor_mismatch"
    middle = acct[2]["created_at"]
    assert all_events(u, created_gte=middle) == [e for e in acct if e["created_at"] >= middle]
    assert all_events(u, created_lt=middle) == [e for e in acct if e["created_at"] < middle]
    bad = u.get("/v1/events?type=payment.exploded")
    assert bad.status == 400 and bad.json["param"] == "type"
    assert u.get("/v1/events?created_gte=yesterday").json["param"] == "created_gte"
    assert u.get("/v1/events/evt_0000000000000").json["code"] == "resource_missing"
    assert u.get("/v1/events/pay_0000000000000").status == 404


def test_a_user_sees_only_their_own_events(server):
    alice, bob = server.create_user("alice"), server.create_user("bob")
    alice.create_account()
    bob.create_account()
    mine = all_events(alice)
    assert len(mine) == 1 and len(all_events(bob)) == 1
    r = bob.get(f"/v1/events/{mine[0]['id']}")
    assert r.status == 404 and r.json["code"] == "resource_missing"
    assert mine[0]["id"] not in [e["id"] for e in all_events(bob)]
    ep = alice.post("/v1/webhook_endpoints", {"url": "http://127.0.0.1:9/x", "events": ["*"]})
    assert bob.get(f"/v1/webhook_endpoints/{ep.json['id']}").status == 404
    assert bob.get(f"/v1/webhook_endpoints/{ep.json['id']}/deliveries").status == 404
    assert bob.request("DELETE", f"/v1/webhook_endpoints/{ep.json['id']}").status == 404
    assert bob.get("/v1/webhook_endpoints").json["data"] == []


def test_endpoint_validation_and_management(server):
    u = server.create_user("hooks")
    bad = [
        ({"url": "ftp://example.com/x", "events": ["*"]}, "url"),
        ({"url": "https://user:pw@example.com/x", "events": ["*"]}, "url"),
        ({"url": "https://user@example.com/x", "events": ["*"]}, "url"),
        ({"url": "not a url", "events": ["*"]}, "url"),
        ({"url": "https://example.com/x", "events": []}, "events"),
        ({"url": "https://example.com/x", "events": ["payment.exploded"]}, "events"),
        ({"url": "https://example.com/x", "events": ["*", "order.created"]}, "events"),
        ({"url": "https://example.com/x", "events": "*"}, "events"),
        ({"url": "https://example.com/x", "events": ["*"], "colour": 1}, "colour"),
        ({"events": ["*"]}, "url"),
    ]
    for body, param in bad:
        r = u.post("/v1/webhook_endpoints", body)
        assert r.status == 400 and r.json["param"] == param, (body, r)
    r = u.post("/v1/webhook_endpoints", {"url": "https://example.com/hooks",
                                         "events": ["payment.succeeded", "refund.succeeded"],
                                         "description": "books"})
    assert r.status == 201, r
    ep = r.json
    assert ep["id"].startswith("we_") and ep["secret"].startswith("whsec_")
    assert r.header("Location") == f"/v1/webhook_endpoints/{ep['id']}"
    got = u.get(f"/v1/webhook_endpoints/{ep['id']}").json
    assert "secret" not in got and got["events"] == ["payment.succeeded", "refund.succeeded"]
    assert [x["id"] for x in u.get("/v1/webhook_endpoints").json["data"]] == [ep["id"]]
    p = u.request("PATCH", f"/v1/webhook_endpoints/{ep['id']}",
                  {"url": "http://example.org/h", "events": ["*"], "disabled": True})
    assert p.status == 200 and (p.json["url"], p.json["events"], p.json["disabled"]) == (
        "http://example.org/h", ["*"], True), p
    assert u.request("PATCH", f"/v1/webhook_endpoints/{ep['id']}",
                     {"disabled": "yes"}).json["param"] == "disabled"
    assert u.request("PATCH", f"/v1/webhook_endpoints/{ep['id']}",
                     {"url": "gopher://x"}).json["param"] == "url"
    d = u.request("DELETE", f"/v1/webhook_endpoints/{ep['id']}")
    assert d.status == 200 and d.json["deleted"] is True
    assert u.get(f"/v1/webhook_endpoints/{ep['id']}").status == 404
    assert u.request("DELETE", f"/v1/webhook_endpoints/{ep['id']}").status == 404


def test_deny_private_refuses_loopback(fresh_server):
    s = fresh_server(args=["--webhook-deny-private"])
    u = s.create_user()
    for url in ["http://127.0.0.1:8080/x", "http://localhost/x", "http://10.1.2.3/x",
                "http://192.168.0.1/x", "http://[::1]/x", "http://169.254.169.254/latest"]:
        r = u.post("/v1/webhook_endpoints", {"url": url, "events": ["*"]})
        assert r.status == 400 and r.json["param"] == "url", (url, r)


def test_a_refused_url_claims_no_key(fresh_server):
    """The url's check (a DNS lookup) answers before the write job that would claim the key, so
    the key stays unused: the corrected request takes it."""
    s = fresh_server(args=["--webhook-deny-private"])
    u = s.create_user()
    k = "we-" + os.urandom(4).hex()
    r = u.post("/v1/webhook_endpoints", {"url": "http://127.0.0.1:8080/x", "events": ["*"]},
               idem=k)
    assert r.status == 400 and r.json["param"] == "url", r
    assert s.sql(f"SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = '{k}'") == 0
    # a public address is the only kind --webhook-deny-private saves: a value, never connected
    # to. The endpoint takes only webhook_endpoint.disabled, which follows failed deliveries
    # to it, so no event can ever be sent there
    body = {"url": "http://93.184.216.34/x", "events": ["webhook_endpoint.disabled"]}
    made = u.post("/v1/webhook_endpoints", body, idem=k)
    assert made.status == 201, made
    again = u.post("/v1/webhook_endpoints", body, idem=k)
    assert again.header("Idempotent-Replayed") == "true" and again.header("Location")
    # the same answer, but the secret is shown once only (test_secrets_at_rest.py)
    assert again.json == {**made.json, "secret": None, "redacted": again.json["redacted"]}


def test_deliveries_are_signed_and_filtered_by_type(server):
    u = server.create_user("delivery")
    rx = Receiver()
    try:
        ep = u.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["payment.succeeded"]}).json
        all_ep = u.post("/v1/webhook_endpoints", {"url": rx.url + "/all", "events": ["*"]}).json
        a = u.create_account()
        pay = u.pay(a, 300).json
        assert rx.wait_for(lambda r: len(r.delivered()) >= 2 and len(r.requests) >= 3)
        by_path = {}
        for req in rx.requests:
            by_path.setdefault(req["path"], []).append(req)
        typed = by_path["/hooks"]
        assert [json.loads(x["body"])["type"] for x in typed] == ["payment.succeeded"]
        assert sorted(json.loads(x["body"])["type"] for x in by_path["/hooks/all"]) == [
            "account.created", "payment.succeeded"]
        req = typed[0]
        event = json.loads(req["body"])
        assert event == u.get(f"/v1/events/{event['id']}").json
        assert event["data"]["object"] == pay and req["event_id"] == event["id"]
        assert req["content_type"] == "application/json"
        t = int(req["signature"].split(",")[0][2:])
        assert abs(t - time.time()) < 60
        assert req["signature"] == sign(ep["secret"], t, req["body"])
        assert req["signature"] != sign(all_ep["secret"], t, req["body"])
        # the attempt is recorded
        attempts = u.get(f"/v1/webhook_endpoints/{ep['id']}/deliveries").json["data"]
        assert rx.wait_for(lambda _: len(u.get(
            f"/v1/webhook_endpoints/{ep['id']}/deliveries").json["data"]) == 1)
        attempts = u.get(f"/v1/webhook_endpoints/{ep['id']}/deliveries").json["data"]
        assert attempts[0]["event_id"] == event["id"] and attempts[0]["response_status"] == 200
        assert attempts[0]["outcome"] == "delivered" and attempts[0]["next_attempt_at"] is None
    finally:
        rx.close()


def test_a_stuck_endpoint_does_not_hold_up_the_others(fresh_server):
    """One endpoint never answers while the test holds its gate; another gets every event. The
    node has 64 slots and a cap of 8 per endpoint: without the cap the stuck endpoint's backlog
    would take every slot."""
    s = fresh_server(args=["--rate-limit", "100000/s", "--webhook-max-in-flight", "64",
                           "--webhook-endpoint-concurrency", "8"])
    u = s.create_user("stuck")
    gate = threading.Event()
    stuck, fast = Receiver(gate=gate), Receiver()
    try:
        for rx in (stuck, fast):
            assert u.post("/v1/webhook_endpoints",
                          {"url": rx.url, "events": ["account.created"]}).status == 201
        for _ in range(150):  # more than the node's 64 slots
            u.create_account()
        assert fast.wait_for(lambda r: len(r.delivered()) == 150)
        with stuck.lock:
            assert 0 < stuck.waiting <= 8 and not stuck.requests
    finally:
        gate.set()
        stuck.close()
        fast.close()


def test_failed_attempts_are_retried_and_explained(server):
    u = server.create_user("retry")
    rx = Receiver(fail_rate=1.0)
    try:
        ep = u.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["account.created"]}).json
        u.create_account()
        assert rx.wait_for(lambda r: len(r.requests) >= 3)
        rx.fail_rate = 0.0
        assert rx.wait_for(lambda r: len(r.delivered()) == 1, timeout=60)
        time.sleep(0.3)
        attempts = u.get(f"/v1/webhook_endpoints/{ep['id']}/deliveries").json["data"][::-1]
        assert [x["attempt"] for x in attempts] == list(range(1, len(attempts) + 1))
        for x in attempts[:-1]:
            assert x["response_status"] == 500 and x["outcome"] == "retrying"
            assert x["error"] and x["next_attempt_at"] > x["created_at"]
        assert attempts[-1]["outcome"] == "delivered"
    finally:
        rx.close()


def test_library_verifier_in_the_example_consumer(server, tmp_path):
    """The consumer verifies with payd_webhook_verify and deduplicates on the event id."""
    port = free_port()
    u = server.create_user("consumer")
    ep = u.post("/v1/webhook_endpoints", {"url": f"http://127.0.0.1:{port}/", "events": ["*"]})
    secret = ep.json["secret"]
    proc = subprocess.Popen([CONSUMER, "--port", str(port), "--secret", secret,
                             "--db", str(tmp_path / "consumer.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("listening")
        a = u.create_account()
        u.pay(a, 100)
        lines = [proc.stdout.readline().split() for _ in range(2)]
        events = all_events(u)
        assert sorted(line[1] for line in lines) == sorted(e["id"] for e in events)
        assert all(line[0] == "processed" for line in lines)

        def post(body, signature):
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            c.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Connection: close\r\nPayd-Signature: " + signature.encode() +
                      b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            out = b""
            while chunk := c.recv(4096):
                out += chunk
            c.close()
            return int(out.split()[1]), out.split(b"\r\n\r\n", 1)[1].decode()

        body = json.dumps(events[0], separators=(",", ":")).encode()
        now = int(time.time())
        assert post(body, sign(secret, now, body)) == (200, "ok\n")  # a repeat: a duplicate
        assert proc.stdout.readline().split() == ["duplicate", events[0]["id"]]
        assert post(body + b" ", sign(secret, now, body)) == (400, "bad_signature")
        assert post(body, sign(secret, now, body).replace(f"t={now}", f"t={now + 1}")) == (
            400, "bad_signature")
        assert post(body, sign(secret + "x", now, body)) == (400, "bad_signature")
        assert post(body, sign(secret, now - 301, body)) == (400, "outside_tolerance")
        assert post(body, sign(secret, now + 301, body)) == (400, "outside_tolerance")
        assert post(body, sign(secret, now - 250, body))[0] == 200
        assert post(body, "v1=abc") == (400, "malformed")
        # a rotated secret: any v1= may match
        two = sign(secret + "old", now, body) + "," + sign(secret, now, body).split(",")[1]
        assert post(body, two)[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)


def test_metrics_count_events_and_attempts(server):
    text = server.request("GET", "/metrics").raw.decode()
    written = [line for line in text.splitlines() if line.startswith("payd_events_written_total")]
    assert written and int(written[0].split()[1]) > 10
    assert 'payd_webhook_attempts_total{outcome="delivered"}' in text
    assert "payd_webhook_oldest_undelivered_seconds" in text
    lag = [line for line in text.splitlines()
           if line.startswith("payd_webhook_delivery_lag_seconds_count")]
    assert lag and int(lag[0].split()[1]) > 0


def payctl(user, *args, url=None):
    env = dict(os.environ, PAYD_URL=url or user.server.url, PAYD_API_KEY=user.key)
    return subprocess.run([PAYCTL, *args], capture_output=True, text=True, env=env, timeout=60)


def test_payctl_events_and_webhooks(server):
    u = server.create_user("cli")
    u.create_account()
    listed = payctl(u, "events", "list", "--type", "account.created")
    assert listed.returncode == 0, listed.stderr
    event = json.loads(listed.stdout.splitlines()[0])
    assert event["type"] == "account.created"
    got = payctl(u, "events", "get", event["id"])
    assert got.returncode == 0 and json.loads(got.stdout) == event
    assert payctl(u, "events", "get", "evt_0000000000000").returncode == 1
    made = payctl(u, "webhooks", "create", "--endpoint", "https://example.com/h",
                  "--events", "payment.succeeded,refund.succeeded")
    assert made.returncode == 0, made.stderr
    ep = json.loads(made.stdout)
    assert ep["secret"].startswith("whsec_")
    assert ep["events"] == ["payment.succeeded", "refund.succeeded"]
    assert payctl(u, "webhooks", "create", "--endpoint", "ftp://x/").returncode == 1
    assert [json.loads(x)["id"] for x in payctl(u, "webhooks", "list").stdout.splitlines()] == [
        ep["id"]]
    assert payctl(u, "webhooks", "deliveries", ep["id"]).returncode == 0
    assert payctl(u, "webhooks", "delete", ep["id"]).returncode == 0
    assert payctl(u, "webhooks", "list").stdout == ""


def test_payctl_listen_forwards_each_event_once_across_restarts(fresh_server, tmp_path):
    s = fresh_server(args=["--rate-limit", "100000/s"])
    u = s.create_user()
    rx = Receiver()
    state = str(tmp_path / "listen.json")
    secret = "whsec_bG9jYWwgc2VjcmV0"  # "local secret"

    def listen():
        return payctl(u, "listen", "--forward-to", rx.url, "--state", state, "--secret", secret,
                      "--since", "2026-01-01T00:00:00Z", "--settle", "0s", "--once")

    try:
        for _ in range(3):
            u.create_account()
        first = listen()
        assert first.returncode == 0, first.stderr
        assert len(rx.requests) == 3
        # the server restarts; two more events; the receiver refuses once
        s.stop()
        s.start(port=s.port)
        u.create_account()
        u.create_account()
        rx.fail_rate = 1.0
        refused = listen()
        assert refused.returncode == 3 and len(rx.requests) == 4  # stops at the refusal
        rx.fail_rate = 0.0
        again = listen()
        assert again.returncode == 0, again.stderr
        forwarded = [q for q in rx.requests if q["outcome"] == "ok"]
        events = all_events(u)
        assert [q["event_id"] for q in forwarded] == [e["id"] for e in events]
        for q in forwarded:
            assert json.loads(q["body"]) == u.get(f"/v1/events/{q['event_id']}").json
            t = int(q["signature"].split(",")[0][2:])
            assert q["signature"] == sign(secret, t, q["body"])
        assert listen().returncode == 0 and len(rx.requests) == 6  # nothing new, nothing again
    finally:
        rx.close()


def test_retention_sweeps_old_events(fresh_server):
    # the pruner once, at start: a later pass would take the new event too, a second after it
    s = fresh_server(args=["--event-retention", "1s", "--recovery-interval", "1h"])
    u = s.create_user()
    u.create_account()
    assert len(all_events(u)) == 1
    time.sleep(1.2)
    s.stop()
    s.start(port=s.port)  # the pruner runs at start
    u.create_account()
    deadline = time.time() + 10
    while len(all_events(u)) != 1 and time.time() < deadline:
        time.sleep(0.1)
    assert [e["type"] for e in all_events(u)] == ["account.created"]
    assert len(u.get("/v1/accounts").json["data"]) == 2
