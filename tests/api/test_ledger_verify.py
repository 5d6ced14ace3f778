"""`payd ledger verify` (docs/ledger.md, "Verify"): a database made by a real run is clean (exit 0
and a JSON summary); a copy of it with one violation planted, one copy per kind, is reported
with exit 1 and names that kind. SQLite files are copied, so this file skips PostgreSQL."""

import json
import os
import shutil
import sqlite3
import subprocess
import time
import urllib.request

import pytest

from conftest import PAYD, Payd, free_port


def verify(db, *args):
    out = subprocess.run([PAYD, "ledger", "verify", "--db", db, *args], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """A database made by a real run: charges, a declined charge, refunds, transfers, a refused
    transfer. Returns its path (the server stopped) and the ids the plants need."""
    d = str(tmp_path_factory.mktemp("payd"))
    s = Payd(d).start()
    u = s.create_user("alice")
    a, b = u.create_account(), u.create_account()
    pays = [u.pay(a, 1000 + i).json for i in range(4)]
    assert u.pay(a, 5, source="tok_chargeDeclined").status == 402
    r = u.post(f"/v1/payments/{pays[0]['id']}/refunds", {"amount": 400}, idem="r-1")
    assert r.status == 201, r
    r = u.post(f"/v1/payments/{pays[1]['id']}/refunds", {}, idem="r-2")
    assert r.status == 201, r
    t = u.post("/v1/transfers", {"biz_seq": "t-1", "from_account": a["id"],
                                 "to_account": b["id"], "amount": 300, "currency": "USD"})
    assert t.status == 201, t
    refused = u.post("/v1/transfers", {"biz_seq": "t-2", "from_account": b["id"],
                                       "to_account": a["id"], "amount": 9999, "currency": "USD"})
    assert refused.status == 409
    s.stop()
    return s.db


def planted(books, tmp_path, *statements):
    db = str(tmp_path / "copy.db")
    shutil.copy(books, db)
    with sqlite3.connect(db) as c:
        c.execute("PRAGMA ignore_check_constraints = ON")
        for statement in statements:
            c.execute(statement)
    return db


def test_a_real_run_is_clean(books):
    rc, summary = verify(books)
    assert rc == 0 and summary["ok"] and summary["violations"] == []
    assert (summary["payments"], summary["refunds"], summary["transfers"]) == (4, 2, 1)
    assert summary["entries"] == 4 + 2 + 1 and summary["lines"] == 2 * 7
    # the processor system account owes the charges less the refunds, as a negative balance
    assert summary["system_accounts"]["USD.processor"] == -(1000 + 1001 + 1002 + 1003 - 400 - 1001)
    rc, summary = verify(books, "--processor", "none")
    assert rc == 0 and summary["processor"] == "none"


def test_an_upgraded_database_is_backfilled_and_clean(books, tmp_path):
    """The same books taken back to schema 11 (no ledger) and migrated again: migration 12's
    backfill writes one entry per charged payment, refund and succeeded transfer, and verify is
    clean, with the same figures as the books written live."""
    live = verify(books)[1]
    db = planted(books, tmp_path, "DROP TABLE journal_lines", "DROP TABLE journal_entries",
                 "ALTER TABLE accounts DROP COLUMN pending",
                 "DELETE FROM schema_migrations WHERE version = 12")
    rc, summary = verify(db)  # opening the store migrates it
    assert rc == 0, summary
    same = ("entries", "lines", "payments", "refunds", "transfers", "system_accounts")
    assert {k: summary[k] for k in same} == {k: live[k] for k in same}


A_PROCESSOR_LINE = "(SELECT MIN(id) FROM journal_lines WHERE book = 'processor')"
AN_ACCOUNT = "(SELECT MIN(id) FROM accounts)"
A_TRANSFER = "(SELECT MIN(id) FROM transfers WHERE status = 'succeeded')"
A_CHARGED = "(SELECT MAX(id) FROM payments WHERE status = 'succeeded')"

PLANTS = {
    "unbalanced_entry": [f"UPDATE journal_lines SET amount = amount + 1 WHERE id = {A_PROCESSOR_LINE}"],
    "book_mismatch": [f"UPDATE accounts SET balance = balance + 7 WHERE id = {AN_ACCOUNT}"],
    "negative_balance": [f"UPDATE accounts SET balance = -5 WHERE id = {AN_ACCOUNT}"],
    "refunded_exceeds_captured": [
        f"UPDATE payments SET refunded_amount = amount + 1 WHERE id = {A_CHARGED}"],
    # the transfer's lines stay (books and sums still agree): only the entry is gone
    "source_entries": [f"DELETE FROM journal_entries WHERE source_id = {A_TRANSFER}"],
    "entry_without_source": [f"DELETE FROM transfers WHERE id = {A_TRANSFER}"],
    "processor_record_without_entry": [
        "INSERT INTO processor_charges (processor_key, charge_id, status, amount, currency, "
        "source, created_at) VALUES ('planted', 'ch_planted', 'succeeded', 500, 'USD', "
        "'tok_visa', 0)"],
    "entry_without_processor_record": [
        f"DELETE FROM processor_charges WHERE charge_id = (SELECT processor_charge_id FROM "
        f"payments WHERE id = {A_CHARGED})"],
    "processor_record_entries": [
        f"UPDATE payments SET processor_charge_id = (SELECT processor_charge_id FROM payments "
        f"WHERE id = (SELECT MIN(id) FROM payments)) WHERE id = {A_CHARGED}"],
}
# capture_mismatch (captured + released + capturable = amount) cannot be planted yet: until
# authorize-and-capture a charged payment is captured in full by definition (docs/ledger.md).


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_each_planted_violation_is_reported(books, tmp_path, kind):
    db = planted(books, tmp_path, *PLANTS[kind])
    rc, summary = verify(db)
    assert rc == 1 and summary["ok"] is False, summary
    kinds = {v["kind"] for v in summary["violations"]}
    assert kind in kinds, summary["violations"]
    assert summary["violation_count"] == len(summary["violations"])


def test_a_charge_still_in_flight_is_counted_not_reported(books, tmp_path):
    """A charge whose operation is still open (here: waiting for its void) is no orphan yet."""
    charge = PLANTS["processor_record_without_entry"][0]
    void = ("INSERT INTO charge_voids (processor_key, user_id, idem_key, fingerprint, generation, "
            "account_id, charge_id, amount, created_at) VALUES ('planted', 1, 'k', 'f', 0, 1, "
            "'ch_planted', 500, 0)")
    rc, summary = verify(planted(books, tmp_path, charge, void))
    assert rc == 0 and summary["in_flight"] == 1, summary


def test_every_violation_is_listed(books, tmp_path):
    """Not only the first: plants that do not hide each other are all reported."""
    apart = ["unbalanced_entry", "book_mismatch", "refunded_exceeds_captured",
             "processor_record_without_entry", "entry_without_source"]
    db = planted(books, tmp_path, *[s for kind in apart for s in PLANTS[kind]])
    rc, summary = verify(db)
    assert rc == 1
    assert set(apart) <= {v["kind"] for v in summary["violations"]}


def test_a_bad_database_is_exit_2(tmp_path):
    out = subprocess.run([PAYD, "ledger", "verify"], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "PAYD_DB"})
    assert out.returncode == 2 and "usage" in out.stderr


def test_against_processor_sim(tmp_path):
    """With --processor URL the processor's side is `payd processor-sim`'s GET /charges/{id}."""
    sim_db = str(tmp_path / "sim.db")
    port = free_port()
    with open(tmp_path / "sim.log", "ab") as log:
        sim = subprocess.Popen([PAYD, "processor-sim", "--listen", f"127.0.0.1:{port}", "--db",
                                sim_db], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 15
        while True:
            try:
                urllib.request.urlopen(url + "/stats", timeout=2).read()
                break
            except OSError:
                assert time.time() < deadline, "processor-sim did not start"
                time.sleep(0.05)
        s = Payd(str(tmp_path), args=["--live-test-tokens", "true", "--processor", url]).start()
        u = s.create_user("alice")
        a = u.create_account()
        pays = [u.pay(a, 700 + i).json for i in range(3)]
        r = u.post(f"/v1/payments/{pays[0]['id']}/refunds", {"amount": 100}, idem="r-1")
        assert r.status == 201, r
        s.stop()
        rc, summary = verify(s.db, "--processor", url)
        assert rc == 0, summary
        assert summary["processor"] == "url" and summary["processor_stats"]["charges"] >= 3
        # the processor loses a refund: payd's confirmed refund has no record there
        with sqlite3.connect(sim_db, timeout=10) as c:
            c.execute("DELETE FROM processor_refunds")
        rc, summary = verify(s.db, "--processor", url)
        assert rc == 1
        assert [(v["kind"], v["type"]) for v in summary["violations"]] == \
            [("entry_without_processor_record", "refund")]
        # ...and a charge
        with sqlite3.connect(sim_db, timeout=10) as c:
            c.execute("DELETE FROM processor_charges WHERE charge_id = (SELECT MIN(charge_id) "
                      "FROM processor_charges)")
        rc, summary = verify(s.db, "--processor", url)
        assert rc == 1 and ("entry_without_processor_record", "charge") in \
            [(v["kind"], v["type"]) for v in summary["violations"]]
    finally:
        sim.terminate()
        sim.wait(15)
