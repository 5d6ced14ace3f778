"""Keyset pagination with signed cursors (§4)."""

import base64
import concurrent.futures
import sqlite3
import urllib.parse
import uuid

import pytest

from conftest import BACKEND


@pytest.fixture(scope="module")
def payer(fresh_module_server):
    return fresh_module_server.create_user("payer")


@pytest.fixture(scope="module")
def fresh_module_server(tmp_path_factory):
    from conftest import Payd
    s = Payd(str(tmp_path_factory.mktemp("pages")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def pay(user, acct, amount=100, source="tok_visa"):
    r = user.pay(acct, amount=amount, source=source, idem=str(uuid.uuid4()))
    assert r.status in (201, 402), r
    return r.json if r.status == 201 else r.json["payment"]


def page(user, path, **params):
    q = urllib.parse.urlencode(params)
    return user.get(f"{path}?{q}" if q else path)


def walk(user, path, limit, **filters):
    items, sizes, cursor = [], [], None
    while True:
        params = dict(filters, limit=limit)
        if cursor:
            params["cursor"] = cursor
        r = page(user, path, **params)
        assert r.status == 200, r
        body = r.json
        items += body["data"]
        sizes.append(len(body["data"]))
        assert (body["next_cursor"] is not None) == body["has_more"]
        if not body["has_more"]:
            return items, sizes
        cursor = body["next_cursor"]


@pytest.fixture(scope="module")
def paid_account(payer):
    acct = payer.create_account()
    created = [pay(payer, acct, 100 + i) for i in range(45)]
    return acct, created


def test_45_payments_in_pages_of_20(payer, paid_account):
    acct, created = paid_account
    items, sizes = walk(payer, f"/v1/accounts/{acct['id']}/payments", 20)
    assert sizes == [20, 20, 5]
    assert [p["id"] for p in items] == [p["id"] for p in reversed(created)]  # newest first
    first = page(payer, f"/v1/accounts/{acct['id']}/payments", limit=20).json
    assert first["prev_cursor"] is None and first["object"] == "list"


def test_prev_cursor_from_page_2_gives_page_1(payer, paid_account):
    acct, _ = paid_account
    path = f"/v1/accounts/{acct['id']}/payments"
    p1 = page(payer, path, limit=20).json
    p2 = page(payer, path, limit=20, cursor=p1["next_cursor"]).json
    assert p2["prev_cursor"]
    back = page(payer, path, limit=20, cursor=p2["prev_cursor"])
    assert back.status == 200
    assert [p["id"] for p in back.json["data"]] == [p["id"] for p in p1["data"]]
    assert back.json["has_more"] is False  # nothing newer than page 1
    link = page(payer, path, limit=20, cursor=p1["next_cursor"]).header("link")
    assert 'rel="next"' in link and 'rel="prev"' in link


def test_no_repeats_or_gaps_while_payments_arrive(payer):
    acct = payer.create_account()
    existing = [pay(payer, acct) for _ in range(30)]
    path = f"/v1/accounts/{acct['id']}/payments"
    seen, cursor, added = [], None, 0
    while True:
        params = {"limit": 7}
        if cursor:
            params["cursor"] = cursor
        body = page(payer, path, **params).json
        seen += [p["id"] for p in body["data"]]
        if added < 7:
            pay(payer, acct)
            added += 1
        if not body["has_more"]:
            break
        cursor = body["next_cursor"]
    assert len(seen) == len(set(seen))
    assert set(p["id"] for p in existing) <= set(seen)


def test_64_concurrent_payments_tie_and_page_by_7(payer):
    acct = payer.create_account()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        created = list(pool.map(lambda _: pay(payer, acct), range(64)))
    items, _ = walk(payer, f"/v1/accounts/{acct['id']}/payments", 7)
    ids = [p["id"] for p in items]
    assert len(ids) == 64 and set(ids) == {p["id"] for p in created}
    keys = [(p["created_at"], p["id"]) for p in items]
    assert keys == sorted(keys, reverse=True)


def tamper(cursor):
    raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    raw[5] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def test_bad_cursors_and_limits(payer, paid_account, fresh_module_server):
    acct, _ = paid_account
    path = f"/v1/accounts/{acct['id']}/payments"
    cursor = page(payer, path, limit=5).json["next_cursor"]
    for bad in ("garbage", "", tamper(cursor), cursor[:-2], cursor + "AA", "%%%"):
        r = page(payer, path, cursor=bad)
        assert r.status == 400 and r.json["code"] == "invalid_cursor", (bad, r)
    r = page(payer, path, cursor=cursor, status="failed")
    assert r.status == 400 and r.json["code"] == "cursor_mismatch"
    other = payer.create_account()
    pay(payer, other)
    r = page(payer, f"/v1/accounts/{other['id']}/payments", cursor=cursor)
    assert r.status == 400 and r.json["code"] == "cursor_mismatch"
    stranger = fresh_module_server.create_user("stranger")
    sacct = stranger.create_account()
    r = page(stranger, f"/v1/accounts/{sacct['id']}/payments", cursor=cursor)
    assert r.status == 400 and r.json["code"] == "cursor_mismatch"
    r = page(payer, "/v1/accounts", cursor=cursor)
    assert r.status == 400 and r.json["code"] == "cursor_mismatch"
    for limit in ("0", "101", "-1", "abc", "2.5", ""):
        r = page(payer, path, limit=limit)
        assert r.status == 400 and r.json["code"] == "invalid_limit", (limit, r)
    assert len(page(payer, path, limit=100).json["data"]) == 45
    assert len(page(payer, path).json["data"]) == 20
    r = page(payer, path, status="pending")
    assert r.status == 400 and r.json["param"] == "status"
    r = page(payer, path, created_gte="yesterday")
    assert r.status == 400 and r.json["param"] == "created_gte"


def test_filters_and_count_agree(payer):
    acct = payer.create_account()
    ok = [pay(payer, acct) for _ in range(6)]
    failed = [pay(payer, acct, source="tok_chargeDeclined") for _ in range(4)]
    path = f"/v1/accounts/{acct['id']}/payments"
    for status, expected in (("succeeded", ok), ("failed", failed)):
        items, _ = walk(payer, path, 3, status=status)
        assert {p["id"] for p in items} == {p["id"] for p in expected}
        count = payer.get(f"{path}/count?status={status}").json
        assert count == {"object": "count", "livemode": True, "count": len(expected)}
    assert payer.get(f"{path}/count").json["count"] == 10
    middle = sorted(p["created_at"] for p in ok + failed)[5]
    newer, _ = walk(payer, path, 4, created_gte=middle)
    older, _ = walk(payer, path, 4, created_lt=middle)
    assert len(newer) + len(older) == 10
    assert all(p["created_at"] >= middle for p in newer)
    n = payer.get(f"{path}/count?created_gte={urllib.parse.quote(middle)}").json["count"]
    assert n == len(newer)


def test_accounts_list_is_paginated(payer):
    for _ in range(3):
        payer.create_account()
    items, _ = walk(payer, "/v1/accounts", 2)
    assert len(items) == len({a["id"] for a in items}) >= 3
    assert all(a["object"] == "account" for a in items)


@pytest.mark.skipif(BACKEND != "sqlite", reason="SQLite query plans")
def test_each_list_page_is_an_index_range_scan(fresh_module_server, payer, paid_account):
    """EXPLAIN QUERY PLAN for the page queries: an index search, never a scan or a sort."""
    with sqlite3.connect(fresh_module_server.db) as c:
        for sql in (
            "SELECT id FROM payments WHERE account_id = 1 AND (created_at, id) < (5, 5) "
            "ORDER BY created_at DESC, id DESC LIMIT 21",
            "SELECT id FROM payments WHERE account_id = 1 AND status = 'failed' "
            "AND (created_at, id) < (5, 5) ORDER BY created_at DESC, id DESC LIMIT 21",
            "SELECT id FROM payments WHERE account_id = 1 AND (created_at, id) > (5, 5) "
            "ORDER BY created_at ASC, id ASC LIMIT 21",
            "SELECT id FROM accounts WHERE user_id = 1 AND (created_at, id) < (5, 5) "
            "ORDER BY created_at DESC, id DESC LIMIT 21",
        ):
            plan = " ".join(row[-1] for row in c.execute("EXPLAIN QUERY PLAN " + sql))
            assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan
            assert "TEMP B-TREE" not in plan, plan
            assert not plan.startswith("SCAN"), plan
