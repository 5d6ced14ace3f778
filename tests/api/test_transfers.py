"""Transfers (§7): the flow table. biz_seq dedupes (one transfer however many race), a low
balance is a recorded failure, and random transfers under concurrency keep the books whole."""

import os
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import Payd


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the random-transfer race makes ~450 requests for one user: lift the rate limit
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def seq():
    return "seq-" + os.urandom(6).hex()


def funded(user, amount, currency="USD"):
    account = user.create_account(currency)
    if amount:
        r = user.pay(account, amount)
        assert r.status == 201, r
    return account


def transfer(user, src, dst, amount, biz_seq=None, currency="USD", **extra):
    body = {"biz_seq": biz_seq or seq(), "from_account": src["id"], "to_account": dst["id"],
            "amount": amount, "currency": currency, **extra}
    return user.post("/v1/transfers", body)


def balance(user, account):
    return user.get(f"/v1/accounts/{account['id']}").json["balance"]


def test_transfer_and_reads(alice):
    a, b = funded(alice, 1000), funded(alice, 0)
    r = transfer(alice, a, b, 250, biz_seq="inv-1", description="rent")
    assert r.status == 201, r
    t = r.json
    assert t["id"].startswith("tr_") and t["object"] == "transfer"
    assert (t["biz_seq"], t["from_account"], t["to_account"], t["amount"], t["currency"],
            t["status"]) == ("inv-1", a["id"], b["id"], 250, "USD", "succeeded")
    assert r.header("Location") == f"/v1/transfers/{t['id']}"
    assert (balance(alice, a), balance(alice, b)) == (750, 250)
    assert alice.get(f"/v1/transfers/{t['id']}").json == t
    assert alice.get("/v1/transfers/by-biz-seq/inv-1").json == t
    assert alice.get("/v1/transfers/by-biz-seq/never").status == 404
    assert alice.get("/v1/transfers/tr_0000000000000").status == 404
    # both directions are in each account's list
    assert [x["id"] for x in alice.get(f"/v1/accounts/{a['id']}/transfers").json["data"]] == \
        [t["id"]]
    back = transfer(alice, b, a, 50)
    assert back.status == 201
    listed = alice.get(f"/v1/accounts/{b['id']}/transfers?limit=1").json
    assert [x["id"] for x in listed["data"]] == [back.json["id"]] and listed["has_more"]
    page2 = alice.get(f"/v1/accounts/{b['id']}/transfers?limit=1&cursor={listed['next_cursor']}")
    assert [x["id"] for x in page2.json["data"]] == [t["id"]] and not page2.json["has_more"]


def test_same_biz_seq_replays_and_different_body_is_refused(alice):
    a, b = funded(alice, 1000), funded(alice, 0)
    first = transfer(alice, a, b, 100, biz_seq="dup-seq")
    again = transfer(alice, a, b, 100, biz_seq="dup-seq")
    assert first.status == again.status == 201
    assert again.raw == first.raw and again.header("Idempotent-Replayed") == "true"
    assert first.header("Idempotent-Replayed") is None
    other = transfer(alice, a, b, 101, biz_seq="dup-seq")
    assert other.status == 422 and other.json["code"] == "biz_seq_reused", other
    assert (balance(alice, a), balance(alice, b)) == (900, 100)


def test_low_balance_is_a_recorded_failure(alice):
    a, b = funded(alice, 100), funded(alice, 0)
    r = transfer(alice, a, b, 101, biz_seq="too-much")
    assert r.status == 409 and r.json["code"] == "insufficient_funds", r
    assert (balance(alice, a), balance(alice, b)) == (100, 0)
    recorded = alice.get("/v1/transfers/by-biz-seq/too-much")
    assert recorded.status == 200 and recorded.json["status"] == "failed"
    # the failure is the record: the same request replays it, even once funds exist
    assert alice.pay(a, 50).status == 201
    again = transfer(alice, a, b, 101, biz_seq="too-much")
    assert again.status == 409 and again.raw == r.raw
    assert again.header("Idempotent-Replayed") == "true"
    assert (balance(alice, a), balance(alice, b)) == (150, 0)


def test_validation_is_not_recorded(alice, bob):
    a, b = funded(alice, 500), funded(alice, 0)
    eur = funded(alice, 0, "EUR")
    foreign = bob.create_account()
    cases = [
        ({"from_account": a["id"], "to_account": a["id"]}, 400, "to_account"),
        ({"from_account": a["id"], "to_account": eur["id"]}, 400, "currency"),
        ({"from_account": a["id"], "to_account": foreign["id"]}, 404, None),
        ({"from_account": foreign["id"], "to_account": a["id"]}, 404, None),
        ({"from_account": a["id"], "to_account": "acct_nope"}, 404, None),
        ({"from_account": a["id"], "to_account": b["id"], "amount": 0}, 400, "amount"),
        ({"from_account": a["id"], "to_account": b["id"], "biz_seq": ""}, 400, "biz_seq"),
        ({"from_account": a["id"], "to_account": b["id"], "biz_seq": "x" * 65}, 400, "biz_seq"),
        ({"from_account": a["id"], "to_account": b["id"], "currency": "EUR"}, 400, "currency"),
    ]
    for over, status, param in cases:
        body = {"biz_seq": "fix-me", "amount": 10, "currency": "USD", **over}
        r = alice.post("/v1/transfers", body)
        assert r.status == status, (over, r)
        if param:
            assert r.json["param"] == param, (over, r)
    assert alice.get("/v1/transfers/by-biz-seq/fix-me").status == 404
    ok = transfer(alice, a, b, 10, biz_seq="fix-me")  # the corrected request may use it
    assert ok.status == 201, ok
    assert bob.get(f"/v1/transfers/{ok.json['id']}").status == 404
    assert bob.get("/v1/transfers/by-biz-seq/fix-me").status == 404
    assert bob.get(f"/v1/accounts/{a['id']}/transfers").status == 404
    r = alice.post("/v1/transfers", {"biz_seq": "k", "from_account": a["id"],
                                     "to_account": b["id"], "amount": 1, "currency": "USD"},
                   headers={"Idempotency-Key": "ignored"})
    assert r.status == 201


def test_same_biz_seq_from_16_threads_is_one_transfer(alice):
    a, b = funded(alice, 1000), funded(alice, 0)
    body = {"biz_seq": seq(), "from_account": a["id"], "to_account": b["id"], "amount": 70,
            "currency": "USD"}
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: alice.post("/v1/transfers", body), range(16)))
    assert all(r.status == 201 for r in answers), answers
    fresh = [r for r in answers if r.header("Idempotent-Replayed") is None]
    assert len(fresh) == 1, answers
    assert all(r.raw == fresh[0].raw for r in answers)
    assert all(r.header("Idempotent-Replayed") == "true" for r in answers if r is not fresh[0])
    assert (balance(alice, a), balance(alice, b)) == (930, 70)
    assert len(alice.get(f"/v1/accounts/{a['id']}/transfers").json["data"]) == 1


def test_random_transfers_keep_the_books(server):
    user = server.create_user("shuffler")
    accounts = [funded(user, 10_000) for _ in range(4)]
    total = sum(balance(user, a) for a in accounts)

    def worker(n):
        rng = random.Random(n)
        statuses = []
        for _ in range(25):
            src, dst = rng.sample(accounts, 2)
            r = transfer(user, src, dst, rng.randint(1, 6000))
            statuses.append((r.status, r.json["code"] if r.status != 201 else None))
        return statuses

    # 16 clients on 4 accounts: PostgreSQL's writers batch transfers whose account locks cross,
    # so batches deadlock, and every answer must still be a 201 or a 409
    with ThreadPoolExecutor(16) as pool:
        results = [s for part in pool.map(worker, range(16)) for s in part]
    assert len(results) == 400
    odd = [s for s in results if s not in ((201, None), (409, "insufficient_funds"))]
    assert not odd, odd
    balances = [balance(user, a) for a in accounts]
    assert sum(balances) == total
    assert all(b >= 0 for b in balances), balances
    # each balance is exactly its payments plus what the recorded transfers moved
    moved = {a["id"]: 10_000 for a in accounts}
    for a in accounts:
        cursor, seen = None, set()
        while True:
            q = f"/v1/accounts/{a['id']}/transfers?limit=100" + (f"&cursor={cursor}" if cursor
                                                                  else "")
            page = user.get(q).json
            for t in page["data"]:
                if t["status"] == "succeeded" and t["id"] not in seen:
                    seen.add(t["id"])
                    sign = -1 if t["from_account"] == a["id"] else 1
                    moved[a["id"]] += sign * t["amount"]
            if not page["has_more"]:
                break
            cursor = page["next_cursor"]
    assert [moved[a["id"]] for a in accounts] == balances
