"""Point-in-time recovery on PostgreSQL (docs/operations.md, "PostgreSQL"): continuous WAL
archiving and a base backup taken while payd writes; more payments after it; a chosen time; more
payments after that; then a restore to that time into a new cluster, where payd finds exactly the
payments committed before it, each with its processor charge."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from harness import PAYD, Node, Postgres, free_port, pg, request, verify_ledger


class ArchivingPostgres(Postgres):
    """The harness's PostgreSQL with WAL archiving on, as docs/operations.md sets it up."""

    def __init__(self):
        self.c = pg.Cluster()
        self.max_connections = 100
        self.archive = os.path.join(self.c.dir, "archive")
        subprocess.run(pg._as_postgres(["mkdir", self.archive]), check=True)
        self.restart()

    def _options(self):
        return (super()._options() + " -c wal_level=replica -c archive_mode=on "
                f"-c \"archive_command=test ! -f {self.archive}/%f && cp %p {self.archive}/%f\"")


def as_postgres(*cmd):
    subprocess.run(pg._as_postgres(list(cmd)), check=True, capture_output=True)


class Payments:
    """Clients paying on fresh keys; every answer must be a 201 (the database stays up)."""

    def __init__(self, port, key, account):
        self.port, self.key, self.account = port, key, account
        self.ids = []
        self.lock = threading.Lock()

    def run_for(self, seconds, clients=4):
        stop = time.monotonic() + seconds
        failures = []

        def client():
            while time.monotonic() < stop:
                status, _, body = request(self.port, "POST", "/v1/payments", self.key,
                                          {"account_id": self.account, "amount": 500,
                                           "currency": "USD", "source": "tok_visa"},
                                          {"Idempotency-Key": uuid.uuid4().hex})
                if status != 201:
                    failures.append((status, body))
                    return
                with self.lock:
                    self.ids.append(body["id"])

        threads = [threading.Thread(target=client) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures[:3]
        with self.lock:
            made, self.ids = self.ids, []
        return set(made)


def all_payments(port, key, account):
    ids, cursor = [], None
    while True:
        path = f"/v1/accounts/{account}/payments?limit=100" + (f"&cursor={cursor}" if cursor else "")
        status, _, page = request(port, "GET", path, key)
        assert status == 200, page
        ids += [p["id"] for p in page["data"]]
        if not page["has_more"]:
            return ids
        cursor = page["next_cursor"]


def wait_archived(db, wal_file, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if db.psql("SELECT coalesce(last_archived_wal, '') FROM pg_stat_archiver") >= wal_file:
            return
        time.sleep(0.1)
    raise AssertionError(f"{wal_file} was not archived: "
                         f"{db.psql('SELECT * FROM pg_stat_archiver')}")


def test_restore_to_a_chosen_time_finds_exactly_the_payments_committed_before_it():
    tmp = tempfile.mkdtemp(prefix="payd-pitr-")
    db = ArchivingPostgres()
    nodes = []
    restored_data = os.path.join(db.c.dir, "restored")
    try:
        db.psql("CREATE DATABASE payd")
        node = Node(tmp, 1, db.url("payd")).start()
        nodes.append(node)
        user = subprocess.run([PAYD, "user", "create", "pitr", "--rate-limit", "100000/s", "--db",
                               db.url("payd")], capture_output=True, text=True, check=True)
        key = __import__("json").loads(user.stdout)["api_key"]
        status, _, account = request(node.port, "POST", "/v1/accounts", key, {"currency": "USD"})
        assert status == 201
        load = Payments(node.port, key, account["id"])

        before_backup = load.run_for(1.5)
        base = os.path.join(db.c.dir, "base")
        backup = threading.Thread(target=as_postgres, args=(
            f"{db.c.bindir}/pg_basebackup", "-h", db.c.dir, "-p", str(db.c.port), "-U",
            "postgres", "-D", base, "-X", "stream", "-c", "fast"))
        backup.start()
        during_backup = load.run_for(1.5)  # the base backup is taken while payd writes
        backup.join()
        after_backup = load.run_for(1.5)

        # every client has its answer: all of these are committed, none after the target
        target = db.psql("SELECT now()")
        time.sleep(1.1)
        after_target = load.run_for(1.5)
        wal_file = db.psql("SELECT pg_walfile_name(pg_current_wal_lsn())")
        db.psql("SELECT pg_switch_wal()")
        wait_archived(db, wal_file)

        # the restore, as docs/operations.md gives it: the base backup, the archive, a target
        as_postgres("cp", "-a", base, restored_data)
        as_postgres("touch", os.path.join(restored_data, "recovery.signal"))
        settings = (f"restore_command = 'cp {db.archive}/%f %p'\n"
                    f"recovery_target_time = '{target}'\n"
                    "recovery_target_action = 'promote'\n")
        subprocess.run(pg._as_postgres(["sh", "-c", f"cat >> {restored_data}/postgresql.auto.conf"]),
                       input=settings, text=True, check=True)
        port = free_port()
        as_postgres(f"{db.c.bindir}/pg_ctl", "-D", restored_data, "-l",
                    os.path.join(db.c.dir, "restored.log"), "-w", "-t", "60", "start", "-o",
                    f"-p {port} -k {db.c.dir} -c listen_addresses=127.0.0.1 -c archive_mode=off")
        url = f"postgres://postgres@127.0.0.1:{port}/payd"
        deadline = time.time() + 60
        while time.time() < deadline:
            out = subprocess.run([f"{db.c.bindir}/psql", "-At", "-X", "-c",
                                  "SELECT pg_is_in_recovery()", url], capture_output=True, text=True)
            if out.stdout.strip() == "f":
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the restored cluster did not finish its recovery")

        restored = Node(tmp, 2, url).start()
        nodes.append(restored)
        found = all_payments(restored.port, key, account["id"])
        committed = before_backup | during_backup | after_backup
        assert len(found) == len(set(found))
        assert set(found) == committed, (
            f"missing {len(committed - set(found))}, extra {len(set(found) & after_target)}")
        charges = subprocess.run([f"{db.c.bindir}/psql", "-At", "-X", "-c",
                                  "SELECT count(*) FROM processor_charges", url],
                                 capture_output=True, text=True, check=True).stdout.strip()
        assert int(charges) == len(committed)
        verify_ledger(url)  # the restored books are whole at the target time
        print(f"pitr: {len(before_backup)} before the base backup, {len(during_backup)} during, "
              f"{len(after_backup)} after it, {len(after_target)} after the target time: "
              f"{len(found)} restored, 0 missing, 0 extra")
    finally:
        for n in nodes:
            n.stop()
        as_postgres_quiet = pg._as_postgres([f"{db.c.bindir}/pg_ctl", "-D", restored_data,
                                             "-m", "immediate", "stop"])
        subprocess.run(as_postgres_quiet, capture_output=True)
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)
