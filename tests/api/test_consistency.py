"""The books balance (§3, §6, §7): after concurrent payments, refunds and transfers (with retried
keys and replayed biz_seqs among them), every account's balance equals what its rows say, read
straight from the database:

    balance == Σ payments that succeeded (incl. partially/fully refunded) − Σ their refunds
               + Σ succeeded transfers in − Σ succeeded transfers out,   and balance >= 0.
"""

import os
import random
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor


def test_balances_equal_their_rows(fresh_server):
    server = fresh_server(["--rate-limit", "100000/s"])
    users = [server.create_user(f"books-{i}") for i in range(2)]
    accounts = {u.id: [u.create_account() for _ in range(4)] for u in users}
    payments = {u.id: [] for u in users}
    lock = threading.Lock()

    def pay(rng, user):
        account = rng.choice(accounts[user.id])
        source = "tok_chargeDeclined" if rng.random() < 0.1 else "tok_visa"
        key, amount = os.urandom(8).hex(), rng.randint(100, 5000)
        r = user.pay(account, amount, source=source, idem=key)
        assert r.status in (201, 402), r
        if rng.random() < 0.2:  # a client retry: replayed, never a second charge
            again = user.pay(account, amount, source=source, idem=key)
            assert again.status == r.status and again.raw == r.raw, (r, again)
        if r.status == 201:
            with lock:
                payments[user.id].append(r.json)
        return r.status

    def refund(rng, user):
        with lock:
            if not payments[user.id]:
                return None
            p = rng.choice(payments[user.id])
        body = {} if rng.random() < 0.3 else {"amount": rng.randint(1, p["amount"])}
        key = os.urandom(8).hex()
        r = user.post(f"/v1/payments/{p['id']}/refunds", body, idem=key)
        assert r.status in (201, 409), r
        if r.status == 409:
            assert r.json["code"] in ("amount_exceeds_refundable", "insufficient_funds"), r
        if rng.random() < 0.2:
            again = user.post(f"/v1/payments/{p['id']}/refunds", body, idem=key)
            assert again.status == r.status and again.raw == r.raw, (r, again)
        return r.status

    def transfer(rng, user):
        src, dst = rng.sample(accounts[user.id], 2)
        body = {"biz_seq": os.urandom(8).hex(), "from_account": src["id"],
                "to_account": dst["id"], "amount": rng.randint(1, 4000), "currency": "USD"}
        r = user.post("/v1/transfers", body)
        assert r.status in (201, 409), r
        if rng.random() < 0.2:
            again = user.post("/v1/transfers", body)
            assert again.status == r.status and again.raw == r.raw, (r, again)
            assert again.header("Idempotent-Replayed") == "true"
        return r.status

    def worker(n):
        rng = random.Random(1000 + n)
        user = users[n % len(users)]
        done = []
        for i in range(40):
            op = pay if i < 5 else rng.choice([pay, refund, refund, transfer, transfer, transfer])
            done.append((op.__name__, op(rng, user)))
        return done

    with ThreadPoolExecutor(8) as pool:
        results = [x for part in pool.map(worker, range(8)) for x in part]
    kinds = {(name, status) for name, status in results}
    # the run did exercise what it claims to
    assert {("pay", 201), ("refund", 201), ("transfer", 201)} <= kinds, kinds

    accounts = rows(server, "SELECT id, balance FROM accounts")
    payments = rows(server, "SELECT id, account_id, amount, status, refunded_amount FROM payments")
    refunds = rows(server, "SELECT payment_id, amount, status FROM refunds")
    transfers = rows(server, "SELECT id, from_account, to_account, amount, status FROM transfers")
    legs = rows(server, "SELECT transfer_id FROM transfer_legs")
    assert len(accounts) == 8

    refunded = {}  # payment id → Σ refunds
    for payment_id, amount, status in refunds:
        assert status == "succeeded"  # none left pending
        refunded[payment_id] = refunded.get(payment_id, 0) + amount
    books = {account_id: 0 for account_id, _ in accounts}
    for pid, account_id, amount, status, refunded_amount in payments:
        # refunded_amount is the sum of the refunds, never past the amount; the status says so
        assert refunded_amount == refunded.get(pid, 0) <= amount
        if status == "failed":
            assert refunded_amount == 0
            continue
        assert status == ("succeeded" if refunded_amount == 0 else
                          "refunded" if refunded_amount == amount else "partially_refunded")
        books[account_id] += amount - refunded.get(pid, 0)
    for _, src, dst, amount, status in transfers:
        if status == "succeeded":
            books[src] -= amount
            books[dst] += amount
    for account_id, balance in accounts:
        assert balance >= 0
        assert balance == books[account_id], (account_id, balance, books[account_id])

    # every transfer has its two legs; one processor refund per refund, one charge per payment
    assert sorted(t for (t,) in legs) == sorted([t[0] for t in transfers] * 2)
    assert server.sql("SELECT COUNT(*) FROM processor_refunds") == len(refunds)
    assert server.sql("SELECT COUNT(*) FROM processor_charges") == len(payments)
    # and no idempotency key is left open
    assert server.sql("SELECT COUNT(*) FROM idempotency_keys WHERE state <> 'completed'") == 0


def rows(server, query):
    """All rows of query, read straight from the server's database (SQLite file or PostgreSQL)."""
    if server.pg_database:
        import pg
        out = pg.cluster().psql(query, server.pg_database)
        return [tuple(int(v) if v.lstrip("-").isdigit() else v for v in line.split("|"))
                for line in out.splitlines() if line]
    db = sqlite3.connect(f"file:{server.db}?mode=ro", uri=True)
    try:
        return db.execute(query).fetchall()
    finally:
        db.close()


def test_payments_over_many_accounts_do_not_deadlock(fresh_server):
    """Concurrent payments into the same few accounts: on PostgreSQL each write connection's
    batch changes several accounts' balances and volume buckets, which it locks at its commit,
    in one order (store_add_at_commit), so two batches never wait on each other in a circle."""
    server = fresh_server(["--rate-limit", "100000/s"])
    user = server.create_user("hot-rows")
    accounts = [user.create_account() for _ in range(12)]
    busy_before = busy_retries(server)

    def worker(n):
        rng = random.Random(2000 + n)
        paid = {}
        for _ in range(40):
            account = rng.choice(accounts)
            amount = rng.randint(100, 900)
            r = user.pay(account, amount, idem=os.urandom(8).hex())
            assert r.status == 201, r
            paid[account["id"]] = paid.get(account["id"], 0) + amount
        return paid

    with ThreadPoolExecutor(32) as pool:
        parts = list(pool.map(worker, range(32)))
    for account in accounts:
        expected = sum(part.get(account["id"], 0) for part in parts)
        got = user.get(f"/v1/accounts/{account['id']}")
        assert got.json["balance"] == expected, (account["id"], got.json, expected)
    volume = rows(server, "SELECT SUM(succeeded_count), SUM(succeeded_amount) FROM payment_volume")
    assert volume == [(32 * 40, sum(sum(p.values()) for p in parts))]
    # no batch met a deadlock (or a serialization failure) and had to run again
    assert busy_retries(server) == busy_before


def busy_retries(server):
    r = server.request("GET", "/metrics")
    for line in r.raw.decode().splitlines():
        if line.startswith('payd_store_batch_retries_total{reason="busy"}'):
            return int(line.split()[-1])
    raise AssertionError("payd_store_batch_retries_total is missing")


def test_reads_see_what_another_process_committed(fresh_server):
    """On SQLite each HTTP thread keeps its read snapshot from one request to the next while
    nothing commits (docs/architecture.md, "Read snapshots kept between requests"): a row another process changes must show in
    the very next read, whichever thread serves it."""
    s = fresh_server(["--rate-limit", "100000/s"])
    user = s.create_user()
    acct = user.create_account()
    path = "/v1/payments/" + user.pay(acct).json["id"]
    shown = None
    for i in range(25):
        # a connection per request: every HTTP thread serves some, and keeps its snapshot
        for _ in range(6):
            r = user.get(path)
            assert r.status == 200, r
            assert r.json["description"] == shown
        shown = f"changed elsewhere {i}"
        s.execute(f"UPDATE payments SET description = '{shown}' "
                  "WHERE id = (SELECT MAX(id) FROM payments)")
