"""Refunds (§6): partial and full refunds, the stored refusals, racing refunds, and a refund left
in doubt by the processor that a retry (or the recoverer) finishes without refunding twice."""

import json
import os
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import PAYD, Payd, free_port


def key():
    return os.urandom(8).hex()


def funded(user, amount, **extra):
    account = user.create_account()
    r = user.pay(account, amount, **extra)
    assert r.status == 201, r
    return account, r.json


def refund(user, payment, body=None, idem=None):
    return user.post(f"/v1/payments/{payment['id']}/refunds", body or {}, idem=idem or key())


def balance(user, account):
    return user.get(f"/v1/accounts/{account['id']}").json["balance"]


def test_partial_then_rest(alice):
    account, pay = funded(alice, 1000)
    r = refund(alice, pay, {"amount": 300, "reason": "requested_by_customer"})
    assert r.status == 201, r
    re = r.json
    assert re["id"].startswith("re_") and re["object"] == "refund"
    assert (re["payment_id"], re["amount"], re["reason"], re["status"]) == (
        pay["id"], 300, "requested_by_customer", "succeeded")
    p = alice.get(f"/v1/payments/{pay['id']}").json
    assert (p["status"], p["refunded_amount"]) == ("partially_refunded", 300)
    assert balance(alice, account) == 700

    rest = refund(alice, pay)  # no amount: all that is left
    assert rest.status == 201 and rest.json["amount"] == 700 and rest.json["reason"] is None
    p = alice.get(f"/v1/payments/{pay['id']}").json
    assert (p["status"], p["refunded_amount"]) == ("refunded", 1000)
    assert balance(alice, account) == 0

    listed = alice.get(f"/v1/payments/{pay['id']}/refunds").json
    assert [x["id"] for x in listed["data"]] == [rest.json["id"], re["id"]]
    assert listed["data"][1] == re

    more = refund(alice, pay, {"amount": 1})
    assert more.status == 409 and more.json["code"] == "amount_exceeds_refundable", more
    assert more.json["refundable_amount"] == 0
    # status filter on the account's payments sees the new status
    refunded = alice.get(f"/v1/accounts/{account['id']}/payments?status=refunded").json["data"]
    assert [x["id"] for x in refunded] == [pay["id"]]


def test_refusals_are_stored(alice):
    account, pay = funded(alice, 500)
    k = key()
    over = refund(alice, pay, {"amount": 501}, idem=k)
    assert over.status == 409 and over.json["code"] == "amount_exceeds_refundable"
    assert over.json["refundable_amount"] == 500
    again = refund(alice, pay, {"amount": 501}, idem=k)
    assert again.status == 409 and again.header("Idempotent-Replayed") == "true"
    assert again.raw == over.raw

    declined = alice.pay(account, 500, source="tok_chargeDeclined")
    assert declined.status == 402
    failed = declined.json["payment"]
    r = refund(alice, failed)
    assert r.status == 409 and r.json["code"] == "payment_not_refundable", r


def test_insufficient_funds(alice):
    account, pay = funded(alice, 1000)
    other = alice.create_account()
    t = alice.post("/v1/transfers", {"biz_seq": key(), "from_account": account["id"],
                                     "to_account": other["id"], "amount": 800, "currency": "USD"})
    assert t.status == 201, t
    r = refund(alice, pay, {"amount": 500})
    assert r.status == 409 and r.json["code"] == "insufficient_funds", r
    p = alice.get(f"/v1/payments/{pay['id']}").json
    assert (p["status"], p["refunded_amount"]) == ("succeeded", 0)
    assert balance(alice, account) == 200
    assert refund(alice, pay, {"amount": 200}).status == 201
    assert balance(alice, account) == 0


def test_validation_and_ownership(alice, bob):
    _, pay = funded(alice, 100)
    path = f"/v1/payments/{pay['id']}/refunds"
    r = alice.post(path, {})
    assert r.status == 400 and r.json["code"] == "idempotency_key_missing"
    for body, code, param in [({"amount": 0}, "invalid_parameter", "amount"),
                              ({"reason": "bored"}, "invalid_parameter", "reason"),
                              ({"extra": 1}, "unknown_parameter", "extra")]:
        r = alice.post(path, body, idem="v-key")  # released each time: the key is reusable
        assert (r.status, r.json["code"], r.json["param"]) == (400, code, param), r
    assert bob.post(path, {}, idem=key()).status == 404
    assert bob.get(path).status == 404
    assert alice.post("/v1/payments/pay_0000000000000/refunds", {}, idem=key()).status == 404
    assert alice.get(f"/v1/payments/{pay['id']}").json["refunded_amount"] == 0
    ok = alice.post(path, {}, idem="v-key")
    assert ok.status == 201 and ok.json["amount"] == 100


def test_replay(alice):
    _, pay = funded(alice, 900)
    k = key()
    first = refund(alice, pay, {"amount": 400}, idem=k)
    second = refund(alice, pay, {"amount": 400}, idem=k)
    assert first.status == second.status == 201
    assert second.raw == first.raw and second.header("Idempotent-Replayed") == "true"
    other = refund(alice, pay, {"amount": 401}, idem=k)
    assert other.status == 422 and other.json["code"] == "idempotency_key_reused"
    assert alice.get(f"/v1/payments/{pay['id']}").json["refunded_amount"] == 400


def test_full_refund_refunds_the_order(alice):
    account = alice.create_account()
    order = alice.post("/v1/orders", {"external_order_id": key(), "amount": 600,
                                      "currency": "USD"}).json
    pay = alice.pay(account, 600, order_id=order["id"]).json
    assert refund(alice, pay, {"amount": 100}).status == 201
    assert alice.get(f"/v1/orders/{order['id']}").json["status"] == "paid"
    assert refund(alice, pay).status == 201
    o = alice.get(f"/v1/orders/{order['id']}").json
    assert (o["status"], o["version"]) == ("refunded", 3)


def test_concurrent_full_refunds_one_wins(server):
    user = server.create_user("racer")  # a rate-limit bucket of its own
    account, pay = funded(user, 5000)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: refund(user, pay), range(10)))
    statuses = sorted(r.status for r in answers)
    assert statuses == [201] + [409] * 9, answers
    for r in answers:
        if r.status == 409:
            assert r.json["code"] == "amount_exceeds_refundable", r
            assert r.json["refundable_amount"] == 0
    assert balance(user, account) == 0
    p = user.get(f"/v1/payments/{pay['id']}").json
    assert (p["status"], p["refunded_amount"]) == ("refunded", 5000)
    # the losers never reached the processor: one refund there
    charge = pay["processor_charge_id"]
    assert charge.replace("_", "").isalnum()
    assert server.sql(f"SELECT COUNT(*) FROM processor_refunds WHERE charge_id = '{charge}'") == 1


def test_concurrent_partial_refunds_never_exceed(server):
    user = server.create_user("partial-racer")
    account, pay = funded(user, 1000)
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: refund(user, pay, {"amount": 300}), range(12)))
    assert sorted(r.status for r in answers) == [201] * 3 + [409] * 9, answers
    assert all(r.json["refundable_amount"] == 100 for r in answers if r.status == 409)
    assert user.get(f"/v1/payments/{pay['id']}").json["refunded_amount"] == 900
    assert balance(user, account) == 100


# ---- a processor that loses its answers: the refund stays pending, a retry finishes it ----

def sim_stats(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def lossy_processor(tmp_path):
    """payd processor-sim that performs every new charge or refund, then loses the answer."""
    import subprocess
    port = free_port()
    log = open(tmp_path / "sim.log", "ab")
    proc = subprocess.Popen([PAYD, "processor-sim", "--listen", f"127.0.0.1:{port}",
                             "--db", str(tmp_path / "sim.db"), "--fail-after", "1",
                             "--lose-by", "500"],
                            stdout=log, stderr=log)
    deadline = time.time() + 10
    while True:
        try:
            sim_stats(port)
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("processor-sim did not start")
            time.sleep(0.05)
    yield port
    proc.terminate()
    proc.wait(10)
    log.close()


def test_in_doubt_refund_is_finished_by_a_retry(fresh_server, lossy_processor):
    s = fresh_server(["--live-test-tokens", "true", "--processor", f"http://127.0.0.1:{lossy_processor}",
                      "--processor-timeout", "2s"])
    user = s.create_user("doubt")
    account = user.create_account()
    k = key()
    assert user.pay(account, 800, idem=k).status == 503
    pay = user.pay(account, 800, idem=k)
    assert pay.status == 201, pay
    pay = pay.json

    rk = key()
    first = refund(user, pay, {"amount": 300}, idem=rk)
    assert first.status == 503 and first.json["code"] == "processor_unavailable", first
    # held while in doubt: the money is reserved, so no other refund can spend it
    assert balance(user, account) == 500
    assert user.get(f"/v1/payments/{pay['id']}").json["refunded_amount"] == 300
    over = refund(user, pay, {"amount": 600})
    assert over.status == 409 and over.json["refundable_amount"] == 500, over
    retry = refund(user, pay, {"amount": 300}, idem=rk)
    assert retry.status == 201, retry
    assert retry.json["amount"] == 300 and retry.json["status"] == "succeeded"
    assert balance(user, account) == 500
    listed = user.get(f"/v1/payments/{pay['id']}/refunds").json["data"]
    assert [x["id"] for x in listed] == [retry.json["id"]]
    stats = sim_stats(lossy_processor)
    assert stats["refunds"] == 1 and stats["deduplicated"] >= 1, stats


def test_in_doubt_refund_is_finished_by_the_recoverer(fresh_server, lossy_processor):
    s = fresh_server(["--live-test-tokens", "true", "--processor", f"http://127.0.0.1:{lossy_processor}",
                      "--processor-timeout", "500ms", "--idempotency-lock-timeout", "1s",
                      "--recovery-interval", "200ms"])
    user = s.create_user("gone")
    account = user.create_account()
    k = key()
    assert user.pay(account, 400, idem=k).status == 503
    pay = user.pay(account, 400, idem=k).json
    first = refund(user, pay, {"amount": 400})
    assert first.status == 503, first
    held = user.get(f"/v1/payments/{pay['id']}/refunds").json["data"]
    assert [x["status"] for x in held] == ["pending"] and balance(user, account) == 0
    deadline = time.time() + 15
    while time.time() < deadline:
        listed = user.get(f"/v1/payments/{pay['id']}/refunds").json["data"]
        if listed and listed[0]["status"] == "succeeded":
            break
        time.sleep(0.2)
    assert listed and listed[0]["status"] == "succeeded", listed
    assert len(listed) == 1 and balance(user, account) == 0
    assert sim_stats(lossy_processor)["refunds"] == 1


def test_refund_racing_a_transfer_for_the_same_money(server):
    user = server.create_user("refund-vs-transfer")
    sink = user.create_account()
    for _ in range(10):
        account, pay = funded(user, 1000)
        body = {"biz_seq": key(), "from_account": account["id"], "to_account": sink["id"],
                "amount": 1000, "currency": "USD"}
        with ThreadPoolExecutor(2) as pool:
            rk = key()
            rf = pool.submit(refund, user, pay, None, rk)
            tr = pool.submit(user.post, "/v1/transfers", body)
            rf, tr = rf.result(), tr.result()
        # exactly one of them gets the money; the other is refused and changes nothing
        assert sorted([rf.status, tr.status]) == [201, 409], (rf, tr)
        loser = rf if rf.status == 409 else tr
        assert loser.json["code"] == "insufficient_funds", loser
        assert balance(user, account) == 0
        p = user.get(f"/v1/payments/{pay['id']}").json
        assert p["refunded_amount"] == (1000 if rf.status == 201 else 0)
        assert p["status"] == ("refunded" if rf.status == 201 else "succeeded")
        again = refund(user, pay, None, rk)  # the refund's answer, won or lost, is stored
        assert again.status == rf.status and again.raw == rf.raw
        assert again.header("Idempotent-Replayed") == "true"


def test_a_builtin_refund_needs_no_worker(fresh_server):
    """On the builtin processor a refund holds no thread while its processor record commits: with
    the one worker held by a slow charge (tok_slow answers after 2 s), a refund is answered while
    that charge is still in flight."""
    s = fresh_server(["--workers", "1"])
    user = s.create_user()
    account, pay = funded(user, 1000)
    with ThreadPoolExecutor(1) as pool:
        slow = pool.submit(user.pay, account, 500, "tok_slow", key())
        time.sleep(0.3)  # the slow charge takes the worker
        r = refund(user, pay, {"amount": 100})
        assert r.status == 201 and r.json["status"] == "succeeded", r
        assert not slow.done(), "the refund waited for the worker the slow charge held"
        assert slow.result().status == 201
