"""Retention (docs/operations.md, "Retention"): idempotency keys past --idempotency-ttl and events
past --event-retention are deleted by the pruner in bounded chunks while payments go on: no
request fails, the old rows go away, and the young ones (the payments' own keys and events)
stay."""
import json
import threading
import time

PAYD_EPOCH_MS = 1767225600000  # 2026-01-01T00:00:00Z, the Snowflake epoch (docs/api.md §1)
CHUNK_ROWS = 500  # store/prune.h: most rows one write job deletes from one table
PLANTED = 1600  # four chunks of each


def plant_expired(server, hours_ago):
    """PLANTED finished keys and PLANTED events, all from `hours_ago` hours back."""
    now_ms = int(time.time() * 1000)
    t_us = (now_ms - hours_ago * 3600 * 1000) * 1000
    first_id = ((t_us // 1000 - PAYD_EPOCH_MS) << 22) | (1023 << 12)  # node 1023: unused here
    rows = f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {PLANTED - 1})"
    server.execute(
        f"{rows} INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, method, path,"
        " state, claimed_at, locked_at, response_status, fence, generation)"
        f" SELECT 1, 'planted-' || i, 'f', 'POST', '/v1/payments', 'completed', {t_us} + i, 0,"
        f" 201, {t_us}, {t_us} FROM n",
        f"{rows} INSERT INTO events (id, user_id, type, data, created_at)"
        f" SELECT {first_id} + i, 1, 'payment.succeeded', '{{}}', {t_us} FROM n")


def planted_left(server):
    return (server.sql("SELECT count(*) FROM idempotency_keys WHERE idem_key LIKE 'planted-%'"),
            server.sql("SELECT count(*) FROM events WHERE user_id = 1"))


def pruned_lines(server):
    lines = [json.loads(line) for line in server.read_log().splitlines() if '"pruned"' in line]
    return [line for line in lines if line.get("msg") == "pruned"]


def test_expired_keys_and_events_pruned_in_chunks_while_payments_go_on(fresh_server):
    s = fresh_server(["--idempotency-ttl", "1h", "--event-retention", "1h",
                      "--recovery-interval", "200ms"])
    u = s.create_user(rate_limit="100000/s")
    account = u.create_account()
    answers, stop = [], threading.Event()

    def pay():
        while not stop.is_set():
            r = u.pay(account, amount=100)
            answers.append((r.status, r.json["id"] if r.status == 201 else r.raw))

    payers = [threading.Thread(target=pay) for _ in range(4)]
    for t in payers:
        t.start()
    try:
        time.sleep(0.3)
        plant_expired(s, hours_ago=2)
        deadline = time.time() + 30
        while planted_left(s) != (0, 0) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)  # payments after the prune too
    finally:
        stop.set()
        for t in payers:
            t.join()
    assert planted_left(s) == (0, 0)
    assert answers and all(status == 201 for status, _ in answers), \
        [a for a in answers if a[0] != 201][:5]
    # the payments' own keys and events are young: every one of them is still there
    paid = len(answers)
    assert s.sql("SELECT count(*) FROM idempotency_keys WHERE path = '/v1/payments' "
                 "AND idem_key NOT LIKE 'planted-%'") == paid
    assert s.sql("SELECT count(*) FROM events WHERE type = 'payment.succeeded' "
                 "AND user_id <> 1") == paid
    # bounded: no write job deleted more than one chunk of a table
    lines = pruned_lines(s)
    keys = [line for line in lines if line["what"] == "expired idempotency keys"]
    events = [line for line in lines if line["what"].startswith("events")]
    assert sum(line["rows"] for line in keys) == PLANTED
    assert sum(line["rows"] for line in events) == PLANTED
    for line in keys + events:
        assert line["chunk_rows"] == CHUNK_ROWS
        assert line["rows"] <= line["chunks"] * CHUNK_ROWS, line
    assert sum(line["chunks"] for line in keys) >= -(-PLANTED // CHUNK_ROWS)
