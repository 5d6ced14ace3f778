"""A node whose database stops answering: SIGTERM ends the process within --shutdown-timeout
(plus a moment) whatever the database does, and nothing acknowledged is lost; a database back
before the node-id lease runs out is written to again with no restart (docs/deployment.md); a
payment whose record needs an id after the lease lapsed answers 503 at once and its key resumes
(docs/concurrency.md, "Node ids: leases").

PostgreSQL only: each test stops every process of a cluster of its own (pg_ctl stop, or SIGSTOP
of the postmaster and all its children, as a paused machine would). SQLite's database is a file
in payd's own process and cannot be stopped apart from it."""

import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import BACKEND, Payd, User

pytestmark = pytest.mark.skipif(
    BACKEND != "postgres", reason="stops the database's processes: PostgreSQL only")

LEASE_TTL_S = 15  # LEASE_TTL_MS, src/node/lease.h
SHUTDOWN_TIMEOUT_S = 2


@pytest.fixture
def started():
    """Starts payd servers, and kills any a failed test left running."""
    nodes = []

    def start(*args, **kw):
        node = Payd(*args, **kw)
        nodes.append(node)
        return node.start()

    yield start
    for node in nodes:
        if node.proc and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait()


@pytest.fixture
def cluster():
    import pg
    c = pg.Cluster()  # its own: these tests stop it
    yield c
    c.stop()


def cluster_pids(c):
    """The postmaster and every process it started."""
    with open(os.path.join(c.data, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            pids.append(int(entry))
    return pids


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def pay(user, account, key=None, timeout=30):
    body = {"account_id": account["id"], "amount": 1000, "currency": "USD", "source": "tok_visa"}
    return user.post("/v1/payments", body, idem=key or os.urandom(8).hex(), timeout=timeout)


def node_on(started, c, tmp_path, env=None, database=None, args=()):
    db = c.url(database or c.new_database())
    return started(str(tmp_path), ["--shutdown-timeout", f"{SHUTDOWN_TIMEOUT_S}s", *args],
                   env=env, db=db)


def sigterm_and_time(node):
    started = time.monotonic()
    node.proc.send_signal(signal.SIGTERM)
    try:
        node.proc.wait(SHUTDOWN_TIMEOUT_S + 10)
    except subprocess.TimeoutExpired:
        node.proc.kill()
        node.proc.wait()
        pytest.fail(f"payd did not exit within {SHUTDOWN_TIMEOUT_S + 10} s of SIGTERM: "
                    f"{node.read_log()[-1500:]}")
    took = time.monotonic() - started
    node.stop()  # its log: every line whole
    return took


class Clients:
    """A few threads making payments, each with a key of its own; what was acknowledged (201)
    is kept."""

    def __init__(self, user, account, count=4):
        self.user, self.account = user, account
        self.acknowledged, self.lock, self.stop = [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(count)]
        for t in self.threads:
            t.start()

    def run(self):
        while not self.stop.is_set():
            try:
                r = pay(self.user, self.account, timeout=3)
            except OSError:
                continue
            if r.status == 201:
                with self.lock:
                    self.acknowledged.append(r.json["id"])
            else:
                time.sleep(0.05)

    def count(self):
        with self.lock:
            return len(self.acknowledged)

    def end(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)
        return list(self.acknowledged)


def every_acknowledged_is_there(started, tmp_path, user, acknowledged):
    again = started(str(tmp_path), ["--rate-limit", "100000/s"], db=user.server.db)
    try:
        me = User(again, user.id, user.key)
        missing = []
        for payment in acknowledged:
            r = me.get(f"/v1/payments/{payment}")
            while r.status == 429:  # the user's rate limit
                time.sleep(float(r.header("Retry-After") or 1))
                r = me.get(f"/v1/payments/{payment}")
            if r.status != 200:
                missing.append((payment, r.status))
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged payments lost"
    finally:
        assert again.stop() == 0


def test_sigterm_ends_the_node_whose_database_stopped_under_load(started, cluster, tmp_path):
    node = node_on(started, cluster, tmp_path)
    user = node.create_user("stopped")
    account = user.create_account()
    clients = Clients(user, account)
    deadline = time.time() + 10
    while clients.count() < 20 and time.time() < deadline:
        time.sleep(0.1)
    pids = cluster_pids(cluster)
    signal_all(pids, signal.SIGSTOP)
    try:
        time.sleep(LEASE_TTL_S + 1)  # past the node's lease: nothing can renew it
        took = sigterm_and_time(node)
        acknowledged = clients.end()
    finally:
        signal_all(pids, signal.SIGCONT)
    assert took <= SHUTDOWN_TIMEOUT_S + 1, f"exited {took:.1f} s after SIGTERM"
    assert len(acknowledged) >= 20
    every_acknowledged_is_there(started, tmp_path, user, acknowledged)


def test_writes_resume_when_the_database_is_back_before_the_lease_runs_out(started, cluster,
                                                                            tmp_path):
    node = node_on(started, cluster, tmp_path)
    user = node.create_user("paused")
    account = user.create_account()
    clients = Clients(user, account)
    time.sleep(1)
    pids = cluster_pids(cluster)
    signal_all(pids, signal.SIGSTOP)
    # inside the lease (15 s from its last renewal, a few seconds at most before the pause):
    # ids go on until 10 s after that renewal, and the first renewal after the pause extends them
    time.sleep(5)
    paused_at = clients.count()
    signal_all(pids, signal.SIGCONT)
    deadline = time.time() + 20
    while clients.count() < paused_at + 20 and time.time() < deadline:
        time.sleep(0.1)
    resumed = clients.count() - paused_at
    took = sigterm_and_time(node)
    acknowledged = clients.end()
    assert resumed >= 20, f"{resumed} payments acknowledged in 20 s after the database came back"
    assert node.proc.returncode == 0, node.read_log()[-1500:]
    assert took <= SHUTDOWN_TIMEOUT_S + 1, f"exited {took:.1f} s after SIGTERM"
    every_acknowledged_is_there(started, tmp_path, user, acknowledged)


def test_a_charge_that_outlives_the_lease_answers_503_and_its_key_resumes(started, cluster,
                                                                          tmp_path):
    """The payment's record needs an id after its charge; with the node's lease lapsed meanwhile
    it answers 503 at once instead of waiting for a renewal (which could hold the store's
    writer), and the key stays in doubt: the retry records the same charge, once."""
    database = cluster.new_database()
    charge_sleep_s = LEASE_TTL_S - 2  # ends past the ids' bound (10 s after the last renewal)
    # the key's lock runs out soon, so the retry takes it over even when its unlock, written
    # while the database was stopped, failed; no recoverer settles it before the retry does
    node = node_on(started, cluster, tmp_path, database=database,
                   env={"PAYD_FAULT": f"sleep@after-charge={charge_sleep_s * 1000}"},
                   args=["--idempotency-lock-timeout", "3s", "--processor-timeout", "1s",
                         "--recovery-interval", "1h"])
    user = node.create_user("lapsed")
    account = user.create_account()
    key = os.urandom(8).hex()
    first = {}
    client = threading.Thread(target=lambda: first.update(r=pay(user, account, key, timeout=60)))
    client.start()
    deadline = time.time() + 10
    while '"at":"after-charge"' not in node.read_log():  # charged: now the lease may lapse
        assert time.time() < deadline, node.read_log()[-1500:]
        time.sleep(0.02)
    pids = cluster_pids(cluster)
    signal_all(pids, signal.SIGSTOP)
    try:
        time.sleep(charge_sleep_s + 1)  # the record asks for its id with the database away
    finally:
        signal_all(pids, signal.SIGCONT)
    client.join(30)
    r = first["r"]
    assert r.status == 503, (r, node.read_log()[-1500:])
    assert r.json["code"] == "database_unavailable" and r.header("Retry-After")
    assert "lease lapsed" in r.json["detail"]
    deadline = time.time() + 30
    # 503 until the lease is renewed, 409 until the key's lock runs out if its unlock failed
    while r.status != 201 and time.time() < deadline:
        time.sleep(0.2)
        r = pay(user, account, key)
    assert r.status == 201, r
    charges = cluster.psql("SELECT count(*) FROM processor_charges", database)
    payments = cluster.psql("SELECT count(*) FROM payments", database)
    assert (charges, payments) == ("1", "1")
    assert sigterm_and_time(node) <= SHUTDOWN_TIMEOUT_S + 1
