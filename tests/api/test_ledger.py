"""The ledger (§18, docs/ledger.md): every charge, refund and transfer writes a journal entry whose
lines sum to zero, the account's books equal the sums of their lines, and the balance
transactions are a list (§4) with filters, each user seeing only their own."""

import json
import os
import subprocess
from urllib.parse import quote

import pytest

from conftest import PAYD, Payd, verify_ledger


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def balance(user, account):
    r = user.get(f"/v1/accounts/{account['id']}/balance")
    assert r.status == 200, r
    return r.json


def txns(user, query=""):
    r = user.get(f"/v1/balance_transactions{query}")
    assert r.status == 200, r
    return r.json


def entry_sums(server):
    """Each entry's sum per currency, from the database itself: all of them must be 0."""
    return server.sql("SELECT COUNT(*) FROM (SELECT entry_id, currency FROM journal_lines "
                      "GROUP BY entry_id, currency HAVING SUM(amount) <> 0) t")


def book_mismatches(server):
    return server.sql(
        "SELECT COUNT(*) FROM accounts a WHERE a.balance <> COALESCE((SELECT SUM(amount) "
        "FROM journal_lines l WHERE l.account_id = a.id AND l.book = 'available'), 0) "
        "OR a.pending <> COALESCE((SELECT SUM(amount) FROM journal_lines l "
        "WHERE l.account_id = a.id AND l.book = 'pending'), 0)")


def test_charge_refund_transfer_post_balanced_entries(server, alice):
    a, b = alice.create_account(), alice.create_account()
    assert balance(alice, a) == {"object": "balance", "livemode": True, "available": 0,
                                 "pending": 0, "currency": "USD"}
    pay = alice.pay(a, 1000)
    assert pay.status == 201, pay
    pay = pay.json
    assert balance(alice, a)["available"] == 1000
    charge = txns(alice, f"?source={pay['id']}")["data"]
    assert len(charge) == 1
    t = charge[0]
    assert t["id"].startswith("txn_") and t["object"] == "balance_transaction"
    assert (t["account_id"], t["amount"], t["currency"], t["type"], t["source"]) == \
        (a["id"], 1000, "USD", "charge", pay["id"])
    assert t["entry_id"].startswith("je_") and t["created_at"]
    assert alice.get(f"/v1/balance_transactions/{t['id']}").json == t

    r = alice.post(f"/v1/payments/{pay['id']}/refunds", {"amount": 300}, idem=os.urandom(8).hex())
    assert r.status == 201, r
    refund = txns(alice, f"?source={r.json['id']}")["data"]
    assert [(x["amount"], x["type"], x["account_id"]) for x in refund] == \
        [(-300, "refund", a["id"])]
    assert balance(alice, a)["available"] == 700

    r = alice.post("/v1/transfers", {"biz_seq": "led-1", "from_account": a["id"],
                                     "to_account": b["id"], "amount": 200, "currency": "USD"})
    assert r.status == 201, r
    moved = txns(alice, f"?source={r.json['id']}")["data"]
    assert sorted((x["account_id"], x["amount"]) for x in moved) == \
        sorted([(a["id"], -200), (b["id"], 200)])
    assert moved[0]["entry_id"] == moved[1]["entry_id"]
    assert sum(x["amount"] for x in moved) == 0
    assert (balance(alice, a)["available"], balance(alice, b)["available"]) == (500, 200)
    # the account's balance field is its available book
    assert alice.get(f"/v1/accounts/{a['id']}").json["balance"] == 500

    # a refused transfer and a declined charge move nothing and write nothing
    transfers_before = len(txns(alice, "?type=transfer&limit=100")["data"])
    r = alice.post("/v1/transfers", {"biz_seq": "led-2", "from_account": b["id"],
                                     "to_account": a["id"], "amount": 5000, "currency": "USD"})
    assert r.status == 409, r
    assert len(txns(alice, "?type=transfer&limit=100")["data"]) == transfers_before
    declined = alice.pay(a, 50, source="tok_chargeDeclined")
    assert declined.status == 402
    assert txns(alice, f"?source={declined.json['payment']['id']}")["data"] == []

    # every entry, system lines included, sums to zero; every book equals its lines
    assert entry_sums(server) == 0
    assert book_mismatches(server) == 0
    # the charge's entry has its processor line, which is no balance transaction
    assert server.sql("SELECT COUNT(*) FROM journal_lines WHERE book = 'processor'") >= 2


def test_list_pages_and_filters(server):
    carol = server.create_user("carol")
    a, b = carol.create_account(), carol.create_account()
    for i in range(5):
        assert carol.pay(a, 100 + i).status == 201
    for i in range(3):
        r = carol.post("/v1/transfers", {"biz_seq": f"p-{i}", "from_account": a["id"],
                                         "to_account": b["id"], "amount": 10, "currency": "USD"})
        assert r.status == 201, r
    everything = txns(carol, "?limit=100")["data"]
    assert len(everything) == 5 + 2 * 3
    keys = [(x["created_at"], x["id"]) for x in everything]
    assert keys == sorted(keys, reverse=True)  # newest first, id breaks ties
    # keyset pages: no item repeated or skipped, and prev_cursor goes back
    seen, page = [], txns(carol, "?limit=4")
    while True:
        seen += [x["id"] for x in page["data"]]
        if not page["has_more"]:
            break
        assert page["next_cursor"]
        nxt = txns(carol, f"?limit=4&cursor={page['next_cursor']}")
        back = txns(carol, f"?limit=4&cursor={nxt['prev_cursor']}")
        assert [x["id"] for x in back["data"]] == [x["id"] for x in page["data"]]
        page = nxt
    assert seen == [x["id"] for x in everything]
    # filters
    only_b = txns(carol, f"?account_id={b['id']}&limit=100")["data"]
    assert [x["amount"] for x in only_b] == [10, 10, 10]
    assert {x["account_id"] for x in only_b} == {b["id"]}
    charges = txns(carol, "?type=charge&limit=100")["data"]
    assert len(charges) == 5 and {x["type"] for x in charges} == {"charge"}
    both = txns(carol, f"?account_id={a['id']}&type=transfer&limit=100")["data"]
    assert [x["amount"] for x in both] == [-10, -10, -10]
    middle = everything[5]["created_at"]
    newer = txns(carol, f"?created_gte={quote(middle)}&limit=100")["data"]
    older = txns(carol, f"?created_lt={quote(middle)}&limit=100")["data"]
    assert len(newer) + len(older) == len(everything)
    assert all(x["created_at"] >= middle for x in newer)
    assert all(x["created_at"] < middle for x in older)
    # a filtered list's cursor keeps its filter: pages of one account stay on it
    page = txns(carol, f"?account_id={a['id']}&limit=3")
    assert page["has_more"]
    nxt = txns(carol, f"?account_id={a['id']}&limit=3&cursor={page['next_cursor']}")
    assert {x["account_id"] for x in nxt["data"]} == {a["id"]}
    link = carol.get(f"/v1/balance_transactions?account_id={a['id']}&limit=3").header("Link")
    assert f"account_id={a['id']}" in link and 'rel="next"' in link
    # ...and another filter's list refuses it
    r = carol.get(f"/v1/balance_transactions?limit=3&cursor={page['next_cursor']}")
    assert r.status == 400 and r.json["code"] == "cursor_mismatch", r


def test_another_users_ledger_is_404(server, alice, bob):
    a = alice.create_account()
    pay = alice.pay(a, 500).json
    t = txns(alice, f"?source={pay['id']}")["data"][0]
    assert bob.get(f"/v1/balance_transactions/{t['id']}").status == 404
    assert bob.get(f"/v1/accounts/{a['id']}/balance").status == 404
    r = bob.get(f"/v1/balance_transactions?account_id={a['id']}")
    assert r.status == 404 and r.json["code"] == "resource_missing", r
    assert txns(bob, f"?source={pay['id']}")["data"] == []
    assert bob.get("/v1/balance_transactions/txn_0000000000000").status == 404
    # a processor line exists under the same user, but it is no balance transaction
    system = server.sql("SELECT id FROM journal_lines WHERE source_id = "
                        "(SELECT source_id FROM journal_lines WHERE account_id IS NOT NULL "
                        "ORDER BY id DESC LIMIT 1) AND account_id IS NULL")
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    n, digits = int(system), []
    for _ in range(13):
        digits.append(alphabet[n & 31])
        n >>= 5
    assert alice.get("/v1/balance_transactions/txn_" + "".join(reversed(digits))).status == 404


@pytest.mark.parametrize("query, param", [
    ("?type=bonus", "type"),
    ("?source=ord_03b4473zr0000", "source"),
    ("?source=nonsense", "source"),
    ("?account_id=acct_NOPE", "account_id"),
    ("?account_id=pay_03b4473zr0000", "account_id"),
    ("?created_gte=yesterday", "created_gte"),
    ("?limit=0", "limit"),
    ("?cursor=garbage", "cursor"),
    ("?status=succeeded", "status"),
    ("?type=charge&type=refund", "type"),
])
def test_bad_filters_are_400(alice, query, param):
    r = alice.get(f"/v1/balance_transactions{query}")
    assert r.status == 400, (query, r)
    assert r.json.get("param") == param, (query, r)


def test_verify_on_this_backend(server):
    """`payd ledger verify` on the books this module wrote (SQLite, or PostgreSQL in the pg
    run): clean, then a planted mismatch is reported with exit 1, and clean again once undone."""
    summary = verify_ledger(server.db, settle_s=5)
    assert summary["ok"] and summary["entries"] > 0 and summary["violations"] == []
    account = "(SELECT MIN(id) FROM accounts)"
    server.execute(f"UPDATE accounts SET balance = balance + 1 WHERE id = {account}")
    try:
        out = subprocess.run([PAYD, "ledger", "verify", "--db", server.db], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 1, out.stderr
        assert [v["kind"] for v in json.loads(out.stdout)["violations"]] == ["book_mismatch"]
    finally:
        server.execute(f"UPDATE accounts SET balance = balance - 1 WHERE id = {account}")
    assert verify_ledger(server.db, settle_s=0)["ok"]
