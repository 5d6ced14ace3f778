"""`payd backup` (docs/operations.md, "Backups"): a consistent copy of a SQLite database taken
while payd serves payments, restored into a payd of its own."""
import json
import os
import sqlite3
import subprocess
import threading
import time

import pytest

from conftest import BACKEND, PAYD, Payd

sqlite_only = pytest.mark.skipif(BACKEND != "sqlite", reason="payd backup copies SQLite databases")


def backup(db, to, check=True):
    out = subprocess.run([PAYD, "backup", "--db", db, "--to", to], capture_output=True, text=True,
                         timeout=120)
    if check:
        assert out.returncode == 0, out.stderr
    return out


class PaymentLoad:
    """Clients paying on fresh keys, recording each acknowledged payment with the time its
    answer arrived."""

    def __init__(self, user, account, clients=4):
        self.user, self.account = user, account
        self.acknowledged = []  # (answered_at, key, payment id, body)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(i,)) for i in range(clients)]

    def run(self, client):
        n = 0
        while not self.stop.is_set():
            key = f"load-{client}-{n}"
            n += 1
            r = self.user.pay(self.account, amount=100 + n, idem=key)
            if r.status == 201:
                with self.lock:
                    self.acknowledged.append((time.monotonic(), key, r.json["id"], r.raw))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join()

    def acknowledged_before(self, t):
        with self.lock:
            return [a for a in self.acknowledged if a[0] < t]


@sqlite_only
def test_backup_under_load_holds_every_payment_acknowledged_before_it(fresh_server, tmp_path):
    server = fresh_server()
    alice = server.create_user("alice", rate_limit="100000/s")
    account = alice.create_account()
    copy = str(tmp_path / "copy.db")
    with PaymentLoad(alice, account) as load:
        while len(load.acknowledged) < 200:
            time.sleep(0.05)
        began = time.monotonic()
        out = backup(server.db, copy)
        during = len(load.acknowledged)
        time.sleep(0.3)  # the payments go on after the copy: the server was never stopped
    report = json.loads(out.stdout)
    assert report["path"] == copy and report["bytes"] == os.path.getsize(copy)
    assert len(load.acknowledged) > during, "payments stopped while the backup ran"

    before = load.acknowledged_before(began)
    assert len(before) >= 200
    with sqlite3.connect(copy) as c:
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        in_copy = c.execute("SELECT count(*) FROM payments").fetchone()[0]
    assert report["payments"] == in_copy >= len(before)
    assert not os.path.exists(copy + "-wal") and not os.path.exists(copy + ".partial")

    # Restore: a payd of its own on the copy finds each of those payments, and a retry of its
    # request replays the stored answer byte for byte instead of charging again.
    restored = Payd(str(tmp_path / "restored"), db=copy)
    os.makedirs(restored.tmpdir, exist_ok=True)
    restored.start()
    try:
        from conftest import User
        again = User(restored, alice.id, alice.key)
        for _, key, payment_id, raw in before:
            assert again.get(f"/v1/payments/{payment_id}").status == 200, payment_id
        for _, key, payment_id, raw in before[:: max(1, len(before) // 20)]:
            r = again.pay(account, idem=key, amount=json.loads(raw)["amount"])
            assert r.status == 201 and r.raw == raw, (key, r)
            assert r.header("Idempotent-Replayed") == "true"
        newest = report["last_id"]
        assert again.get(f"/v1/payments/{newest}").status == 200
    finally:
        restored.stop()


@sqlite_only
def test_backup_refuses_an_existing_target_and_a_missing_source(server, tmp_path):
    target = tmp_path / "exists.db"
    target.write_bytes(b"keep me")
    out = backup(server.db, str(target), check=False)
    assert out.returncode == 1 and "exists" in out.stderr
    assert target.read_bytes() == b"keep me"
    out = backup(str(tmp_path / "absent.db"), str(tmp_path / "new.db"), check=False)
    assert out.returncode == 1 and "no database" in out.stderr
    assert not (tmp_path / "new.db").exists()
    out = subprocess.run([PAYD, "backup", "--db", server.db], capture_output=True, text=True)
    assert out.returncode == 2 and "--to" in out.stderr


def test_backup_of_postgresql_points_at_continuous_archiving(tmp_path):
    out = subprocess.run([PAYD, "backup", "--db", "postgres://127.0.0.1:1/none", "--to",
                          str(tmp_path / "x.db")], capture_output=True, text=True)
    assert out.returncode == 1 and "continuous archiving" in out.stderr
    assert not (tmp_path / "x.db").exists()
