"""Sending webhooks again (docs/webhooks.md, "Redelivery and recovery"): one event redelivered
now, to one endpoint or to every endpoint that wants it, without losing it to a worker that
still holds the old attempt; every delivery of an endpoint that failed since a time queued once
more; and an endpoint whose every attempt failed for --webhook-disable-after disabled, with its
webhook_endpoint.disabled event; and payctl's `events resend` and `webhooks recover`. Every
receiver listens on 127.0.0.1."""

import json
import os
import subprocess
import threading
import time
from collections import Counter
from datetime import datetime, timezone

import pytest

from conftest import Payd
from receiver import Receiver

# 3 days x 0.000005 = 1.3 s: deliveries that keep failing end `failed` within about a second
FAST_GIVE_UP = ["--webhook-retry-scale", "0.000005"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")),
             args=["--rate-limit", "100000/s", "--webhook-retry-scale", "0.001",
                   "--webhook-endpoint-concurrency", "1"]).start()
    yield s
    s.stop()


def key():
    return os.urandom(8).hex()


def rfc3339(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc).timestamp()


def endpoint(user, url, events):
    r = user.post("/v1/webhook_endpoints", {"url": url, "events": events})
    assert r.status == 201, r
    return r.json["id"]


def event_of(user, type_):
    """The newest event of a type."""
    r = user.get(f"/v1/events?type={type_}&limit=1")
    assert r.status == 200 and r.json["data"], r
    return r.json["data"][0]


def seen(rx, path="/hooks"):
    """Event id -> how many requests the receiver got for it on path."""
    with rx.lock:
        return Counter(r["event_id"] for r in rx.requests if r["path"] == path)


def attempts(user, endpoint_id):
    r = user.get(f"/v1/webhook_endpoints/{endpoint_id}/deliveries?limit=100")
    assert r.status == 200, r
    return r.json["data"]


def settled(user, endpoint_id, event_ids, outcome, timeout=30):
    """Waits until every one of the events has an attempt on the endpoint with this outcome."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        done = {a["event_id"] for a in attempts(user, endpoint_id) if a["outcome"] == outcome}
        if set(event_ids) <= done:
            return True
        time.sleep(0.1)
    return False


def test_redeliver_sends_the_event_again_to_its_endpoints_or_the_one_named(server):
    u = server.create_user("redeliver")
    rx = Receiver()
    try:
        one = endpoint(u, rx.url, ["account.created"])
        endpoint(u, rx.url + "/all", ["*"])
        endpoint(u, rx.url + "/other", ["payment.succeeded"])  # does not want it
        u.create_account()
        evt = event_of(u, "account.created")["id"]
        assert rx.wait_for(lambda r: seen(r)[evt] == 1 and seen(r, "/hooks/all")[evt] == 1)

        # to every enabled endpoint that wants the type
        k = key()
        r = u.post(f"/v1/events/{evt}/redeliver", {}, idem=k)
        assert r.status == 202, r
        assert r.json["object"] == "redelivery" and r.json["event_id"] == evt
        assert len(r.json["endpoint_ids"]) == 2 and one in r.json["endpoint_ids"]
        assert rx.wait_for(lambda r: seen(r)[evt] == 2 and seen(r, "/hooks/all")[evt] == 2)
        with rx.lock:  # the same event: the same id and the same body each time
            bodies = {x["body"] for x in rx.requests if x["event_id"] == evt}
        assert len(bodies) == 1

        # the replay of that key queues nothing more
        again = u.post(f"/v1/events/{evt}/redeliver", {}, idem=k)
        assert again.status == 202 and again.header("Idempotent-Replayed") == "true", again
        assert again.json == r.json

        # to the endpoint named only
        r = u.post(f"/v1/events/{evt}/redeliver", {"endpoint_id": one}, idem=key())
        assert r.status == 202 and r.json["endpoint_ids"] == [one], r
        assert rx.wait_for(lambda r: seen(r)[evt] == 3)

        # an endpoint made after the event, named: it never had the delivery, and gets it
        late = endpoint(u, rx.url + "/late", ["account.created"])
        r = u.post(f"/v1/events/{evt}/redeliver", {"endpoint_id": late})
        assert r.status == 202 and r.json["endpoint_ids"] == [late], r
        assert rx.wait_for(lambda r: seen(r, "/hooks/late")[evt] == 1)

        time.sleep(1)  # nothing else arrives: not the replayed key, not the uninterested endpoint
        assert seen(rx)[evt] == 3 and seen(rx, "/hooks/all")[evt] == 2
        assert seen(rx, "/hooks/late")[evt] == 1 and seen(rx, "/hooks/other")[evt] == 0
        assert settled(u, one, [evt], "delivered")
    finally:
        rx.close()


def test_a_redelivery_is_not_lost_to_the_worker_holding_the_old_attempt(server):
    """The first attempt is still in flight (its worker holds the row's lease) when the event is
    redelivered: the old attempt's 200 must not mark the delivery delivered over the new pending
    state, so the event is sent a second time after it."""
    u = server.create_user("fence")
    gate = threading.Event()
    rx = Receiver(gate=gate)
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        u.create_account()
        assert rx.wait_for(lambda r: r.waiting == 1)
        evt = event_of(u, "account.created")["id"]
        r = u.post(f"/v1/events/{evt}/redeliver", {"endpoint_id": ep})
        assert r.status == 202, r
        time.sleep(0.3)  # the row is claimed again, and waits (one request per endpoint at once)
        gate.set()
        assert rx.wait_for(lambda r: len(r.delivered()) == 1 and seen(r)[evt] == 2, timeout=30)
        time.sleep(1)
        assert seen(rx)[evt] == 2
        assert [a["outcome"] for a in attempts(u, ep)] == ["delivered", "delivered"]
    finally:
        gate.set()
        rx.close()


def test_redeliver_refuses_what_is_not_there_or_disabled(server):
    u, other = server.create_user("redeliver-errors"), server.create_user("someone-else")
    rx = Receiver()
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        theirs = endpoint(other, rx.url + "/theirs", ["account.created"])
        u.create_account()
        other.create_account()
        evt, their_evt = event_of(u, "account.created")["id"], event_of(other, "account.created")["id"]
        for path, body in [
            ("/v1/events/evt_0000000000000/redeliver", {}),
            ("/v1/events/not-an-id/redeliver", {}),
            (f"/v1/events/{their_evt}/redeliver", {}),
            (f"/v1/events/{evt}/redeliver", {"endpoint_id": theirs}),
            (f"/v1/events/{evt}/redeliver", {"endpoint_id": "we_0000000000000"}),
            (f"/v1/events/{evt}/redeliver", {"endpoint_id": "acct_nope"}),
        ]:
            r = u.post(path, body, idem=key())
            assert r.status == 404 and r.json["code"] == "resource_missing", (path, body, r)
        for body in [{"endpoint_id": 7}, {"endpoint": ep}, {"endpoint_id": [ep]}]:
            r = u.post(f"/v1/events/{evt}/redeliver", body)
            assert r.status == 400, (body, r)
        assert u.request("PATCH", f"/v1/webhook_endpoints/{ep}", {"disabled": True}).status == 200
        k = key()
        r = u.post(f"/v1/events/{evt}/redeliver", {"endpoint_id": ep}, idem=k)
        assert r.status == 409 and r.json["code"] == "webhook_endpoint_disabled", r
        # nothing was queued and the key was released: enabled again, the same key sends it
        assert u.request("PATCH", f"/v1/webhook_endpoints/{ep}", {"disabled": False}).status == 200
        r = u.post(f"/v1/events/{evt}/redeliver", {"endpoint_id": ep}, idem=k)
        assert r.status == 202 and r.json["endpoint_ids"] == [ep], r
        # every endpoint disabled: nothing to send to, and the answer says so
        assert u.request("PATCH", f"/v1/webhook_endpoints/{ep}", {"disabled": True}).status == 200
        r = u.post(f"/v1/events/{evt}/redeliver", {})
        assert r.status == 202 and r.json["endpoint_ids"] == [], r
    finally:
        rx.close()


def test_recover_queues_once_more_every_delivery_that_failed_since_then(fresh_server):
    s = fresh_server(args=FAST_GIVE_UP)
    u = s.create_user("recover")
    rx = Receiver(fail_rate=1.0)  # the receiver is down: every attempt answers 500
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        u.create_account()
        before = event_of(u, "account.created")["id"]
        assert settled(u, ep, [before], "failed")
        time.sleep(0.05)
        since = time.time()
        outage = []
        for _ in range(3):
            u.create_account()
            outage.append(event_of(u, "account.created")["id"])
        assert settled(u, ep, outage, "failed")
        assert not rx.delivered()

        for body in [{"since": rfc3339(time.time() + 3600)}, {"since": "yesterday"}, {},
                     {"since": 5}]:
            r = u.post(f"/v1/webhook_endpoints/{ep}/recover", body, idem=key())
            assert r.status == 400, (body, r)
        other = s.create_user("not-the-owner")
        r = other.post(f"/v1/webhook_endpoints/{ep}/recover", {"since": rfc3339(since)})
        assert r.status == 404 and r.json["code"] == "resource_missing", r
        r = u.post("/v1/webhook_endpoints/we_0000000000000/recover", {"since": rfc3339(since)})
        assert r.status == 404, r

        rx.fail_rate = 0.0  # back up
        k = key()
        r = u.post(f"/v1/webhook_endpoints/{ep}/recover", {"since": rfc3339(since)}, idem=k)
        assert r.status == 202, r
        assert r.json["object"] == "webhook_recovery" and r.json["webhook_endpoint_id"] == ep
        assert r.json["queued"] == 3 and r.json["brought_forward"] == 0, r
        assert rx.wait_for(lambda r: set(r.delivered()) == set(outage))
        again = u.post(f"/v1/webhook_endpoints/{ep}/recover", {"since": rfc3339(since)}, idem=k)
        assert again.header("Idempotent-Replayed") == "true" and again.json == r.json
        time.sleep(1.5)
        with rx.lock:
            ok = Counter(x["event_id"] for x in rx.requests if x["outcome"] == "ok")
        assert ok == Counter({e: 1 for e in outage})  # each once, and not the one failed before
        assert seen(rx)[before] == len([a for a in attempts(u, ep) if a["event_id"] == before])
        # delivered now: a second recovery finds nothing failed
        r = u.post(f"/v1/webhook_endpoints/{ep}/recover", {"since": rfc3339(since)})
        assert r.status == 202 and r.json["queued"] == 0, r
    finally:
        rx.close()


def test_recover_brings_retrying_deliveries_forward(fresh_server):
    s = fresh_server()  # the real schedule: the retry after the first failure is about a minute
    u = s.create_user("forward")
    rx = Receiver(fail_rate=1.0)
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        u.create_account()
        evt = event_of(u, "account.created")["id"]
        assert settled(u, ep, [evt], "retrying")
        rx.fail_rate = 0.0
        r = u.post(f"/v1/webhook_endpoints/{ep}/recover", {"since": rfc3339(time.time() - 60)})
        assert r.status == 202 and r.json["queued"] == 0 and r.json["brought_forward"] == 1, r
        assert rx.wait_for(lambda r: evt in r.delivered(), timeout=10)
    finally:
        rx.close()


def disabled(user, endpoint_id):
    r = user.get(f"/v1/webhook_endpoints/{endpoint_id}")
    assert r.status == 200, r
    return r.json["disabled"]


def keep_failing(user, rx, seconds, endpoint_id=None):
    """Makes an event every 0.2 s for `seconds`, so attempts keep coming; stops early once the
    endpoint is disabled. Returns whether it was."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        user.create_account()
        time.sleep(0.2)
        if endpoint_id and disabled(user, endpoint_id):
            return True
    return False


def test_an_endpoint_failing_for_the_whole_window_is_disabled_with_its_event(fresh_server):
    s = fresh_server(args=["--webhook-disable-after", "3s", "--webhook-retry-scale", "0.001"])
    u = s.create_user("disable")
    down, watcher = Receiver(fail_rate=1.0), Receiver()
    try:
        ep = endpoint(u, down.url, ["account.created"])
        endpoint(u, watcher.url, ["webhook_endpoint.disabled"])
        assert keep_failing(u, down, 20, ep)
        first_failure = min(parse_time(a["created_at"]) for a in attempts(u, ep))
        evt = event_of(u, "webhook_endpoint.disabled")
        assert parse_time(evt["created_at"]) - first_failure >= 3.0 - 0.01
        shown = evt["data"]["object"]
        assert shown["id"] == ep and shown["disabled"] is True and shown["url"] == down.url
        assert "secret" not in shown
        assert watcher.wait_for(lambda r: evt["id"] in r.delivered())
        # disabled: its deliveries wait, and no second event is written
        time.sleep(1)
        with down.lock:
            n = len(down.requests)
        u.create_account()
        time.sleep(1)
        with down.lock:
            assert len(down.requests) == n
        events = u.get("/v1/events?type=webhook_endpoint.disabled").json["data"]
        assert [e["id"] for e in events] == [evt["id"]]

        # enabled again, the streak starts over: the next failures do not disable it at once
        assert u.request("PATCH", f"/v1/webhook_endpoints/{ep}", {"disabled": False}).status == 200
        assert not keep_failing(u, down, 2, ep)
        assert keep_failing(u, down, 20, ep)
    finally:
        down.close()
        watcher.close()


def test_a_success_inside_the_window_resets_the_streak(fresh_server):
    s = fresh_server(args=["--webhook-disable-after", "4s", "--webhook-retry-scale", "0.001"])
    u = s.create_user("streak")
    rx = Receiver(fail_rate=1.0)
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        assert not keep_failing(u, rx, 1.5, ep)
        rx.fail_rate = 0.0
        assert rx.wait_for(lambda r: len(r.delivered()) >= 1)
        rx.fail_rate = 1.0
        # 3 s more of failures: over 4 s since the first, but 3 s since the last 2xx
        assert not keep_failing(u, rx, 3, ep)
        assert u.get("/v1/events?type=webhook_endpoint.disabled").json["data"] == []
        assert keep_failing(u, rx, 20, ep)  # and the window, unbroken, does disable it
    finally:
        rx.close()


# ---- payctl: events resend, webhooks recover (through the client library's calls) ----

PAYCTL = os.environ.get("PAYCTL_BIN", os.path.join(os.path.dirname(__file__),
                                                   "../../build/payctl"))


def payctl(user, *args):
    env = dict(os.environ, PAYD_URL=user.server.url, PAYD_API_KEY=user.key)
    return subprocess.run([PAYCTL, *args], capture_output=True, text=True, env=env, timeout=120)


def test_payctl_events_resend(server):
    u = server.create_user("payctl-resend")
    rx = Receiver()
    try:
        one = endpoint(u, rx.url, ["account.created"])
        endpoint(u, rx.url + "/all", ["*"])
        u.create_account()
        evt = event_of(u, "account.created")["id"]
        assert rx.wait_for(lambda r: seen(r)[evt] == 1 and seen(r, "/hooks/all")[evt] == 1)

        out = payctl(u, "events", "resend", evt)
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)
        assert answer["event_id"] == evt and len(answer["endpoint_ids"]) == 2
        assert rx.wait_for(lambda r: seen(r)[evt] == 2 and seen(r, "/hooks/all")[evt] == 2)

        k = key()
        for _ in range(2):  # the same key twice: one redelivery
            out = payctl(u, "events", "resend", evt, "--endpoint", one, "--idempotency-key", k)
            assert out.returncode == 0, out.stderr
            assert json.loads(out.stdout)["endpoint_ids"] == [one]
        assert rx.wait_for(lambda r: seen(r)[evt] == 3)
        time.sleep(1)
        assert seen(rx)[evt] == 3 and seen(rx, "/hooks/all")[evt] == 2

        out = payctl(u, "events", "resend", "evt_0000000000000")
        assert out.returncode == 1 and "resource_missing" in out.stderr, out
        out = payctl(u, "events", "resend")
        assert out.returncode == 2, out  # a usage mistake: no event named
    finally:
        rx.close()


def test_payctl_webhooks_recover(fresh_server):
    s = fresh_server(args=FAST_GIVE_UP)
    u = s.create_user("payctl-recover")
    rx = Receiver(fail_rate=1.0)
    try:
        ep = endpoint(u, rx.url, ["account.created"])
        since = rfc3339(time.time())
        u.create_account()
        evt = event_of(u, "account.created")["id"]
        assert settled(u, ep, [evt], "failed")
        rx.fail_rate = 0.0
        out = payctl(u, "webhooks", "recover", ep, "--since", since)
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)
        assert answer["object"] == "webhook_recovery" and answer["queued"] == 1, answer
        assert rx.wait_for(lambda r: evt in r.delivered())

        out = payctl(u, "webhooks", "recover", ep, "--since", rfc3339(time.time() + 3600))
        assert out.returncode == 1 and "invalid_parameter" in out.stderr, out
        out = payctl(u, "webhooks", "recover", ep)
        assert out.returncode == 2 and "--since" in out.stderr, out
    finally:
        rx.close()
