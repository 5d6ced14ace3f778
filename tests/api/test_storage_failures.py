"""When the database cannot write, and sums that would not fit (docs/concurrency.md, "When
writes fail" and "Balances and sums"): a full disk answers 503 with Retry-After on every route
that writes and /readyz follows it; a balance that would pass the largest 64-bit integer is
refused with 409 balance_limit_exceeded and nothing moves."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import BACKEND, Payd, User

INT64_MAX = 2**63 - 1


def key():
    return uuid.uuid4().hex


def numeric(payd_id):
    """The 64-bit id inside "<prefix>_<13 Crockford base32 chars>"."""
    value = 0
    for ch in payd_id.split("_", 1)[1]:
        value = value * 32 + "0123456789abcdefghjkmnpqrstvwxyz".index(ch)
    return value


def balance(server, account):
    return server.sql(f"SELECT balance FROM accounts WHERE id = {numeric(account['id'])}")


def set_balance_while_stopped(server, account, value):
    """The largest payment is 999,999,999,999, so a balance near the limit is written directly,
    with payd stopped, which then starts again on the same port."""
    server.stop()
    server.execute(f"UPDATE accounts SET balance = {value} WHERE id = {numeric(account['id'])}")
    server.start(server.port)


def assert_stored_as_integer(server, account):
    if BACKEND != "postgres":  # SQLite turns an overflowing sum into a REAL
        kind = server.sql(f"SELECT typeof(balance) FROM accounts WHERE id = {numeric(account['id'])}")
        assert kind == "integer"


def test_payment_that_would_overflow_the_balance_is_refused(fresh_server):
    server = fresh_server()
    user = server.create_user("overflow")
    account = user.create_account()
    assert user.pay(account, amount=1000).status == 201
    near = INT64_MAX - 500
    set_balance_while_stopped(server, account, near)
    payments_before = server.sql("SELECT COUNT(*) FROM payments")

    idem = key()
    r = user.pay(account, amount=1000, idem=idem)
    assert r.status == 409, r
    assert r.json["code"] == "balance_limit_exceeded", r
    # nothing moved: the same integer, no payment row, and no charge stands for it. The builtin
    # processor charges inside the payment's own job, which takes its charge back (a processor
    # called over HTTP would have it voided: a refund under the charge)
    assert balance(server, account) == near
    assert_stored_as_integer(server, account)
    assert server.sql("SELECT COUNT(*) FROM payments") == payments_before
    assert server.sql("SELECT COUNT(*) FROM processor_charges c WHERE NOT EXISTS "
                      "(SELECT 1 FROM processor_refunds r WHERE r.charge_id = c.charge_id)") \
        == payments_before
    assert user.get(f"/v1/accounts/{account['id']}").json["balance"] == near
    # a business refusal, stored with the key as a decline is: the same answer again
    again = user.pay(account, amount=1000, idem=idem)
    assert again.status == 409 and again.raw == r.raw, again
    assert again.header("Idempotent-Replayed") == "true"
    # what still fits goes through, up to the last unit
    assert user.pay(account, amount=500).status == 201
    assert balance(server, account) == INT64_MAX
    assert_stored_as_integer(server, account)
    assert user.pay(account, amount=1).json["code"] == "balance_limit_exceeded"


def test_transfer_that_would_overflow_the_balance_is_refused(fresh_server):
    server = fresh_server()
    user = server.create_user("overflow")
    source, full = user.create_account(), user.create_account()
    assert user.pay(source, amount=5000).status == 201
    near = INT64_MAX - 10
    set_balance_while_stopped(server, full, near)

    body = {"biz_seq": "ovf-" + key(), "from_account": source["id"], "to_account": full["id"],
            "amount": 1000, "currency": "USD"}
    r = user.post("/v1/transfers", body)
    assert r.status == 409, r
    assert r.json["code"] == "balance_limit_exceeded", r
    assert balance(server, full) == near
    assert balance(server, source) == 5000
    assert_stored_as_integer(server, full)
    # recorded as a failed transfer: the same biz_seq answers the same refusal
    again = user.post("/v1/transfers", body)
    assert again.status == 409 and again.raw == r.raw, again
    # money may still leave the full account
    back = dict(body, biz_seq="ovf-" + key(), from_account=full["id"], to_account=source["id"])
    assert user.post("/v1/transfers", back).status == 201
    assert balance(server, full) == near - 1000


def test_stats_that_would_overflow_a_total_are_refused(fresh_server):
    """Each hour of the volume rollup fits, but a day of them would not: summed with checked
    arithmetic, not by SQL's SUM (SQLite's raises an error, PostgreSQL's is wider than bigint)."""
    server = fresh_server()
    user = server.create_user("volume")
    account = user.create_account()
    day = 1767225600 * 1000000  # 2026-01-01T00:00:00Z in µs
    hour = 3600 * 1000000
    near = INT64_MAX - 10
    server.execute(*[
        "INSERT INTO payment_volume (account_id, bucket_start, succeeded_count, "
        f"succeeded_amount, refunded_amount) VALUES ({numeric(account['id'])}, {day + h * hour}, "
        f"1, {near}, 0)" for h in (1, 2)])
    path = f"/v1/accounts/{account['id']}/payments/stats"
    r = user.get(path + "?interval=day&created_gte=2026-01-01T00:00:00Z")
    assert r.status == 409 and r.json["code"] == "balance_limit_exceeded", r
    one = user.get(path + "?interval=hour&created_gte=2026-01-01T01:00:00Z"
                   "&created_lt=2026-01-01T02:00:00Z")
    assert one.status == 200, one
    assert one.json["total"]["amount"] == near and len(one.json["data"]) == 1


# ---- a full disk ----

def mount_tmpfs(size):
    """A small tmpfs of its own, or a skip saying why there is none."""
    if BACKEND == "postgres":
        pytest.skip("the disk-full test puts payd's SQLite file on a small tmpfs; PostgreSQL's "
                    "disk-full class (SQLSTATE 53xxx) is mapped in store/db.c")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs the suite as root)")
    where = tempfile.mkdtemp(prefix="payd-full-")
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", where],
                         capture_output=True, text=True)
    if out.returncode != 0:
        os.rmdir(where)
        pytest.skip(f"cannot mount a tmpfs here: {out.stderr.strip()}")
    return where


def fill(directory):
    """Writes a file until the filesystem has no room left; returns its path."""
    path = os.path.join(directory, "filler")
    chunk = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
        while True:  # the last partial blocks too
            try:
                f.write(b"\0" * 512)
            except OSError:
                break
    return path


def writes(user, account, payment, targets):
    """One request per route that writes, each with a body that would succeed."""
    seq = "full-" + key()
    other = key()
    return [
        ("POST /v1/accounts", lambda: user.post("/v1/accounts", {"currency": "USD"})),
        ("POST /v1/payments", lambda: user.pay(account, amount=300)),
        ("POST /v1/payments/{id}/refunds",
         lambda: user.post(f"/v1/payments/{payment['id']}/refunds", {"amount": 1}, idem=key())),
        ("POST /v1/orders", lambda: user.post("/v1/orders", {
            "external_order_id": "full-" + other, "amount": 100, "currency": "USD"})),
        ("POST /v1/transfers", lambda: user.post("/v1/transfers", {
            "biz_seq": seq, "from_account": account["id"], "to_account": payment["account_id"],
            "amount": 1, "currency": "USD"})),
        ("PATCH /v1/users/me", lambda: user.request("PATCH", "/v1/users/me", {"name": "renamed"})),
        ("POST /v1/api_keys", lambda: user.post("/v1/api_keys", {"name": "k"})),
        ("POST /v1/products", lambda: user.post("/v1/products", {
            "sku": "full-" + other, "name": "mug", "stock": 3})),
        ("PATCH /v1/products/{sku}", lambda: user.request(
            "PATCH", f"/v1/products/{targets['product']}", {"name": "cup"})),
        ("POST /v1/products/{sku}/reservations", lambda: user.post(
            f"/v1/products/{targets['product']}/reservations", {"quantity": 1}, idem=key())),
        ("PUT /v1/orders/{id}/status", lambda: user.request(
            "PUT", f"/v1/orders/{targets['order']}/status", {"status": "cancelled"})),
        ("POST /v1/webhook_endpoints", lambda: user.post("/v1/webhook_endpoints", {
            "url": "http://127.0.0.1:9/full", "events": ["*"]})),
        ("PATCH /v1/webhook_endpoints/{id}", lambda: user.request(
            "PATCH", f"/v1/webhook_endpoints/{targets['endpoint']}", {"disabled": True})),
        ("DELETE /v1/webhook_endpoints/{id}", lambda: user.request(
            "DELETE", f"/v1/webhook_endpoints/{targets['doomed_endpoint']}")),
        ("DELETE /v1/api_keys/{id}", lambda: user.request(
            "DELETE", f"/v1/api_keys/{targets['api_key']}")),
    ]


def test_full_disk_answers_503_everywhere_and_readyz_follows(tmp_path):
    where = mount_tmpfs("3m")
    server = None
    try:
        server = Payd(str(tmp_path), db=os.path.join(where, "payd.db")).start()
        user = server.create_user("full")
        account, second = user.create_account(), user.create_account()
        acknowledged = [user.pay(account, amount=1000 + i).json for i in range(5)]
        payment = user.pay(second, amount=5000).json
        hook = {"url": "http://127.0.0.1:9/full", "events": ["*"]}
        targets = {
            "product": user.post("/v1/products", {"sku": "full-sku", "name": "mug",
                                                  "stock": 50}).json["sku"],
            "order": user.post("/v1/orders", {"external_order_id": "full-order", "amount": 100,
                                              "currency": "USD"}).json["id"],
            "endpoint": user.post("/v1/webhook_endpoints", hook).json["id"],
            "doomed_endpoint": user.post("/v1/webhook_endpoints", hook).json["id"],
            "api_key": user.post("/v1/api_keys", {"name": "doomed"}).json["id"],
        }
        assert server.request("GET", "/readyz").status == 200

        filler = fill(where)
        failed_payment_key = key()
        answers = {}
        for name, send in writes(user, account, payment, targets):
            r = send()
            answers[name] = r
            assert r.status == 503, (name, r)
            assert r.json["code"] == "database_unavailable", (name, r)
            assert r.header("Retry-After") == "1", (name, r)
        r = user.pay(account, amount=777, idem=failed_payment_key)
        assert r.status == 503, r
        # each failure is logged with its request's id
        log = server.read_log()
        for name, r in answers.items():
            rid = r.header("X-Request-Id")
            assert any(rid in line and '"error"' in line for line in log.splitlines()), (name, rid)
        ready = server.request("GET", "/readyz")
        assert ready.status == 503 and ready.header("Retry-After") == "1", ready
        assert ready.json["code"] == "not_ready"
        # reads still work while writes fail
        assert user.get(f"/v1/payments/{acknowledged[0]['id']}").status == 200

        os.unlink(filler)
        # the writer tries a small write every second, and writes count as succeeding again 3 s
        # after the last failure
        deadline = time.time() + 20
        while server.request("GET", "/readyz").status != 200:
            assert time.time() < deadline, "readyz did not come back after space was freed"
            time.sleep(0.2)
        assert user.post("/v1/accounts", {"currency": "USD"}).status == 201
        # the key of the payment that failed resumes, and charges once
        assert user.pay(account, amount=777, idem=failed_payment_key).status == 201
        for name, send in writes(user, account, payment, targets):
            r = send()
            assert r.status < 300, (name, r)

        # nothing acknowledged was lost, also across a restart
        server.stop()
        server.start(server.port)
        for p in acknowledged:
            got = user.get(f"/v1/payments/{p['id']}")
            assert got.status == 200 and got.json == p, got
        assert server.sql("SELECT COUNT(*) FROM payments WHERE amount = 777") == 1
    finally:
        if server:
            server.stop()
        # lazily, should anything still hold the filesystem; its directory goes once it is free
        if subprocess.run(["umount", where]).returncode != 0:
            subprocess.run(["umount", "-l", where], check=False)
        shutil.rmtree(where, ignore_errors=True)


def test_takeover_of_a_charged_key_at_the_limit_leaves_the_void_to_the_recoverer(fresh_server):
    """A payment through the builtin processor charges in its own write job, which takes its
    own charge back when the balance cannot take the payment. A charge an earlier holder of the
    key made is not the job's to take back: the holder crashed after charging, the retry takes
    the key over and finds the balance at its limit. It answers 503 and leaves the key in doubt;
    the recoverer voids the charge and stores the refusal, which the next retry replays."""
    server = fresh_server(env={"PAYD_FAULT": "crash-after-charge"})
    user = server.create_user("takeover")
    account = user.create_account()
    near = INT64_MAX - 500
    set_balance_while_stopped(server, account, near)
    idem = key()
    with pytest.raises(Exception):
        user.pay(account, amount=1000, idem=idem)  # charged, then the process dies
    server.proc.wait(10)
    crashed_at = time.time()
    assert server.sql("SELECT COUNT(*) FROM processor_charges") == 1
    assert server.sql("SELECT COUNT(*) FROM payments") == 0

    # no recoverer pass after the one at start-up, which comes well before the lock times out
    # (a start-up takes a second or two on a busy machine): the retry is the one to take the
    # key over
    lock_s = 6
    server.log.close()
    server.env.pop("PAYD_FAULT")
    server.args = ["--idempotency-lock-timeout", f"{lock_s}s", "--processor-timeout", "500ms",
                   "--recovery-interval", "1h"]
    server.start(server.port)
    time.sleep(max(0.0, crashed_at + lock_s + 0.5 - time.time()))
    r = user.pay(account, amount=1000, idem=idem)
    assert r.status == 503 and r.json["code"] == "processor_unavailable", r
    assert r.header("Retry-After"), r
    state = "SELECT state FROM idempotency_keys WHERE idem_key = '%s'" % idem
    assert server.sql(state) in ("started", "in_doubt")
    assert server.sql("SELECT COUNT(*) FROM processor_charges") == 1  # no second charge
    assert server.sql("SELECT COUNT(*) FROM processor_refunds") == 0  # nor a void yet
    assert balance(server, account) == near

    # the recoverer settles it: the charge voided, the refusal stored with the key
    server.stop()
    server.args[-1] = "200ms"
    server.start(server.port)
    deadline = time.time() + 15
    while time.time() < deadline and server.sql(state) != "completed":
        time.sleep(0.2)
    assert server.sql(state) == "completed", server.read_log()[-2000:]
    assert server.sql("SELECT COUNT(*) FROM processor_refunds r JOIN processor_charges c "
                      "ON r.charge_id = c.charge_id WHERE r.amount = c.amount") == 1
    again = user.pay(account, amount=1000, idem=idem)
    assert again.status == 409 and again.json["code"] == "balance_limit_exceeded", again
    assert again.header("Idempotent-Replayed") == "true"
    assert server.sql("SELECT COUNT(*) FROM payments") == 0
    assert balance(server, account) == near
