"""Fencing tokens and the processor key (§2, docs/idempotency.md): what a claim writes, and a
key left open by a version before fencing resuming under the processor key it was given."""
import hashlib
import sqlite3
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
    # a 404 of the target releases the key: the row stays, released, with its generation
    r = u.post("/v1/payments", {"account_id": "acct_0000000000000", "amount": 100,
                                "currency": "USD", "source": "tok_visa"}, idem=idem)
    assert r.status == 404
    fence1, gen1, state1 = key_row(s, u, idem)
    assert state1 == "released"
    # the corrected request re-claims it: a larger fence, the same generation
    r = u.pay(acct, amount=100, idem=idem)
    assert r.status == 201, r
    fence2, gen2, state2 = key_row(s, u, idem)
    assert state2 == "completed" and int(fence2) > int(fence1) and gen2 == gen1


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
        c.execute("UPDATE idempotency_keys SET state = 'in_doubt', locked_at = 0, claimed_at = ?, "
                  "generation = ?, response_status = NULL, response_body = NULL, "
                  "response_location = NULL WHERE idem_key = ?", (claimed, -claimed, idem))
    r = u.post("/v1/payments", body, idem=idem)
    assert r.status == 201, r
    assert r.json["processor_charge_id"] == "ch_legacy"
