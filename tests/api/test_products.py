"""Products and reservations (§10): unique skus, ETag-guarded PATCH, and stock under contention."""

import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BACKEND


def sku():
    return "SKU-" + os.urandom(4).hex()


def create(user, stock=10, name="Widget", s=None, idem=None):
    r = user.post("/v1/products", {"sku": s or sku(), "name": name, "stock": stock}, idem=idem)
    assert r.status == 201, r
    return r.json


def reserve(user, s, quantity=1, idem=None, **extra):
    return user.post(f"/v1/products/{s}/reservations", {"quantity": quantity, **extra},
                     idem=idem or os.urandom(8).hex())


def test_create_get_and_duplicate(alice, bob):
    r = alice.post("/v1/products", {"sku": "mug_blue-1", "name": "Blue mug", "stock": 3})
    assert r.status == 201, r
    p = r.json
    assert p["id"].startswith("prod_") and p["object"] == "product"
    assert (p["sku"], p["name"], p["stock"], p["version"]) == ("mug_blue-1", "Blue mug", 3, 1)
    assert r.header("Location") == "/v1/products/mug_blue-1" and r.header("ETag") == '"v1"'
    g = alice.get("/v1/products/mug_blue-1")
    assert g.status == 200 and g.json == p and g.header("ETag") == '"v1"'
    assert alice.get("/v1/products/mug_blue-1", headers={"If-None-Match": '"v1"'}).status == 304
    dup = alice.post("/v1/products", {"sku": "mug_blue-1", "name": "Other", "stock": 1})
    assert dup.status == 409 and dup.json["code"] == "duplicate_sku", dup
    assert bob.get("/v1/products/mug_blue-1").status == 404
    assert bob.post("/v1/products", {"sku": "mug_blue-1", "name": "Bob's",
                                     "stock": 0}).status == 201


def test_racing_creates_one_sku(alice):
    body = {"sku": sku(), "name": "Race", "stock": 1}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: alice.post("/v1/products", body), range(8)))
    assert sorted(r.status for r in answers) == [201] + [409] * 7, answers


def test_validation(alice):
    for body, code, param in [({"name": "x", "stock": 1}, "missing_parameter", "sku"),
                              ({"sku": "bad sku", "name": "x", "stock": 1}, "invalid_parameter",
                               "sku"),
                              ({"sku": "x" * 65, "name": "x", "stock": 1}, "invalid_parameter",
                               "sku"),
                              ({"sku": "ok", "name": "x", "stock": -1}, "invalid_parameter",
                               "stock"),
                              ({"sku": "ok", "stock": 1}, "missing_parameter", "name")]:
        r = alice.post("/v1/products", body)
        assert (r.status, r.json["code"], r.json["param"]) == (400, code, param), (body, r)
    s = create(alice)["sku"]
    r = reserve(alice, s, 0)
    assert r.status == 400 and r.json["param"] == "quantity"
    assert reserve(alice, s, 1_000_001).status == 400
    assert alice.post(f"/v1/products/{s}/reservations", {"quantity": 1}).json["code"] == \
        "idempotency_key_missing"
    assert reserve(alice, "no-such-sku").status == 404
    assert reserve(alice, s, order_id="ord_0000000000000").status == 404
    assert alice.get(f"/v1/products/{s}").json["stock"] == 10


def test_patch_with_etags(alice):
    p = create(alice, stock=5)
    path = f"/v1/products/{p['sku']}"
    r = alice.request("PATCH", path, {"stock": 8}, headers={"If-Match": '"v1"'})
    assert r.status == 200 and r.json["stock"] == 8 and r.json["version"] == 2, r
    assert r.header("ETag") == '"v2"'
    stale = alice.request("PATCH", path, {"name": "x"}, headers={"If-Match": '"v1"'})
    assert stale.status == 412 and stale.json["current_etag"] == '"v2"', stale
    weak = alice.request("PATCH", path, {"name": "x"}, headers={"If-Match": 'W/"v2"'})
    assert weak.status == 412
    body_stale = alice.request("PATCH", path, {"name": "x", "version": 1})
    assert body_stale.status == 409 and body_stale.json["current_version"] == 2
    ok = alice.request("PATCH", path, {"name": "Renamed", "version": 2})
    assert ok.status == 200 and (ok.json["name"], ok.json["stock"], ok.json["version"]) == (
        "Renamed", 8, 3)
    assert alice.request("PATCH", "/v1/products/nope", {"name": "x"}).status == 404


def test_reservation_takes_stock_and_replays(alice):
    p = create(alice, stock=5)
    order = alice.post("/v1/orders", {"external_order_id": os.urandom(4).hex(), "amount": 10,
                                      "currency": "USD"}).json
    r = reserve(alice, p["sku"], 2, idem="rsv-1", order_id=order["id"])
    assert r.status == 201, r
    rsv = r.json
    assert rsv["id"].startswith("rsv_") and rsv["object"] == "reservation"
    assert (rsv["sku"], rsv["quantity"]) == (p["sku"], 2) and rsv["created_at"]
    again = reserve(alice, p["sku"], 2, idem="rsv-1", order_id=order["id"])
    assert again.raw == r.raw and again.header("Idempotent-Replayed") == "true"
    after = alice.get(f"/v1/products/{p['sku']}").json
    assert (after["stock"], after["version"]) == (3, 2)
    out = reserve(alice, p["sku"], 4, idem="rsv-2")
    assert out.status == 409 and out.json["code"] == "out_of_stock" and out.json["available"] == 3
    replay = reserve(alice, p["sku"], 4, idem="rsv-2")
    assert replay.status == 409 and replay.header("Idempotent-Replayed") == "true"
    assert reserve(alice, p["sku"], 3).status == 201
    assert alice.get(f"/v1/products/{p['sku']}").json["stock"] == 0


def test_40_racing_reservations_against_stock_10(server):
    user = server.create_user("shoppers")  # a rate-limit bucket of its own
    p = create(user, stock=10)
    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(lambda _: reserve(user, p["sku"], 1), range(40)))
    assert sorted(r.status for r in answers) == [201] * 10 + [409] * 30, answers
    assert all(r.json["code"] == "out_of_stock" and r.json["available"] == 0
               for r in answers if r.status == 409)
    assert len({r.json["id"] for r in answers if r.status == 201}) == 10
    after = user.get(f"/v1/products/{p['sku']}").json
    assert (after["stock"], after["version"]) == (0, 11)


def queued_jobs(server):
    for line in server.request("GET", "/metrics").raw.decode().splitlines():
        if line.startswith("payd_store_queue_depth "):
            return int(line.split()[1])
    raise AssertionError("no payd_store_queue_depth in /metrics")


@pytest.mark.skipif(BACKEND != "sqlite", reason="holds the SQLite file's write lock")
def test_a_retry_while_the_reservation_is_in_flight_gets_its_answer(fresh_server):
    """A reservation claims its key inside its own write job, which also stores the answer, so
    the key is never seen half done. A retry under the same key that arrives while that job
    waits for the database is decided in the same batch, after it: it replays the stored answer
    and takes no stock."""
    s = fresh_server()
    u = s.create_user()
    p = create(u, stock=5)
    k = os.urandom(8).hex()
    lock = sqlite3.connect(s.db, isolation_level=None, timeout=10)
    lock.execute("BEGIN IMMEDIATE")  # payd's writer waits for this (its busy timeout is 10 s)
    try:
        with ThreadPoolExecutor(3) as pool:
            # a write that holds the writer at the lock, so both reservations queue behind it
            held = pool.submit(u.request, "PATCH", "/v1/users/me", {"name": "held"})
            time.sleep(0.3)
            both = [pool.submit(reserve, u, p["sku"], 2, k) for _ in range(2)]
            deadline = time.time() + 5
            while queued_jobs(s) < 2 and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            assert queued_jobs(s) >= 2
            lock.execute("ROLLBACK")
            answers = [f.result() for f in both]
            assert held.result().status == 200
    finally:
        lock.close()
    assert [r.status for r in answers] == [201, 201], answers
    assert answers[0].raw == answers[1].raw
    assert sorted(r.header("Idempotent-Replayed") or "" for r in answers) == ["", "true"]
    # and a retry now replays it too
    replay = reserve(u, p["sku"], 2, k)
    assert replay.raw == answers[0].raw and replay.header("Idempotent-Replayed") == "true"
    assert u.get(f"/v1/products/{p['sku']}").json["stock"] == 3
    assert s.sql("SELECT COUNT(*) FROM reservations") == 1


def test_racing_retries_of_one_reservation_take_stock_once(server):
    """However the retries of one keyed reservation interleave with its write job, exactly one
    reserves and every other one replays its answer."""
    user = server.create_user("retrier")  # a rate-limit bucket of its own
    p = create(user, stock=10)
    k = os.urandom(8).hex()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: reserve(user, p["sku"], 3, k), range(8)))
    assert all(r.status == 201 for r in answers), answers
    assert len({r.raw for r in answers}) == 1, answers
    assert sum(r.header("Idempotent-Replayed") != "true" for r in answers) == 1, answers
    assert user.get(f"/v1/products/{p['sku']}").json["stock"] == 7
