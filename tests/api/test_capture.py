"""Authorize now, capture later (docs/api.md §17): manual payments, partial and final captures,
cancels, the stored refusals, refunds of what was captured, orders held by a hold, the
processor key of each operation, races (capture against cancel, concurrent partial captures,
refund against capture, expiry against a late capture) and the books after each: the
payment's identity captured + released + capturable = amount, and `payd ledger verify`."""

import json
import os
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import PAYD, verify_ledger


def key():
    return os.urandom(8).hex()


@pytest.fixture(scope="module")
def alice(server):
    """A merchant whose races are not cut short by the per-user rate limit."""
    return server.create_user("alice-capture", rate_limit="100000/s")


def authorize(user, account, amount=1000, **extra):
    k = key()
    r = user.pay(account, amount, capture_method="manual", idem=k, **extra)
    if r.status == 503 and extra.get("source") == "tok_lostResponse":
        r = user.pay(account, amount, capture_method="manual", idem=k, **extra)  # resumed
    assert r.status == 201, r
    return r.json


def capture(user, payment, body=None, idem=None):
    return user.post(f"/v1/payments/{payment['id']}/capture", body or {}, idem=idem or key())


def cancel(user, payment, body=None, idem=None):
    return user.post(f"/v1/payments/{payment['id']}/cancel", body or {}, idem=idem or key())


def get(user, payment):
    return user.get(f"/v1/payments/{payment['id']}").json


def books(user, account):
    """The account's balance, in live mode (the users here pay with live keys)."""
    balance = user.get(f"/v1/accounts/{account['id']}/balance").json
    assert balance.pop("livemode") is True, balance
    return balance


def holds_identity(p):
    assert p["amount_captured"] + p["amount_released"] + p["amount_capturable"] == p["amount"], p
    assert p["refunded_amount"] <= p["amount_captured"], p


def events_of(user, payment, type_):
    data = user.get(f"/v1/events?type={type_}&limit=100").json["data"]
    return [e for e in data if e["data"]["object"]["id"] == payment["id"]]


def test_manual_payment_is_a_hold(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    assert p["status"] == "requires_capture" and p["capture_method"] == "manual"
    assert (p["amount_capturable"], p["amount_captured"], p["amount_released"]) == (1000, 0, 0)
    assert p["capture_before"] and p["canceled_at"] is None and p["cancellation_reason"] is None
    assert books(alice, account)["available"] == 0 and books(alice, account)["pending"] == 1000
    # an automatic payment shows the same fields: captured in full
    auto = alice.pay(account, 500).json
    assert (auto["capture_method"], auto["amount_captured"], auto["amount_capturable"],
            auto["capture_before"]) == ("automatic", 500, 0, None)
    assert get(alice, p) == p
    assert len(events_of(alice, p, "payment.authorized")) == 1
    txns = alice.get(f"/v1/balance_transactions?source={p['id']}").json["data"]
    assert [(t["type"], t["amount"]) for t in txns] == [("authorization", 1000)]
    verify_ledger(server.db)


def test_capture_defaults_and_final(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    r = capture(alice, p, {"amount_to_capture": 300, "final_capture": False})
    assert r.status == 200, r
    assert (r.json["status"], r.json["amount_captured"], r.json["amount_capturable"]) == (
        "requires_capture", 300, 700)
    assert books(alice, account) == {"object": "balance", "available": 300, "pending": 700,
                                     "currency": "USD"}
    # default final_capture (true): the rest is released
    r = capture(alice, p, {"amount_to_capture": 200})
    assert r.status == 200, r
    assert (r.json["status"], r.json["amount_captured"], r.json["amount_released"],
            r.json["amount_capturable"]) == ("succeeded", 500, 500, 0)
    holds_identity(r.json)
    assert books(alice, account)["available"] == 500 and books(alice, account)["pending"] == 0
    caps = events_of(alice, p, "payment.captured")
    assert sorted(e["data"]["object"]["capture"]["amount"] for e in caps) == [200, 300]
    # nothing left: not capturable, and cancel neither
    again = capture(alice, p)
    assert again.status == 409 and again.json["code"] == "payment_not_capturable", again
    assert again.json["current_status"] == "succeeded"
    c = cancel(alice, p)
    assert c.status == 409 and c.json["code"] == "payment_not_capturable"
    verify_ledger(server.db)


def test_capture_all_by_default(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 800)
    r = capture(alice, p)
    assert r.status == 200 and r.json["amount_captured"] == 800 and r.json["status"] == "succeeded"
    assert books(alice, account)["available"] == 800


def test_stored_refusals_and_replays(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    k = key()
    over = capture(alice, p, {"amount_to_capture": 1001}, idem=k)
    assert over.status == 409 and over.json["code"] == "amount_exceeds_capturable", over
    assert over.json["amount_capturable"] == 1000
    replay = capture(alice, p, {"amount_to_capture": 1001}, idem=k)
    assert replay.status == 409 and replay.header("Idempotent-Replayed") == "true"
    assert replay.raw == over.raw
    reused = capture(alice, p, {"amount_to_capture": 5}, idem=k)
    assert reused.status == 422 and reused.json["code"] == "idempotency_key_reused"
    # a successful capture replays byte for byte, and captures once
    k2 = key()
    first = capture(alice, p, {"amount_to_capture": 100, "final_capture": False}, idem=k2)
    second = capture(alice, p, {"amount_to_capture": 100, "final_capture": False}, idem=k2)
    assert first.status == second.status == 200 and first.raw == second.raw
    assert get(alice, p)["amount_captured"] == 100
    # an automatic payment is not capturable
    auto = alice.pay(account, 100).json
    r = capture(alice, auto)
    assert r.status == 409 and r.json["current_status"] == "succeeded"


def test_validation_is_not_stored(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 100)
    k = key()
    for body in ({"amount_to_capture": 0}, {"amount_to_capture": "1"}, {"final_capture": 1},
                 {"amount": 5}):
        r = capture(alice, p, body, idem=k)
        assert r.status == 400, (body, r)
    r = cancel(alice, p, {"cancellation_reason": "expired"}, idem=k)
    assert r.status == 400 and r.json["param"] == "cancellation_reason"
    missing = alice.post(f"/v1/payments/{p['id']}/capture", {})
    assert missing.status == 400 and missing.json["code"] == "idempotency_key_missing"
    assert capture(alice, {"id": "pay_0000000000000"}).status == 404
    bob = server.create_user("bob-capture")
    assert capture(bob, p).status == 404 and cancel(bob, p).status == 404
    assert capture(alice, p, idem=k).status == 200  # the key was released each time


def test_cancel(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    r = cancel(alice, p, {"cancellation_reason": "abandoned"})
    assert r.status == 200, r
    c = r.json
    assert (c["status"], c["amount_released"], c["amount_capturable"], c["cancellation_reason"]) \
        == ("canceled", 1000, 0, "abandoned")
    assert c["canceled_at"]
    assert books(alice, account) == {"object": "balance", "available": 0, "pending": 0,
                                     "currency": "USD"}
    assert len(events_of(alice, p, "payment.canceled")) == 1
    # cancel after a partial capture: succeeded with the rest released
    p2 = authorize(alice, account, 1000)
    assert capture(alice, p2, {"amount_to_capture": 400, "final_capture": False}).status == 200
    r = cancel(alice, p2)
    assert r.status == 200 and (r.json["status"], r.json["amount_captured"],
                                r.json["amount_released"]) == ("succeeded", 400, 600)
    listed = alice.get(f"/v1/accounts/{account['id']}/payments?status=canceled").json["data"]
    assert [x["id"] for x in listed] == [p["id"]]
    verify_ledger(server.db)


def test_refunds_apply_to_captured_only(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    assert capture(alice, p, {"amount_to_capture": 300, "final_capture": False}).status == 200
    r = alice.post(f"/v1/payments/{p['id']}/refunds", {"amount": 301}, idem=key())
    assert r.status == 409 and r.json["refundable_amount"] == 300, r
    r = alice.post(f"/v1/payments/{p['id']}/refunds", {"amount": 100}, idem=key())
    assert r.status == 201, r
    q = get(alice, p)
    assert q["status"] == "requires_capture" and q["refunded_amount"] == 100
    r = capture(alice, p)  # the rest: 700
    assert r.status == 200 and r.json["status"] == "partially_refunded", r
    holds_identity(r.json)
    canceled = authorize(alice, account, 50)
    cancel(alice, canceled)
    r = alice.post(f"/v1/payments/{canceled['id']}/refunds", {}, idem=key())
    assert r.status == 409 and r.json["refundable_amount"] == 0
    verify_ledger(server.db)


def test_too_many_captures(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 100)
    for _ in range(50):
        r = capture(alice, p, {"amount_to_capture": 1, "final_capture": False})
        assert r.status == 200, r
    r = capture(alice, p, {"amount_to_capture": 1, "final_capture": False})
    assert r.status == 409 and r.json["code"] == "too_many_captures", r
    # the rest can still be released
    r = cancel(alice, p)
    assert r.status == 200 and (r.json["amount_captured"], r.json["amount_released"]) == (50, 50)
    verify_ledger(server.db)


def test_orders_held_by_a_hold(server, alice):
    account = alice.create_account()
    order = alice.post("/v1/orders", {"external_order_id": key(), "amount": 500,
                                      "currency": "USD"}).json
    p = authorize(alice, account, 500, order_id=order["id"])
    o = alice.get(f"/v1/orders/{order['id']}").json
    assert o["status"] == "created"
    second = alice.pay(account, 500, order_id=order["id"])
    assert second.status == 409 and second.json["code"] == "duplicate_payment", second
    assert second.json["existing_payment_id"] == p["id"]
    # canceled with nothing captured: the order is free again
    assert cancel(alice, p).status == 200
    assert alice.get(f"/v1/orders/{order['id']}").json["status"] == "created"
    p2 = authorize(alice, account, 500, order_id=order["id"])
    assert capture(alice, p2, {"amount_to_capture": 100, "final_capture": False}).status == 200
    assert alice.get(f"/v1/orders/{order['id']}").json["status"] == "paid"
    verify_ledger(server.db)


def test_lost_capture_answer_is_resumed_once(server, alice):
    """tok_lostResponse: the processor captures and loses its answer (503, key in doubt); a
    retry with the same key asks again under the same processor key and captures once."""
    account = alice.create_account()
    p = authorize(alice, account, 1000, source="tok_lostResponse")
    # the authorization itself lost its answer first: a retry of the payment recorded it
    k = key()
    r = capture(alice, p, {"amount_to_capture": 400, "final_capture": False}, idem=k)
    assert r.status == 503 and r.json["code"] == "processor_unavailable", r
    assert r.header("Retry-After")
    r = capture(alice, p, {"amount_to_capture": 400, "final_capture": False}, idem=k)
    assert r.status == 200 and r.json["amount_captured"] == 400, r
    hold = server.sql(f"SELECT captured FROM processor_charges WHERE charge_id = "
                      f"'{p['processor_charge_id']}'")
    assert hold == 400
    verify_ledger(server.db)


def test_lost_authorization_is_recorded_by_a_retry(server, alice):
    account = alice.create_account()
    k = key()
    r = alice.pay(account, 700, source="tok_lostResponse", idem=k, capture_method="manual")
    assert r.status == 503, r
    r = alice.pay(account, 700, source="tok_lostResponse", idem=k, capture_method="manual")
    assert r.status == 201 and r.json["status"] == "requires_capture", r
    assert books(alice, account)["pending"] == 700


def race(fn_a, fn_b):
    barrier = threading.Barrier(2)

    def run(fn):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(run, fn_a), pool.submit(run, fn_b)
        return a.result(), b.result()


def test_capture_races_cancel(server, alice):
    account = alice.create_account()
    for _ in range(20):
        p = authorize(alice, account, 1000)
        c, x = race(lambda: capture(alice, p), lambda: cancel(alice, p))
        assert {c.status, x.status} <= {200, 409}, (c, x)
        q = get(alice, p)
        holds_identity(q)
        assert q["amount_capturable"] == 0
        # exactly one of them took the hold
        if c.status == 200 and c.json["amount_captured"] == 1000:
            assert x.status == 409 and x.json["code"] == "payment_not_capturable"
            assert (q["status"], q["amount_captured"]) == ("succeeded", 1000)
        else:
            assert x.status == 200 and c.status == 409
            assert (q["status"], q["amount_released"]) == ("canceled", 1000)
    verify_ledger(server.db)


def test_concurrent_partial_captures(server, alice):
    account = alice.create_account()
    for _ in range(5):
        p = authorize(alice, account, 120)
        with ThreadPoolExecutor(8) as pool:
            rs = list(pool.map(lambda _: capture(alice, p, {"amount_to_capture": 2,
                                                             "final_capture": False}),
                               range(60)))
        ok = [r for r in rs if r.status == 200]
        refused = [r for r in rs if r.status == 409]
        assert len(ok) + len(refused) == 60, [r for r in rs if r.status not in (200, 409)]
        assert len(ok) == 50 and all(r.json["code"] == "too_many_captures" for r in refused)
        q = get(alice, p)
        holds_identity(q)
        assert (q["amount_captured"], q["amount_capturable"]) == (100, 20)
    with ThreadPoolExecutor(8) as pool:
        p = authorize(alice, account, 10)
        rs = list(pool.map(lambda _: capture(alice, p, {"amount_to_capture": 3,
                                                         "final_capture": False}), range(8)))
    assert sum(r.status == 200 for r in rs) == 3, rs
    assert all(r.json["code"] == "amount_exceeds_capturable" for r in rs if r.status == 409)
    holds_identity(get(alice, p))
    verify_ledger(server.db)


def test_refund_races_capture(server, alice):
    account = alice.create_account()
    for _ in range(20):
        p = authorize(alice, account, 1000)
        assert capture(alice, p, {"amount_to_capture": 500, "final_capture": False}).status == 200
        r, c = race(lambda: alice.post(f"/v1/payments/{p['id']}/refunds", {"amount": 500},
                                       idem=key()),
                    lambda: capture(alice, p))
        assert r.status == 201 and c.status == 200, (r, c)
        q = get(alice, p)
        holds_identity(q)
        assert (q["status"], q["amount_captured"], q["refunded_amount"]) == (
            "partially_refunded", 1000, 500)
    verify_ledger(server.db)


def test_processor_keys_are_one_per_operation(server, alice):
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    for n in (100, 200):
        assert capture(alice, p, {"amount_to_capture": n, "final_capture": False}).status == 200
    assert cancel(alice, p).status == 200
    charge = p["processor_charge_id"]
    assert server.sql(f"SELECT COUNT(DISTINCT processor_key) FROM processor_captures "
                      f"WHERE charge_id = '{charge}'") == 3
    assert server.sql(f"SELECT captured + released FROM processor_charges "
                      f"WHERE charge_id = '{charge}'") == 1000


def test_expiry_releases_and_cancels(fresh_server):
    s = fresh_server(["--authorization-ttl", "2s", "--recovery-interval", "200ms"])
    u = s.create_user("exp", rate_limit="100000/s")
    account = u.create_account()
    for _ in range(10):
        p = authorize(u, account, 1000)
        # a late capture races the expiry: one of them takes the hold, never both
        time.sleep(1.9)
        r = capture(u, p)
        deadline = time.time() + 10
        while get(u, p)["status"] == "requires_capture" and time.time() < deadline:
            time.sleep(0.1)
        q = get(u, p)
        holds_identity(q)
        if r.status == 200:
            assert (q["status"], q["amount_captured"]) == ("succeeded", 1000)
        else:
            assert r.status == 409 and r.json["code"] == "payment_not_capturable", r
            assert (q["status"], q["cancellation_reason"], q["amount_released"]) == (
                "canceled", "expired", 1000)
    assert u.get(f"/v1/accounts/{account['id']}/balance").json["pending"] == 0
    p = authorize(u, account, 300)
    deadline = time.time() + 10
    while get(u, p)["status"] == "requires_capture" and time.time() < deadline:
        time.sleep(0.1)
    q = get(u, p)
    assert (q["status"], q["cancellation_reason"]) == ("canceled", "expired")
    assert len(events_of(u, p, "payment.canceled")) == 1
    verify_ledger(s.db)


def test_ledger_verify_sees_a_broken_hold(fresh_server):
    s = fresh_server()
    u = s.create_user("broken")
    account = u.create_account()
    p = authorize(u, account, 1000)
    assert capture(u, p, {"amount_to_capture": 100, "final_capture": False}).status == 200
    s.stop()
    from conftest import Payd  # noqa: F401 (the same database, read offline)
    s.execute(f"UPDATE payments SET amount_capturable = 901 WHERE id = "
              f"(SELECT id FROM payments WHERE capture_method = 'manual')")
    out = subprocess.run([PAYD, "ledger", "verify", "--db", s.db], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1, out
    kinds = {v["kind"] for v in json.loads(out.stdout)["violations"]}
    assert "capture_mismatch" in kinds, out.stdout


def payctl(user, *args):
    from conftest import PAYCTL
    env = dict(os.environ, PAYD_URL=user.server.url, PAYD_API_KEY=user.key)
    return subprocess.run([PAYCTL, *args], capture_output=True, text=True, env=env, timeout=60)


def test_payctl_capture_and_cancel(server, alice):
    account = alice.create_account()
    out = payctl(alice, "payments", "create", "--account", account["id"], "--amount", "900",
                 "--currency", "USD", "--source", "tok_visa", "--capture-method", "manual")
    assert out.returncode == 0, out.stderr
    p = json.loads(out.stdout)
    assert p["status"] == "requires_capture"
    # without --final the rest stays capturable
    out = payctl(alice, "payments", "capture", p["id"], "--amount", "200")
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["amount_captured"], json.loads(out.stdout)["status"]) == (
        200, "requires_capture")
    out = payctl(alice, "payments", "capture", p["id"], "--amount", "100", "--final")
    assert out.returncode == 0, out.stderr
    q = json.loads(out.stdout)
    assert (q["status"], q["amount_captured"], q["amount_released"]) == ("succeeded", 300, 600)
    p2 = authorize(alice, account, 50)
    out = payctl(alice, "payments", "cancel", p2["id"], "--reason", "duplicate")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["cancellation_reason"] == "duplicate"
    refused = payctl(alice, "payments", "cancel", p2["id"])
    assert refused.returncode == 1 and "payment_not_capturable" in refused.stdout + refused.stderr
    out = payctl(alice, "payments", "list", "--account", account["id"], "--status", "canceled")
    assert out.returncode == 0 and [json.loads(l)["id"] for l in out.stdout.splitlines()] == [
        p2["id"]]


def test_ledger_verify_sees_a_capture_without_its_record(fresh_server):
    """A capture the processor made that no payment_captures row carries, and a capture entry
    without its row: both reported (docs/ledger.md, "Verify")."""
    s = fresh_server()
    u = s.create_user("planted")
    account = u.create_account()
    p = authorize(u, account, 1000)
    assert capture(u, p, {"amount_to_capture": 100, "final_capture": False}).status == 200
    assert verify_ledger(s.db, settle_s=0)["holds_in_doubt"] == 0
    s.stop()
    s.execute("DELETE FROM payment_captures")
    out = subprocess.run([PAYD, "ledger", "verify", "--db", s.db], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1, out
    found = {(v["kind"], v.get("type")) for v in json.loads(out.stdout)["violations"]}
    assert ("processor_record_without_entry", "capture") in found, out.stdout
    assert ("source_entries", "capture") in found, out.stdout


def test_expiry_on_two_nodes_releases_each_hold_once(fresh_server, tmp_path):
    """Two nodes on one PostgreSQL database run the expiry at once: every hold is released
    once at the processor and canceled once, whichever node got there first."""
    from conftest import BACKEND, Payd
    if BACKEND != "postgres":
        pytest.skip("one serve owns a SQLite file: several nodes need PostgreSQL")
    args = ["--authorization-ttl", "1s", "--recovery-interval", "100ms"]
    a = fresh_server(args)
    other = Payd(str(tmp_path / "b"), args=args, db=a.db)
    os.makedirs(other.tmpdir, exist_ok=True)
    other.start()
    try:
        u = a.create_user("two-nodes", rate_limit="100000/s")
        account = u.create_account()
        holds = [authorize(u, account, 100 + i) for i in range(20)]
        deadline = time.time() + 20
        while time.time() < deadline and a.sql(
                "SELECT COUNT(*) FROM payments WHERE status = 'requires_capture'") > 0:
            time.sleep(0.2)
        for p in holds:
            q = get(u, p)
            assert (q["status"], q["cancellation_reason"], q["amount_released"]) == (
                "canceled", "expired", p["amount"]), q
        assert a.sql("SELECT COUNT(*) FROM payment_captures WHERE kind = 'expiry' "
                     "AND status = 'succeeded'") == 20
        assert a.sql("SELECT COUNT(*) FROM processor_captures") == 20
        assert a.sql("SELECT COUNT(*) FROM events WHERE type = 'payment.canceled'") == 20
        verify_ledger(a.db)
    finally:
        other.stop()


def test_volume_counts_what_was_captured(server, alice):
    """The payment volume (§16) counts a manual payment once, at its first capture, with what
    was captured; a hold alone or a cancel adds nothing."""
    account = alice.create_account()
    p = authorize(alice, account, 1000)
    held = authorize(alice, account, 500)
    total = lambda: alice.get(f"/v1/accounts/{account['id']}/payments/stats").json["total"]  # noqa: E731
    assert (total()["count"], total()["amount"]) == (0, 0)
    capture(alice, p, {"amount_to_capture": 200, "final_capture": False})
    capture(alice, p, {"amount_to_capture": 300})
    cancel(alice, held)
    assert (total()["count"], total()["amount"]) == (1, 500)


@pytest.mark.parametrize("point", ["before-capture", "after-capture"])
def test_crash_around_the_processor_call_is_finished_once(fresh_server, point):
    """A node dies after the capture was reserved, before or after the processor captured: the
    recoverer finishes it under the same processor key (one capture at the processor), and the
    client's late retry gets the recovered answer."""
    s = fresh_server(env={"PAYD_FAULT": point})
    u = s.create_user("crash", rate_limit="100000/s")
    account = u.create_account()
    p = authorize(u, account, 1000)
    k = key()
    with pytest.raises(Exception):
        capture(u, p, {"amount_to_capture": 250, "final_capture": False}, idem=k)
    s.proc.wait(10)
    s.log.close()
    assert s.sql("SELECT COUNT(*) FROM payment_captures WHERE status = 'pending'") == 1
    assert s.sql("SELECT COUNT(*) FROM processor_captures") == (1 if point == "after-capture"
                                                                  else 0)
    s.env.pop("PAYD_FAULT")
    s.args = ["--idempotency-lock-timeout", "1s", "--processor-timeout", "500ms",
              "--recovery-interval", "200ms"]
    s.start(s.port)
    deadline = time.time() + 10
    while time.time() < deadline and s.sql(
            "SELECT COUNT(*) FROM payment_captures WHERE status = 'succeeded'") == 0:
        time.sleep(0.2)
    assert s.sql("SELECT COUNT(*) FROM processor_captures") == 1
    r = capture(u, p, {"amount_to_capture": 250, "final_capture": False}, idem=k)
    assert r.status == 200 and r.header("Idempotent-Replayed") == "true", r
    assert r.json["amount_captured"] == 250 and get(u, p)["amount_captured"] == 250
    verify_ledger(s.db)
