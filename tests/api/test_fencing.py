"""Fencing tokens and the processor key (§2, docs/idempotency.md): what a claim writes, and a
key left open by a version before fencing resuming under the processor key it was given."""
import hashlib
import sqlite3
import time
import uuid

import pytest
from conftest import BACKEND


def key_row(server, user, idem):
    return server.sql(f"SELECT fence || ',' || generation || ',' || state FROM idempotency_keys "
                      f"WHERE idem_key = '{idem}'").split(",")


def test_every_claim_grows_the_fence_and_a_release_keeps_the_generation(fresh_server):
    s = fresh_server()
    u = s.create_user()
    acct = u.create_account()
    idem = str(uuid.uuid4())
    # an account that is not the caller's is found before the claim: no key is written
    r = u.post("/v1/payments", {"account_id": "acct_0000000000000", "amount": 100,
                                "currency": "USD", "source": "tok_visa"}, idem=idem)
    assert r.status == 404
    assert s.sql(f"SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = '{idem}'") == 0
    # an order's 404 comes after the claim (the order's answers are stored with the key) and
    # releases it: the row stays, released, with its generation
    r = u.post("/v1/payments", {"account_id": acct["id"], "amount": 100, "currency": "USD",
                                "source": "tok_visa",
                                "order_id": acct["id"].replace("acct_", "ord_")}, idem=idem)
    assert r.status == 404
    fence1, gen1, state1 = key_row(s, u, idem)
    assert state1 == "released"
    # the corrected request re-claims it: a larger fence, the same generation
    r = u.pay(acct, amount=100, idem=idem)
    assert r.status == 201, r
    fence2, gen2, state2 = key_row(s, u, idem)
    assert state2 == "completed" and int(fence2) > int(fence1) and gen2 == gen1


def left_in_doubt_now():
    """locked_at of a key left in doubt just now: the recoverer waits a lock timeout (60 s)
    before taking it, so the test's retry is the one that resumes it (with locked_at = 0 the
    recoverer could take it first and the retry would get a rightful 409)."""
    return int(time.time() * 1_000_000)


@pytest.mark.skipif(BACKEND != "sqlite", reason="edits the SQLite file directly")
def test_key_open_before_the_upgrade_resumes_with_its_old_processor_key(fresh_server, tmp_path):
    s = fresh_server()
    u = s.create_user()
    acct = u.create_account()
    user_id = s.sql("SELECT id FROM users WHERE name = 'alice'")
    idem = str(uuid.uuid4())
    s.stop()
    # what a version before fencing left: a payment charged under sha256(user, key, claim time)
    # and its key in doubt, marked by the migration with a negative generation
    claimed = 1_790_000_000_000_000
    old_key = hashlib.sha256(f"{user_id}\n{idem}\n{claimed}".encode()).hexdigest()
    body = {"account_id": acct["id"], "amount": 4321, "currency": "USD", "source": "tok_visa"}
    with sqlite3.connect(s.db) as c:
        c.execute("INSERT INTO processor_charges (processor_key, charge_id, status, amount, "
                  "currency, source, created_at) VALUES (?, 'ch_legacy', 'succeeded', 4321, "
                  "'USD', 'tok_visa', ?)", (old_key, claimed))
    s.start()
    # claim once so the engine writes the row with this request's fingerprint, then make it
    # look like the legacy key the migration marked
    r = u.post("/v1/payments", body, idem=idem)
    assert r.status == 201
    with sqlite3.connect(s.db) as c:
        c.execute("DELETE FROM payments WHERE id = (SELECT max(id) FROM payments)")
        c.execute("UPDATE accounts SET balance = 0")
        c.execute("UPDATE idempotency_keys SET state = 'in_doubt', locked_at = ?, claimed_at = ?, "
                  "generation = ?, response_status = NULL, response_body = NULL, "
                  "response_location = NULL WHERE idem_key = ?",
                  (left_in_doubt_now(), claimed, -claimed, idem))
    r = u.post("/v1/payments", body, idem=idem)
    assert r.status == 201, r
    assert r.json["processor_charge_id"] == "ch_legacy"


def test_new_processor_keys_are_time_ordered(fresh_server):
    """A new key's processor key is its generation in 13 hex digits, then 51 of the sha256 of
    what names the operation: keys made later sort later, so the processor's index of them
    grows at its end."""
    s = fresh_server()
    u = s.create_user()
    acct = u.create_account()
    body = {"account_id": acct["id"], "amount": 1200, "currency": "USD", "source": "tok_visa"}
    keys = []
    for _ in range(3):
        idem = str(uuid.uuid4())
        r = u.post("/v1/payments", body, idem=idem)
        assert r.status == 201, r
        where = f"idem_key = '{idem}'"
        user_id, fingerprint, generation, scheme = (
            s.sql(f"SELECT {column} FROM idempotency_keys WHERE {where}")
            for column in ("user_id", "fingerprint", "generation", "processor_key_scheme"))
        assert scheme == 2
        digest = hashlib.sha256(f"{user_id}\n{idem}\n{fingerprint}\n{generation}".encode())
        expected = f"{generation:013x}" + digest.hexdigest()[:51]
        charge = r.json["processor_charge_id"]
        assert s.sql(f"SELECT processor_key FROM processor_charges "
                     f"WHERE charge_id = '{charge}'") == expected
        keys.append(expected)
    assert keys == sorted(keys)


@pytest.mark.skipif(BACKEND != "sqlite", reason="edits the SQLite file directly")
def test_key_claimed_under_the_hashed_scheme_resumes_with_its_hashed_key(fresh_server):
    """A key claimed by a release before the time-ordered scheme (processor_key_scheme 1, the
    column's default) and left in doubt is resumed under the processor key it was given then,
    so the retry is handed the charge that release made instead of charging again."""
    s = fresh_server()
    u = s.create_user()
    acct = u.create_account()
    idem = str(uuid.uuid4())
    body = {"account_id": acct["id"], "amount": 4321, "currency": "USD", "source": "tok_visa"}
    r = u.post("/v1/payments", body, idem=idem)
    assert r.status == 201
    where = f"idem_key = '{idem}'"
    user_id, fingerprint, generation = (
        s.sql(f"SELECT {column} FROM idempotency_keys WHERE {where}")
        for column in ("user_id", "fingerprint", "generation"))
    hashed = hashlib.sha256(f"{user_id}\n{idem}\n{fingerprint}\n{generation}".encode())
    # what the older release left: its charge under the hashed key, no payment, the key in doubt
    s.stop()
    with sqlite3.connect(s.db) as c:
        c.execute("DELETE FROM payments")
        c.execute("UPDATE accounts SET balance = 0")
        c.execute("INSERT INTO processor_charges (processor_key, charge_id, status, amount, "
                  "currency, source, created_at) VALUES (?, 'ch_hashed', 'succeeded', 4321, "
                  "'USD', 'tok_visa', ?)", (hashed.hexdigest(), generation))
        c.execute("UPDATE idempotency_keys SET state = 'in_doubt', locked_at = ?, "
                  "processor_key_scheme = 1, response_status = NULL, response_body = NULL, "
                  "response_event = NULL, response_location = NULL WHERE idem_key = ?",
                  (left_in_doubt_now(), idem))
    s.start()
    r = u.post("/v1/payments", body, idem=idem)
    assert r.status == 201, r
    assert r.json["processor_charge_id"] == "ch_hashed"
    assert s.sql("SELECT COUNT(*) FROM payments") == 1


def wait_until(what, check, timeout=15):
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_retry_recorded_while_the_void_is_decided_keeps_its_charge(fresh_server):
    """The recoverer decides whether a queued charge is carried by a payment or must be voided
    from two reads: the key's state, then the account's payments. A retry that records the charge
    between the two (forced here: the recoverer sleeps there) must keep it. On PostgreSQL, where
    each read sees what had committed when it began, the reads in the other order missed such a
    payment, then saw its key completed, and voided the charge the payment carries."""
    s = fresh_server(["--recovery-interval", "100ms"],
                     env={"PAYD_FAULT": "sleep@void-between-reads=2000"})
    u = s.create_user()
    acct = u.create_account()
    idem = str(uuid.uuid4())
    body = {"account_id": acct["id"], "amount": 2468, "currency": "USD", "source": "tok_visa"}
    first = u.post("/v1/payments", body, idem=idem)
    assert first.status == 201, first
    charge = first.json["processor_charge_id"]

    # What a request that charged and lost its record leaves behind: no payment, its key
    # released (generation kept, so a retry asks the processor under the same key and is handed
    # the same charge), and the charge queued for the recoverer's void check.
    key = f"idem_key = '{idem}'"
    user_id = s.sql(f"SELECT user_id FROM idempotency_keys WHERE {key}")
    fingerprint = s.sql(f"SELECT fingerprint FROM idempotency_keys WHERE {key}")
    generation = s.sql(f"SELECT generation FROM idempotency_keys WHERE {key}")
    account = s.sql(f"SELECT account_id FROM payments WHERE processor_charge_id = '{charge}'")
    processor_key = s.sql(f"SELECT processor_key FROM processor_charges "
                          f"WHERE charge_id = '{charge}'")
    s.execute(f"DELETE FROM payments WHERE processor_charge_id = '{charge}'",
              f"UPDATE accounts SET balance = balance - 2468 WHERE id = {account}",
              "UPDATE idempotency_keys SET state = 'released', response_status = NULL, "
              "response_body = NULL, response_location = NULL, response_event = NULL "
              f"WHERE {key}",
              "INSERT INTO charge_voids (processor_key, user_id, idem_key, fingerprint, generation, "
              f"account_id, charge_id, amount, created_at) VALUES ('{processor_key}', {user_id}, "
              f"'{idem}', '{fingerprint}', {generation}, {account}, '{charge}', 2468, 0)")

    wait_until("the recoverer between its two reads",
               lambda: '"at":"void-between-reads"' in s.read_log())
    retry = u.post("/v1/payments", body, idem=idem)
    assert retry.status == 201, retry
    wait_until("the void check to end", lambda: s.sql("SELECT COUNT(*) FROM charge_voids") == 0)

    # charged once: one payment, and its charge is the only one the processor kept
    assert s.sql("SELECT COUNT(*) FROM payments") == 1
    carried = s.sql("SELECT processor_charge_id FROM payments")
    assert s.sql("SELECT COUNT(*) FROM processor_refunds "
                 f"WHERE charge_id = '{carried}'") == 0, "the recorded charge was voided"
    assert s.sql("SELECT COUNT(*) FROM processor_charges c WHERE status = 'succeeded' AND NOT "
                 "EXISTS (SELECT 1 FROM processor_refunds r WHERE r.charge_id = c.charge_id)") == 1
    assert u.get(f"/v1/accounts/{acct['id']}").json["balance"] == 2468
