"""One shape per resource: the 201 of a create is exactly what the GET that follows shows, byte for
byte, and its Location is that GET (where the contract gives a Location). Both come from the
resource's one row writer (src/api/resource.h), the 201 from the row its INSERT returned."""

import json
import os

import pytest


def created_then_read(user, path, body, idem=None):
    """POSTs body, follows the 201's Location, and checks both answers are the same bytes and
    carry the same ETag. Returns the 201."""
    r = user.post(path, body, idem=idem)
    assert r.status == 201, r
    location = r.header("location")
    assert location, f"{path}: a 201 without Location"
    g = user.get(location)
    assert g.status == 200, g
    assert g.raw == r.raw, f"{path}: 201 {r.raw!r} but GET {location} {g.raw!r}"
    assert json.loads(g.raw) == json.loads(r.raw)
    assert g.header("etag") == r.header("etag")
    return r


@pytest.fixture(scope="module")
def carol(server):
    return server.create_user("carol")


def test_account(carol):
    r = created_then_read(carol, "/v1/accounts", {"currency": "usd", "name": "Ünïcode \"q\""})
    assert r.json["object"] == "account" and r.header("etag") == '"v1"'
    assert r.header("location") == "/v1/accounts/" + r.json["id"]
    unnamed = created_then_read(carol, "/v1/accounts", {"currency": "EUR"})
    assert unnamed.json["name"] is None


def test_payment(carol):
    account = carol.create_account()
    order = carol.post("/v1/orders", {"external_order_id": "res-pay", "amount": 700,
                                      "currency": "USD"}).json
    for extra in ({}, {"description": "tea\nand cake", "metadata": {"b": "2", "a": "1"},
                       "order_id": order["id"]}):
        r = created_then_read(carol, "/v1/payments",
                              {"account_id": account["id"], "amount": 700, "currency": "usd",
                               "source": "tok_visa", **extra}, idem=os.urandom(8).hex())
        assert r.json["status"] == "succeeded" and r.header("etag") is None
        assert r.header("location") == "/v1/payments/" + r.json["id"]


def test_order(carol):
    r = created_then_read(carol, "/v1/orders", {"external_order_id": "res-1", "amount": 4200,
                                                "currency": "eur", "description": "two"})
    assert r.json["object"] == "order" and r.header("etag") == '"v1"'
    assert r.header("location") == "/v1/orders/" + r.json["id"]


def test_transfer(carol):
    a, b = carol.create_account(), carol.create_account()
    assert carol.pay(a, amount=5000).status == 201
    r = created_then_read(carol, "/v1/transfers",
                          {"biz_seq": "res-tr-1", "from_account": a["id"], "to_account": b["id"],
                           "amount": 1200, "currency": "USD"})
    assert r.json["status"] == "succeeded"
    by_seq = carol.get("/v1/transfers/by-biz-seq/res-tr-1")
    assert by_seq.status == 200 and by_seq.raw == r.raw
    # the replay is the same bytes again, with the same Location
    again = carol.post("/v1/transfers", {"biz_seq": "res-tr-1", "from_account": a["id"],
                                         "to_account": b["id"], "amount": 1200,
                                         "currency": "USD"})
    assert again.status == 201 and again.raw == r.raw
    assert again.header("location") == r.header("location")


def test_product(carol):
    r = created_then_read(carol, "/v1/products", {"sku": "res-sku_1", "name": "Lamp",
                                                  "stock": 3})
    assert r.header("location") == "/v1/products/res-sku_1" and r.header("etag") == '"v1"'


def test_webhook_endpoint(carol):
    """The one 201 that shows more than the GET: the secret, shown only then."""
    r = carol.post("/v1/webhook_endpoints", {"url": "http://127.0.0.1:9/hook",
                                             "events": ["payment.succeeded", "refund.succeeded"],
                                             "description": "res"})
    assert r.status == 201, r
    g = carol.get(r.header("location"))
    assert g.status == 200, g
    created = r.json
    assert created.pop("secret").startswith("whsec_")
    assert g.json == created
    assert r.raw == g.raw[:-1] + b',"secret":' + json.dumps(r.json["secret"]).encode() + b"}"


def test_refund_is_its_list_item(carol):
    """Refunds have no GET by id: the 201 is the item their payment's list shows."""
    account = carol.create_account()
    payment = carol.pay(account, amount=900).json
    r = carol.post(f"/v1/payments/{payment['id']}/refunds", {"amount": 400},
                   idem=os.urandom(8).hex())
    assert r.status == 201 and r.header("location") is None, r
    page = carol.get(f"/v1/payments/{payment['id']}/refunds").json
    assert page["data"] == [r.json]


def test_event_data_is_the_201(carol):
    """An account's event carries the account as its 201 showed it."""
    r = carol.post("/v1/accounts", {"currency": "USD", "name": "evented"})
    events = carol.get("/v1/events?type=account.created&limit=100").json["data"]
    event = next(e for e in events if e["data"]["object"]["id"] == r.json["id"])
    assert event["data"]["object"] == r.json
    g = carol.get("/v1/events/" + event["id"])
    assert g.status == 200 and g.json == event


def test_missing_names_the_resource(carol):
    for path, noun in [("/v1/accounts/acct_0000000000001", "account"),
                       ("/v1/payments/pay_0000000000001", "payment"),
                       ("/v1/orders/ord_0000000000001", "order"),
                       ("/v1/transfers/tr_0000000000001", "transfer"),
                       ("/v1/transfers/by-biz-seq/nope", "transfer"),
                       ("/v1/products/nope", "product"),
                       ("/v1/events/evt_0000000000001", "event"),
                       ("/v1/webhook_endpoints/we_0000000000001", "webhook endpoint")]:
        r = carol.get(path)
        assert r.status == 404 and r.json["code"] == "resource_missing", (path, r)
        assert r.json["detail"] == f"no such {noun}", (path, r)
