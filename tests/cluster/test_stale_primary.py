"""payd's timeline guard (docs/operations.md, "Failover"): a node that has written on a promoted
standby's timeline refuses a primary on an older timeline (a former primary that has not yet
noticed its demotion) with 503 and Retry-After, logs it once, and writes again as soon as the
new primary is back, without a restart.

Two primaries at once, as after a failover whose old primary was never stopped: A, and B made
from A by pg_basebackup and promoted (timeline 2). The node's libpq multi-host URL lists B
first, then A."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid

from harness import PAYD, Node, Postgres, free_port, pg, request


def as_postgres(*cmd):
    subprocess.run(pg._as_postgres(list(cmd)), check=True, capture_output=True)


def cli(db_url, *args):
    out = subprocess.run([PAYD, *args, "--db", db_url], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def pay(port, key, account):
    return request(port, "POST", "/v1/payments", key,
                   {"account_id": account, "amount": 700, "currency": "USD",
                    "source": "tok_visa"}, {"Idempotency-Key": uuid.uuid4().hex}, timeout=30)


def test_a_primary_on_an_older_timeline_is_refused():
    tmp = tempfile.mkdtemp(prefix="payd-stale-")
    a = Postgres()
    standby = os.path.join(a.c.dir, "standby")
    b_port = free_port()
    node = None
    ctl_b = [f"{a.c.bindir}/pg_ctl", "-D", standby, "-l", os.path.join(a.c.dir, "standby.log"),
             "-w", "-t", "60"]
    b_options = ["-o", f"-p {b_port} -k {a.c.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                 "-c max_connections=200"]
    try:
        a.psql("CREATE DATABASE payd")
        key = cli(a.url("payd"), "user", "create", "stale")["api_key"]
        as_postgres(f"{a.c.bindir}/pg_basebackup", "-h", a.c.dir, "-p", str(a.c.port), "-U",
                    "postgres", "-D", standby, "-X", "stream", "-R", "-c", "fast")
        as_postgres(*ctl_b, "start", *b_options)
        as_postgres(*ctl_b, "promote")

        both = (f"postgres://postgres@127.0.0.1:{b_port},127.0.0.1:{a.c.port}/payd"
                "?target_session_attrs=read-write")
        node = Node(tmp, 7, both).start()
        status, _, account = request(node.port, "POST", "/v1/accounts", key, {"currency": "USD"})
        assert status == 201, account
        status, _, paid = pay(node.port, key, account["id"])
        assert status == 201, paid
        assert pg_query(a, b_port, "SELECT count(*) FROM payments") == "1"

        # B goes away: libpq moves on to A, which accepts writes on timeline 1
        as_postgres(*ctl_b, "-m", "fast", "stop")
        # (without the guard the node, once reconnected, answers from A within a few seconds: a
        # 409, since the account was made on B after the copy)
        deadline = time.time() + 8
        while time.time() < deadline:
            status, headers, body = pay(node.port, key, account["id"])
            assert status == 503, body
            assert "retry-after" in headers
            time.sleep(0.2)
        assert a.psql("SELECT count(*) FROM payments", "payd") == "0"
        refused = [line for line in node.log_lines()
                   if line.get("msg") == "stale PostgreSQL primary refused"]
        assert len(refused) == 1, node.read_log()[-2000:]
        assert "timeline 1" in refused[0].get("error", ""), refused

        # B is back: the same node writes there again, no restart
        as_postgres(*ctl_b, "start", *b_options)
        assert node.wait_ready(30), node.read_log()[-2000:]
        status, _, paid = pay(node.port, key, account["id"])
        assert status == 201, paid
        assert pg_query(a, b_port, "SELECT count(*) FROM payments") == "2"
    finally:
        if node:
            node.stop()
        subprocess.run(pg._as_postgres([f"{a.c.bindir}/pg_ctl", "-D", standby, "-m",
                                        "immediate", "stop"]), capture_output=True)
        a.close()
        shutil.rmtree(tmp, ignore_errors=True)


def pg_query(a, port, sql):
    out = subprocess.run([f"{a.c.bindir}/psql", "-At", "-X", "-c", sql,
                          f"postgres://postgres@127.0.0.1:{port}/payd"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()
