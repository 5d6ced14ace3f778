"""The connection budget and the timeouts: four nodes fit a small max_connections, a node that
cannot get a connection says so on /readyz, and a payment stuck behind another session's row
lock, or behind a full write pool, is answered 503 with Retry-After instead of waiting."""

import subprocess
import threading
import time
import uuid

from harness import PAYD, Cluster, Node, request


def pay(port, key, account, idem=None):
    idem = idem or "k-" + uuid.uuid4().hex
    body = {"account_id": account, "amount": 100, "currency": "USD", "source": "tok_visa"}
    return request(port, "POST", "/v1/payments", key, body, {"Idempotency-Key": idem},
                   timeout=30)


def per_node_connections(cl):
    rows = cl.pg.psql("SELECT application_name, count(*) FROM pg_stat_activity "
                      "WHERE application_name LIKE 'payd node %' GROUP BY 1").splitlines()
    return {r.split("|")[0]: int(r.split("|")[1]) for r in rows}


def full(cl):
    """True when PostgreSQL refuses a new connection."""
    try:
        cl.pg.psql("SELECT 1")
        return False
    except subprocess.CalledProcessError as e:
        return "too many clients" in (e.stderr or "")


def test_four_nodes_fit_a_small_max_connections_and_a_starved_node_is_not_ready():
    # 4 nodes x 6 = 24 of 30 connections
    cl = Cluster(nodes=4, node_args=["--db-max-connections", "6"], with_redis=False,
                 max_connections=30)
    sleepers = []
    try:
        key = cl.new_user()
        status, _, acct = request(cl.haproxy.port, "POST", "/v1/accounts", key,
                                  {"currency": "USD"})
        assert status == 201
        answers, peak = [], {}
        stop = threading.Event()

        def load(node):
            while not stop.is_set():
                s, _, _ = pay(node.port, key, acct["id"])
                g, _, _ = request(node.port, "GET", f"/v1/accounts/{acct['id']}", key)
                answers.extend([s, g])

        threads = [threading.Thread(target=load, args=(n,)) for n in cl.nodes for _ in range(8)]
        for t in threads:
            t.start()
        end = time.time() + 4
        while time.time() < end:
            for name, count in per_node_connections(cl).items():
                peak[name] = max(peak.get(name, 0), count)
            time.sleep(0.1)
        stop.set()
        for t in threads:
            t.join()
        assert set(answers) <= {200, 201}, sorted(set(answers))
        assert len(peak) == 4 and all(c <= 6 for c in peak.values()), peak
        assert all(n.ready() for n in cl.nodes)

        # take every connection slot left, then start a fifth node: it has none
        used = int(cl.pg.psql("SELECT count(*) FROM pg_stat_activity "
                              "WHERE backend_type = 'client backend'"))

        def sleeper():
            sleepers.append(subprocess.Popen(
                [f"{cl.pg.c.bindir}/psql", "-X", "-c", "SELECT pg_sleep(60)",
                 cl.pg.url("postgres")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        for _ in range(30 - used - 1):
            sleeper()
        deadline = time.time() + 15
        while time.time() < deadline and not full(cl):
            sleeper()  # one more for each slot still free
            time.sleep(0.3)
        assert full(cl), "could not fill PostgreSQL's connection slots"
        starved = Node(cl.tmp, 5, cl.db_url, ["--db-max-connections", "6"])
        cl.nodes.append(starved)
        starved.start(wait_ready=False)
        time.sleep(1.5)
        status, headers, body = request(starved.port, "GET", "/readyz")
        assert status == 503 and "retry-after" in headers, (status, body)
        status, headers, body = request(starved.port, "GET", "/v1/users/me", key)
        assert status == 503 and "retry-after" in headers, (status, body)
        assert body["code"] == "database_unavailable", body
        # the nodes that hold their connections still serve
        assert all(n.ready() for n in cl.nodes[:4])

        for p in sleepers:
            p.kill()
            p.wait()
        assert starved.wait_ready(10), "the starved node never became ready"
        cl.verify_ledger()
    finally:
        for p in sleepers:
            if p.poll() is None:
                p.kill()
                p.wait()
        cl.close()


def test_lock_and_pool_timeouts_answer_503_instead_of_waiting():
    cl = Cluster(nodes=1, with_redis=False,
                 node_args=["--db-lock-timeout", "1s", "--db-max-connections", "2",
                            "--db-pool-timeout", "300ms"])
    holder = None
    try:
        node = cl.nodes[0]
        key = cl.new_user()
        status, _, acct = request(node.port, "POST", "/v1/accounts", key, {"currency": "USD"})
        assert status == 201
        assert pay(node.port, key, acct["id"])[0] == 201
        account_row = cl.pg.psql(f"SELECT id FROM accounts WHERE balance > 0", cl.db)

        # another session holds the account's row lock for 8 s
        holder = subprocess.Popen(
            [f"{cl.pg.c.bindir}/psql", "-X", "-c",
             f"BEGIN; SELECT 1 FROM accounts WHERE id = {account_row} FOR UPDATE; "
             "SELECT pg_sleep(8); COMMIT;", cl.db_url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # held once that session sleeps (its query shows as soon as it starts, before the lock
        # is taken); a loaded machine may take seconds to start psql
        deadline = time.time() + 30
        while not cl.pg.psql(
                "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'BEGIN; SELECT 1 FROM accounts%' "
                "AND wait_event = 'PgSleep'"):
            assert time.time() < deadline, "the session holding the row lock never started"
            time.sleep(0.05)

        results = {}

        def stuck_payment():
            results["locked_key"] = "k-" + uuid.uuid4().hex
            results["locked"] = pay(node.port, key, acct["id"], idem=results["locked_key"])

        # the one write connection waits on the lock (up to the lock timeout); meanwhile a second
        # write waits for it longer than the pool timeout
        t = threading.Thread(target=stuck_payment)
        t.start()
        time.sleep(0.3)
        results["pool"] = pay(node.port, key, acct["id"])
        t.join()

        # the stuck payment is one write job (its key's claim, the builtin processor's charge
        # and the payment commit together): the lock timeout undid all three, so no key was
        # claimed and nothing charged, and it is answered as any write the database was too
        # busy for (a key claimed before the timeout would answer database_timeout)
        status, headers, body = results["locked"]
        assert status == 503 and "retry-after" in headers, (status, body)
        assert body["code"] == "overloaded", body
        assert cl.pg.psql(f"SELECT count(*) FROM idempotency_keys "
                          f"WHERE idem_key = '{results['locked_key']}'", cl.db) == "0"
        status, headers, body = results["pool"]
        assert status == 503 and "retry-after" in headers, (status, body)
        assert body["code"] == "overloaded", body

        holder.wait(15)
        assert pay(node.port, key, acct["id"])[0] == 201  # and all is well once it lets go
        # the stuck payment's retry, with its key, is its first attempt: one payment, one charge
        status, _, body = pay(node.port, key, acct["id"], idem=results["locked_key"])
        assert status == 201, (status, body)
        cl.verify_ledger()
    finally:
        if holder and holder.poll() is None:
            holder.kill()
            holder.wait()
        cl.close()


def test_idle_connections_are_closed():
    cl = Cluster(nodes=1, with_redis=False, node_args=["--db-idle-timeout", "1s"])
    try:
        node = cl.nodes[0]
        key = cl.new_user()
        status, _, acct = request(node.port, "POST", "/v1/accounts", key, {"currency": "USD"})
        assert status == 201
        threads = [threading.Thread(target=lambda: [pay(node.port, key, acct["id"])
                                                    for _ in range(20)]) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = per_node_connections(cl)["payd node 1"]
        assert busy > 2, busy
        time.sleep(2)
        assert node.ready()  # a connection taken and given back closes those idle too long
        assert per_node_connections(cl)["payd node 1"] <= 2, per_node_connections(cl)
        cl.verify_ledger()
    finally:
        cl.close()
