"""Orders (§8): business dedupe on external_order_id, one payment per order, the state machine."""

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import Payd

STATUSES = ["created", "paid", "cancelled", "shipped", "completed", "refunded"]
# what PUT /v1/orders/{id}/status may do; created → paid and paid → refunded belong to payments
# and refunds
ALLOWED = {("created", "cancelled"), ("paid", "shipped"), ("shipped", "completed")}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # the state-machine table makes a few hundred requests: lift the per-user rate limit
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def new_order(user, amount=2500, ext=None, **extra):
    body = {"external_order_id": ext or "ext-" + os.urandom(6).hex(), "amount": amount,
            "currency": "usd", **extra}
    r = user.post("/v1/orders", body)
    assert r.status == 201, r
    return r.json


def put_status(user, order_id, status, headers=None, **extra):
    return user.request("PUT", f"/v1/orders/{order_id}/status", {"status": status, **extra},
                        headers=headers)


def order_in(user, account, status):
    """A new order brought to `status` the way the API allows."""
    order = new_order(user)
    if status == "created":
        return order
    if status == "cancelled":
        assert put_status(user, order["id"], "cancelled").status == 200
        return user.get(f"/v1/orders/{order['id']}").json
    r = user.pay(account, order["amount"], order_id=order["id"])
    assert r.status == 201, r
    if status == "refunded":
        assert user.post(f"/v1/payments/{r.json['id']}/refunds", {},
                         idem=os.urandom(8).hex()).status == 201
    for step in ["shipped", "completed"]:
        if STATUSES.index(status) >= STATUSES.index(step) and status != "refunded":
            assert put_status(user, order["id"], step).status == 200
    order = user.get(f"/v1/orders/{order['id']}").json
    assert order["status"] == status
    return order


def test_create_get_and_etag(alice):
    r = alice.post("/v1/orders", {"external_order_id": "o-1", "amount": 4200, "currency": "eur",
                                  "description": "two books"})
    assert r.status == 201, r
    o = r.json
    assert o["id"].startswith("ord_") and o["object"] == "order"
    assert (o["external_order_id"], o["amount"], o["currency"]) == ("o-1", 4200, "EUR")
    assert (o["status"], o["payment_id"], o["version"]) == ("created", None, 1)
    assert r.header("Location") == f"/v1/orders/{o['id']}"
    assert r.header("ETag") == '"v1"'

    g = alice.get(f"/v1/orders/{o['id']}")
    assert g.status == 200 and g.json == o and g.header("ETag") == '"v1"'
    nm = alice.get(f"/v1/orders/{o['id']}", headers={"If-None-Match": '"v1"'})
    assert nm.status == 304 and nm.raw == b"" and nm.header("ETag") == '"v1"'
    assert alice.get(f"/v1/orders/{o['id']}", headers={"If-None-Match": '"v2"'}).status == 200


def test_validation(alice):
    cases = [({"amount": 1, "currency": "USD"}, 400, "missing_parameter", "external_order_id"),
             ({"external_order_id": "", "amount": 1, "currency": "USD"}, 400,
              "invalid_parameter", "external_order_id"),
             ({"external_order_id": "x" * 129, "amount": 1, "currency": "USD"}, 400,
              "invalid_parameter", "external_order_id"),
             ({"external_order_id": "a", "amount": 0, "currency": "USD"}, 400,
              "invalid_parameter", "amount"),
             ({"external_order_id": "a", "amount": 1, "currency": "US1"}, 400,
              "invalid_parameter", "currency"),
             ({"external_order_id": "a", "amount": 1, "currency": "USD", "x": 1}, 400,
              "unknown_parameter", "x")]
    for body, status, code, param in cases:
        r = alice.post("/v1/orders", body)
        assert (r.status, r.json["code"], r.json["param"]) == (status, code, param), (body, r)


def test_duplicate_order_gives_409_with_its_id(alice, bob):
    first = new_order(alice, ext="dup-1")
    r = alice.post("/v1/orders", {"external_order_id": "dup-1", "amount": 1, "currency": "USD"})
    assert r.status == 409 and r.json["code"] == "duplicate_order", r
    assert r.json["existing_order_id"] == first["id"]
    # with an Idempotency-Key too: the business key still decides, and the answer is stored
    r2 = alice.post("/v1/orders", {"external_order_id": "dup-1", "amount": 1, "currency": "USD"},
                    idem="dup-key")
    assert r2.status == 409 and r2.json["existing_order_id"] == first["id"]
    r3 = alice.post("/v1/orders", {"external_order_id": "dup-1", "amount": 1, "currency": "USD"},
                    idem="dup-key")
    assert r3.status == 409 and r3.header("Idempotent-Replayed") == "true" and r3.raw == r2.raw
    # another user's namespace is separate
    assert bob.post("/v1/orders", {"external_order_id": "dup-1", "amount": 1,
                                   "currency": "USD"}).status == 201


def test_racing_creates_make_one_order(alice):
    body = {"external_order_id": "race-" + os.urandom(4).hex(), "amount": 10, "currency": "USD"}
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: alice.post("/v1/orders", body), range(16)))
    created = [r for r in answers if r.status == 201]
    assert len(created) == 1, answers
    winner = created[0].json["id"]
    for r in answers:
        if r.status != 201:
            assert r.status == 409 and r.json["existing_order_id"] == winner, r


def test_paying_one_order_twice(alice):
    account = alice.create_account()
    order = new_order(alice, amount=1500)
    first = alice.pay(account, 1500, order_id=order["id"], idem="order-pay-1")
    assert first.status == 201, first
    assert first.json["order_id"] == order["id"]
    second = alice.pay(account, 1500, order_id=order["id"], idem="order-pay-2")
    assert second.status == 409 and second.json["code"] == "duplicate_payment", second
    assert second.json["existing_payment_id"] == first.json["id"]
    o = alice.get(f"/v1/orders/{order['id']}").json
    assert (o["status"], o["payment_id"], o["version"]) == ("paid", first.json["id"], 2)
    assert alice.get(f"/v1/accounts/{account['id']}").json["balance"] == 1500


def test_state_machine_table(alice):
    account = alice.create_account()
    for source in STATUSES:
        for target in STATUSES:
            order = order_in(alice, account, source)
            r = put_status(alice, order["id"], target)
            after = alice.get(f"/v1/orders/{order['id']}").json
            if source == target:  # a repeated sync: 200, nothing changes
                assert r.status == 200, (source, target, r)
                assert r.json == order and after == order
            elif (source, target) in ALLOWED:
                assert r.status == 200, (source, target, r)
                assert r.json["status"] == target and r.json["version"] == order["version"] + 1
                assert r.header("ETag") == f'"v{order["version"] + 1}"'
                assert after == r.json
            else:
                assert r.status == 409, (source, target, r)
                assert r.json["code"] == "invalid_state_transition"
                assert r.json["current_status"] == source
                assert after == order


def test_status_validation(alice):
    order = new_order(alice)
    r = put_status(alice, order["id"], "lost")
    assert r.status == 400 and r.json["param"] == "status"
    r = alice.request("PUT", f"/v1/orders/{order['id']}/status", {})
    assert r.status == 400 and r.json["code"] == "missing_parameter"
    assert put_status(alice, "ord_0000000000000", "cancelled").status == 404
    assert put_status(alice, "nope", "cancelled").status == 404


def test_status_change_under_if_match_and_version(alice):
    order = new_order(alice)
    oid = order["id"]
    stale = put_status(alice, oid, "cancelled", version=7)
    assert stale.status == 409 and stale.json["code"] == "version_conflict", stale
    assert (stale.json["current_version"], stale.json["current_etag"]) == (1, '"v1"')
    pre = put_status(alice, oid, "cancelled", headers={"If-Match": '"v9"'})
    assert pre.status == 412 and pre.json["current_etag"] == '"v1"', pre
    weak = put_status(alice, oid, "cancelled", headers={"If-Match": 'W/"v1"'})
    assert weak.status == 412, weak
    ok = put_status(alice, oid, "cancelled", headers={"If-Match": '"v1"'})
    assert ok.status == 200 and ok.json["version"] == 2 and ok.header("ETag") == '"v2"'
    # the same request again (a retry after a lost answer): the change already happened → 200
    again = put_status(alice, oid, "cancelled", headers={"If-Match": '"v1"'})
    assert again.status == 200 and again.json["version"] == 2


def test_racing_transitions_one_wins(alice):
    order = new_order(alice)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(
            lambda _: put_status(alice, order["id"], "cancelled", headers={"If-Match": '"v1"'}),
            range(8)))
    # every racer asked for the same state: the winner applied it, the rest found it done
    assert all(r.status == 200 for r in answers), answers
    assert alice.get(f"/v1/orders/{order['id']}").json["version"] == 2


def test_cancelled_order_is_not_payable(alice):
    account = alice.create_account()
    order = new_order(alice, amount=700)
    assert put_status(alice, order["id"], "cancelled").status == 200
    r = alice.pay(account, 700, order_id=order["id"])
    assert r.status == 409 and r.json["code"] == "order_not_payable"
    assert r.json["current_status"] == "cancelled"


def test_list_and_status_filter(bob):
    ids = [new_order(bob)["id"] for _ in range(5)]
    assert put_status(bob, ids[1], "cancelled").status == 200
    assert put_status(bob, ids[3], "cancelled").status == 200
    page = bob.get("/v1/orders?limit=3")
    assert page.status == 200 and page.json["object"] == "list"
    assert page.json["has_more"] is True
    seen = [o["id"] for o in page.json["data"]]
    nxt = bob.get(f"/v1/orders?limit=3&cursor={page.json['next_cursor']}").json
    seen += [o["id"] for o in nxt["data"]]
    assert [i for i in seen if i in ids] == ids[::-1]
    cancelled = bob.get("/v1/orders?status=cancelled").json["data"]
    assert [o["id"] for o in cancelled] == [ids[3], ids[1]]
    assert bob.get("/v1/orders?status=lost").status == 400


def test_other_users_order_is_missing(alice, bob):
    order = new_order(alice)
    assert bob.get(f"/v1/orders/{order['id']}").status == 404
    assert put_status(bob, order["id"], "cancelled").status == 404
    assert alice.get(f"/v1/orders/{order['id']}").json["status"] == "created"


def test_racing_payments_of_one_order_keep_one_charge(alice):
    """Payments of one order under different keys that all pass the order's check before any of
    them commits (tok_slow holds each charge ~2 s): one is recorded, and every other charge is
    voided at the processor before its 409 is sent, so the customer is charged once."""
    account = alice.create_account()
    order = new_order(alice, amount=7013)
    tag = os.urandom(4).hex()

    def pay(i):
        return alice.pay(account, 7013, "tok_slow", order_id=order["id"], idem=f"{tag}-{i}")

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(pay, range(6)))
    assert sorted(r.status for r in answers) == [201] + [409] * 5, answers
    winner = next(r for r in answers if r.status == 201).json
    for r in answers:
        if r.status == 409:
            assert r.json["code"] == "duplicate_payment", r
            assert r.json["existing_payment_id"] == winner["id"], r
    assert alice.get(f"/v1/accounts/{account['id']}").json["balance"] == 7013
    server = alice.server
    charged = server.sql("SELECT COUNT(*) FROM processor_charges WHERE amount = 7013 "
                         "AND source = 'tok_slow'")
    voided = server.sql("SELECT COUNT(*) FROM processor_refunds r JOIN processor_charges c "
                        "ON c.charge_id = r.charge_id WHERE c.amount = 7013 "
                        "AND c.source = 'tok_slow' AND r.processor_key LIKE '%:void'")
    kept = server.sql("SELECT COUNT(*) FROM processor_charges c WHERE c.amount = 7013 AND "
                      "c.source = 'tok_slow' AND NOT EXISTS (SELECT 1 FROM processor_refunds r "
                      "WHERE r.charge_id = c.charge_id)")
    assert (charged, voided, kept) == (6, 5, 1)
    assert server.sql("SELECT COUNT(*) FROM charge_voids") == 0  # none left to the recoverer
