"""PostgreSQL's month partitions of events and payments (docs/operations.md, "Partitions"): a
lookup by id reads one partition, a keyset page walks each partition's page index under one
LIMIT, and retention drops the months of events older than --event-retention whole, without
touching a row of the months still live; payments are never dropped."""
import datetime
import json
import time

import pytest

from conftest import BACKEND

pytestmark = pytest.mark.skipif(BACKEND != "postgres",
                                reason="SQLite's tables are not partitioned")

PAYD_EPOCH_MS = 1767225600000  # 2026-01-01T00:00:00Z, the Snowflake epoch (docs/api.md §1)
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
PLANTED = 40  # events and payments in each old month


def decode(text_id):
    n = 0
    for ch in text_id.split("_", 1)[1]:
        n = n * 32 + ALPHABET.index(ch)
    return n


def encode(prefix, n):
    return prefix + "_" + "".join(ALPHABET[(n >> (5 * i)) & 31] for i in range(12, -1, -1))


def month_start(months_ago):
    now = datetime.datetime.now(datetime.timezone.utc)
    y, m = now.year, now.month - months_ago
    while m < 1:
        y, m = y - 1, m + 12
    while m > 12:
        y, m = y + 1, m - 12
    return datetime.datetime(y, m, 1, tzinfo=datetime.timezone.utc)


def first_id(when):
    return (int(when.timestamp() * 1000) - PAYD_EPOCH_MS) << 22


def partitions(s, table):
    return s.sql(f"SELECT count(*) FROM pg_inherits WHERE inhparent = '{table}'::regclass")


def partition_of(s, table, row_id):
    return s.sql(f"SELECT tableoid::regclass FROM {table} WHERE id = {row_id}")


def plan(s, query, *settings):
    """The executed plan of query (EXPLAIN ANALYZE, JSON), its scan nodes flattened."""
    out = s.sql("; ".join([f"SET {x}" for x in settings] +
                          [f"EXPLAIN (ANALYZE, FORMAT JSON) {query}"]))
    top = json.loads(out[out.index("["):])[0]["Plan"]
    nodes = []

    def walk(n):
        nodes.append(n)
        for child in n.get("Plans", []):
            walk(child)
    walk(top)
    return top, nodes


def test_month_partitions_lookup_page_and_retention(fresh_server):
    # old months exist only before 2026-03 if now is before the epoch's third month: the
    # planted months must lie after the epoch (2026-01)
    if month_start(4) < datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc):
        pytest.skip("the clock is too close to the Snowflake epoch for months 3 and 4 back")
    # first a retention longer than the planted months' age, so the pruner leaves them alone
    # while they are looked at
    s = fresh_server(["--event-retention", "87600h", "--recovery-interval", "200ms"])
    u = s.create_user(rate_limit="100000/s")
    account = u.create_account()
    live = [u.pay(account, amount=100 + i).json["id"] for i in range(5)]
    account_id = decode(account["id"])
    user_id = s.sql(f"SELECT user_id FROM accounts WHERE id = {account_id}")
    live_events = s.sql(f"SELECT count(*) FROM events WHERE user_id = {user_id}")
    assert live_events >= 5  # the payments' and the account's

    # this month and the next two exist from the migration and the pruner
    for table in ("events", "payments"):
        for k in (0, -1, -2):
            name = f"{table}_p{month_start(k):%Y_%m}"
            assert s.sql(f"SELECT to_regclass('{name}') IS NOT NULL") == "t", name

    # rows of months 4 and 3 back: into the DEFAULT partition (no partition of theirs yet),
    # then moved out when their month's partition is made, as the migration makes them
    old_months = [month_start(4), month_start(3)]
    planted_payments = []
    for when in old_months:
        base = first_id(when + datetime.timedelta(days=9)) | (1023 << 12)  # node 1023: unused
        t_us = int(when.timestamp() * 1e6) + 9 * 86400 * 10**6
        rows = f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {PLANTED - 1})"
        s.execute(
            f"{rows} INSERT INTO events (id, user_id, type, data, created_at)"
            f" SELECT {base} + i, {user_id}, 'payment.succeeded', '{{}}', {t_us} + i FROM n",
            f"{rows} INSERT INTO payments (id, user_id, account_id, amount, currency, status,"
            f" source, created_at, amount_captured) SELECT {base} + i, {user_id}, {account_id},"
            f" 1, 'USD', 'succeeded', 'tok_visa', {t_us} + i, 1 FROM n")
        planted_payments.append(base)
        assert partition_of(s, "events", base) == "events_default"
        for table in ("events", "payments"):
            assert s.sql(f"SELECT payd_ensure_partition('{table}', '{when.isoformat()}')") == "t"
            assert partition_of(s, table, base) == f"{table}_p{when:%Y_%m}"
    assert s.sql("SELECT count(*) FROM events_default") == 0
    assert s.sql("SELECT count(*) FROM payments_default") == 0

    # a lookup by id, as payd makes it (a prepared statement, its generic plan too): one index
    # probe of one partition, the others pruned before they are opened
    old_payment = planted_payments[0] + 7
    for mode in ("force_custom_plan", "force_generic_plan"):
        out = s.sql(f"SET plan_cache_mode = {mode}; "
                    "PREPARE by_id(bigint) AS SELECT id, amount FROM payments WHERE id = $1; "
                    f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE by_id({old_payment})")
        top = json.loads(out[out.index("["):])[0]["Plan"]
        scans = []

        def walk(n):
            if "Relation Name" in n:
                scans.append(n)
            for child in n.get("Plans", []):
                walk(child)
        walk(top)
        assert len(scans) == 1, (mode, top)
        assert scans[0]["Relation Name"] == f"payments_p{old_months[0]:%Y_%m}", scans
        assert scans[0]["Node Type"] in ("Index Scan", "Index Only Scan"), scans
        assert scans[0]["Actual Rows"] == 1
    r = u.get(f"/v1/payments/{encode('pay', old_payment)}")
    assert r.status == 200 and r.json["amount"] == 1, r

    # a keyset page (payd's list query, past a cursor): each partition's page index walked
    # backwards under a Merge Append, which stops at the LIMIT. The tables are tiny, so the
    # planner would rather read them whole: sequential scans are turned off to see the plan
    # the index gives.
    cursor_id = planted_payments[1] + 20
    cursor_at = s.sql(f"SELECT created_at FROM payments WHERE id = {cursor_id}")
    top, nodes = plan(s, f"SELECT id FROM payments WHERE account_id = {account_id} AND"
                         f" (created_at, id) < ({cursor_at}, {cursor_id})"
                         " ORDER BY created_at DESC, id DESC LIMIT 11",
                      "enable_seqscan = off", "enable_bitmapscan = off")
    assert top["Node Type"] == "Limit", top
    assert any(n["Node Type"] == "Merge Append" for n in nodes), top
    scans = [n for n in nodes if "Relation Name" in n]
    assert len(scans) == partitions(s, "payments"), scans
    assert all(n["Node Type"] in ("Index Scan", "Index Only Scan")
               and "account_id_created_at_id" in n["Index Name"]
               and n["Scan Direction"] == "Backward" for n in scans), \
        [(n["Node Type"], n.get("Index Name"), n.get("Scan Direction")) for n in scans]
    # the LIMIT stopped each walk: 11 rows and at most one more read per partition
    assert top["Actual Rows"] == 11
    assert sum(n["Actual Rows"] for n in scans) <= 11 + len(scans), scans
    # ...and with the redundant id bound payd adds (created_at is its id's millisecond), the
    # months after the cursor's are left out: here the live month and the two ahead
    cursor_ms = cursor_at // 1000
    bound = (cursor_ms + 1 - PAYD_EPOCH_MS) << 22
    top, nodes = plan(s, f"SELECT id FROM payments WHERE account_id = {account_id} AND"
                         f" (created_at, id) < ({cursor_at}, {cursor_id}) AND id < {bound}"
                         " ORDER BY created_at DESC, id DESC LIMIT 11",
                      "enable_seqscan = off", "enable_bitmapscan = off")
    pruned = sorted(n["Relation Name"] for n in nodes if "Relation Name" in n)
    assert pruned == sorted(["payments_default", f"payments_p{old_months[0]:%Y_%m}",
                             f"payments_p{old_months[1]:%Y_%m}"]), pruned
    assert top["Actual Rows"] == 11
    # payd's own pages, across the months, both ways: every payment once, newest first
    seen, pages, path = [], [], f"/v1/accounts/{account['id']}/payments?limit=7"
    while path:
        page = u.get(path)
        assert page.status == 200, page
        pages.append(page.json)
        seen += [p["id"] for p in page.json["data"]]
        nxt = page.json.get("next_cursor") if page.json.get("has_more") else None
        path = f"/v1/accounts/{account['id']}/payments?limit=7&cursor={nxt}" if nxt else None
    expected = s.sql(f"SELECT string_agg(id::text, ',' ORDER BY created_at DESC, id DESC)"
                     f" FROM payments WHERE account_id = {account_id}")
    assert [decode(x) for x in seen] == [int(x) for x in expected.split(",")]
    assert len(seen) == len(live) + 2 * PLANTED
    # backwards (the id bound from below): each page's prev_cursor gives the page before it
    for before_page, page in zip(pages, pages[1:]):
        back = u.get(f"/v1/accounts/{account['id']}/payments?limit=7"
                     f"&cursor={page['prev_cursor']}")
        assert back.status == 200, back
        assert [p["id"] for p in back.json["data"]] == [p["id"] for p in before_page["data"]]
    page = u.get("/v1/events?limit=3")
    assert page.status == 200 and len(page.json["data"]) == 3, page

    # retention (720 h): both planted months lie wholly before it and go as two DROPs; the
    # live month's events, and every payment, stay
    before = partitions(s, "events")
    assert before == 4 + 2  # the DEFAULT, this month and two ahead, the two planted
    s.stop()
    s.args = ["--event-retention", "720h", "--recovery-interval", "200ms"]
    s.start()
    deadline = time.time() + 30
    while partitions(s, "events") > before - 2 and time.time() < deadline:
        time.sleep(0.1)
    assert partitions(s, "events") == before - 2
    for when in old_months:
        assert s.sql(f"SELECT to_regclass('events_p{when:%Y_%m}') IS NULL") == "t"
        assert s.sql(f"SELECT to_regclass('payments_p{when:%Y_%m}') IS NOT NULL") == "t"
    assert s.sql(f"SELECT count(*) FROM events WHERE user_id = {user_id}") == live_events
    assert s.sql(f"SELECT count(*) FROM payments WHERE account_id = {account_id}") == \
        len(live) + 2 * PLANTED
    for pay_id in live:
        assert u.get(f"/v1/payments/{pay_id}").status == 200
    assert u.get(f"/v1/payments/{encode('pay', old_payment)}").status == 200
    dropped = [json.loads(line) for line in s.read_log().splitlines()
               if '"partitions dropped"' in line]
    assert sum(line["partitions"] for line in dropped) == 2, dropped
    # nothing of them was deleted row by row
    assert not [line for line in s.read_log().splitlines()
                if '"pruned"' in line and '"events' in line]


def test_upgrade_moves_rows_into_their_months_and_keeps_the_order_guard(fresh_server):
    """Version 17 on a database of version 16 with rows: the tables are set back to their
    version 16 shape (plain tables, the unique partial index of the order guard), rows of
    three months planted, and payd started again migrates them into month partitions."""
    import subprocess
    if month_start(4) < datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc):
        pytest.skip("the clock is too close to the Snowflake epoch for months 3 and 4 back")
    s = fresh_server(["--event-retention", "87600h"])
    u = s.create_user()
    account = u.create_account()
    assert u.pay(account).status == 201
    account_id = decode(account["id"])
    user_id = s.sql(f"SELECT user_id FROM accounts WHERE id = {account_id}")
    s.stop()
    # back to version 16
    s.execute(
        "DROP TRIGGER payments_order_hold_insert ON payments;"
        "DROP TRIGGER payments_order_hold_update ON payments;"
        "DROP TRIGGER payments_order_hold_delete ON payments;"
        "DROP FUNCTION payd_payment_order_hold(); DROP TABLE payment_order_holds;"
        "DROP FUNCTION payd_ensure_partitions(integer); DROP FUNCTION payd_ensure_partition(text,"
        " timestamptz); DROP FUNCTION payd_drop_event_partitions(bigint);",
        "CREATE TABLE events16 AS SELECT * FROM events; DROP TABLE events;"
        " ALTER TABLE events16 RENAME TO events; ALTER TABLE events ADD PRIMARY KEY (id);"
        " CREATE INDEX events_page ON events (user_id, created_at, id);"
        " CREATE INDEX events_type_page ON events (user_id, type, created_at, id);",
        "CREATE TABLE payments16 AS SELECT * FROM payments; DROP TABLE payments;"
        " ALTER TABLE payments16 RENAME TO payments; ALTER TABLE payments ADD PRIMARY KEY (id);"
        " CREATE INDEX payments_page ON payments (account_id, created_at, id);"
        " CREATE INDEX payments_status_page ON payments (account_id, status, created_at, id);"
        " CREATE INDEX payments_capture_due ON payments (capture_before)"
        "  WHERE status = 'requires_capture';"
        " CREATE UNIQUE INDEX payments_one_per_order ON payments (order_id)"
        "  WHERE order_id IS NOT NULL AND status NOT IN ('failed', 'canceled');",
        "DROP FUNCTION payd_month_first_id(timestamptz);"
        " DELETE FROM schema_migrations WHERE version = 17")
    assert s.sql("SELECT count(*) FROM pg_inherits") == 0
    months = [month_start(4), month_start(3), month_start(1)]
    planted = []
    for k, when in enumerate(months):
        base = first_id(when + datetime.timedelta(days=3)) | (1023 << 12)
        t_us = int(when.timestamp() * 1e6) + 3 * 86400 * 10**6
        for i in range(3):
            # order 7000 + k held by a succeeded payment, then a failed one for the same order
            status, order = ("succeeded", 7000 + k) if i == 0 else \
                ("failed", 7000 + k) if i == 1 else ("succeeded", "NULL")
            s.execute(
                f"INSERT INTO events (id, user_id, type, data, created_at) VALUES"
                f" ({base + i}, {user_id}, 'payment.succeeded', '{{}}', {t_us + i})",
                f"INSERT INTO payments (id, user_id, account_id, amount, currency, status, source,"
                f" order_id, created_at, amount_captured) VALUES ({base + i}, {user_id},"
                f" {account_id}, 1, 'USD', '{status}', 'tok_visa', {order}, {t_us + i}, 1)")
            planted.append(base + i)
    events_before = s.sql("SELECT count(*) FROM events")
    payments_before = s.sql("SELECT count(*) FROM payments")
    s.start()  # migrates to 17
    assert s.sql("SELECT max(version) FROM schema_migrations") == 17
    assert s.sql("SELECT count(*) FROM events") == events_before
    assert s.sql("SELECT count(*) FROM payments") == payments_before
    for row_id, when in zip(planted, [m for m in months for _ in range(3)]):
        for table in ("events", "payments"):
            assert partition_of(s, table, row_id) == f"{table}_p{when:%Y_%m}"
    assert s.sql("SELECT count(*) FROM payments_default") == 0
    # the guard came along: the held orders are held, a second payment for one is refused
    assert s.sql("SELECT string_agg(order_id::text, ',' ORDER BY order_id)"
                 " FROM payment_order_holds") == "7000,7001,7002"
    with pytest.raises(subprocess.CalledProcessError) as refused:
        s.execute(f"INSERT INTO payments (id, user_id, account_id, amount, currency, status,"
                  f" source, order_id, created_at) VALUES ({planted[-1] + 100}, {user_id},"
                  f" {account_id}, 1, 'USD', 'succeeded', 'tok_visa', 7001, 0)")
    assert "payments_one_per_order" in refused.value.stderr
    # ...until its payment is canceled
    s.execute(f"UPDATE payments SET status = 'canceled' WHERE id = {planted[3]}",
              f"INSERT INTO payments (id, user_id, account_id, amount, currency, status,"
              f" source, order_id, created_at) VALUES ({planted[-1] + 100}, {user_id},"
              f" {account_id}, 1, 'USD', 'succeeded', 'tok_visa', 7001, 0)")
    for row_id in planted:
        assert u.get(f"/v1/payments/{encode('pay', row_id)}").status == 200
    assert u.pay(account).status == 201


def test_whole_months_leaves_events_to_their_months_drop(fresh_server):
    """--event-retention-whole-months: an old month of events still goes as one DROP, but the
    events past the retention in the month the cutoff falls in stay until their month goes;
    without it they are deleted in chunks (test_retention)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    if now - month_start(0) < datetime.timedelta(hours=3) or \
            month_start(3) < datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc):
        pytest.skip("the month began less than 3 hours ago, or month 3 back is before the epoch")
    s = fresh_server(["--event-retention", "1h", "--event-retention-whole-months", "true",
                      "--recovery-interval", "200ms"])
    young_at = now - datetime.timedelta(hours=2)  # past the retention, in this month
    old_month = month_start(3)
    for when, n in ((young_at, 30), (old_month + datetime.timedelta(days=2), 30)):
        base = first_id(when) | (1023 << 12)
        t_us = int(when.timestamp() * 1000) * 1000
        s.execute(f"INSERT INTO events (id, user_id, type, data, created_at) SELECT {base} + i,"
                  f" 1, 'payment.succeeded', '{{}}', {t_us} FROM generate_series(0, {n - 1}) i")
    assert s.sql(f"SELECT payd_ensure_partition('events', '{old_month.isoformat()}')") == "t"
    name = f"events_p{old_month:%Y_%m}"
    deadline = time.time() + 30
    while s.sql(f"SELECT to_regclass('{name}') IS NULL") != "t" and time.time() < deadline:
        time.sleep(0.1)
    assert s.sql(f"SELECT to_regclass('{name}') IS NULL") == "t"
    time.sleep(1)  # a few more passes of the pruner
    young_first = first_id(young_at)
    assert s.sql(f"SELECT count(*) FROM events WHERE id >= {young_first}"
                 f" AND id < {young_first + 30 + (1023 << 12)}") == 30
    assert not [line for line in s.read_log().splitlines()
                if '"pruned"' in line and '"events' in line]
