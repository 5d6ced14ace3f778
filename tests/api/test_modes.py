"""Test mode and live mode (docs/api.md, "Test mode and live mode"; docs/modes.md).

The isolation checks are generated from the route table (`payd dev routes --json`), so a route
added later is covered without a change here: every authenticated route that names an object in
its path is asked, with a key of one mode, for an object the other mode made, and must answer 404
resource_missing; the same request with the object's own mode must not. A route naming an object
of a kind this file does not know fails the test until the kind is added to COLLECTIONS. Every
list of either mode is read whole: it never holds the other mode's objects, and every object any
answer shows says its mode ("livemode"). Then the things that are per mode: Idempotency-Keys,
biz_seq, external_order_id, skus, cursors, events and webhook deliveries, rate limits, and the
processor each mode charges."""

import json
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone

import pytest

from conftest import PAYD, Payd, User, verify_ledger
from receiver import Receiver
from test_processor_sim import Sim

# the first segment after /v1/ of a route's path -> the kind of object its {id} names
COLLECTIONS = {
    "accounts": "account",
    "balance_transactions": "balance_transaction",
    "payments": "payment",
    "orders": "order",
    "transfers": "transfer",
    "api_keys": "api_key",
    "products": "sku",
    "events": "event",
    "webhook_endpoints": "webhook_endpoint",
}


def routes():
    out = subprocess.run([PAYD, "dev", "routes", "--json"], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def minimal_body(schema):
    """The smallest body the route's declared schema accepts: its required members only."""
    if not schema:
        return None
    body = {}
    for name in schema.get("required", []):
        prop = schema["properties"][name]
        if "enum" in prop:
            body[name] = prop["enum"][-1]
        elif prop.get("type") == "integer":
            body[name] = prop.get("minimum", 1)
        elif prop.get("format") == "date-time":
            body[name] = (datetime.now(timezone.utc) - timedelta(minutes=1)).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        else:
            raise AssertionError(f"no value for required member {name}: {prop}")
    return body


def make_world(user, tag):
    """One of everything a key can make, in the key's own mode; returns kind -> id (or sku).
    A transfer, an order and a product are made twice: once under a biz_seq, external_order_id
    and sku both modes use ("same"), once under the mode's own (tag), which the route sweep
    names, so that a route finding the object by its name answers 404 in the other mode."""
    account = user.create_account()
    other = user.create_account()
    paid = user.pay(account, amount=5000)
    assert paid.status == 201, paid
    payment = paid.json
    refund = user.post(f"/v1/payments/{payment['id']}/refunds", {"amount": 100},
                       idem=os.urandom(8).hex())
    assert refund.status == 201, refund
    for name in ("same", tag):
        transfer = user.post("/v1/transfers", {"biz_seq": f"seq-{name}",
                                               "from_account": account["id"],
                                               "to_account": other["id"], "amount": 10,
                                               "currency": "USD"})
        assert transfer.status == 201, transfer
        product = user.post("/v1/products", {"sku": f"sku-{name}", "name": "thing", "stock": 5})
        assert product.status == 201, product
        order = user.post("/v1/orders", {"external_order_id": f"ext-{name}", "amount": 700,
                                         "currency": "USD"})
        assert order.status == 201, order
        if name == "same":
            same = {"same_transfer": transfer.json["id"], "same_order": order.json["id"]}
    key = user.post("/v1/api_keys", {"name": f"spare-{tag}"})
    assert key.status == 201, key
    hook = user.post("/v1/webhook_endpoints", {"url": "http://127.0.0.1:9/hooks",
                                              "events": ["*"]})
    assert hook.status == 201, hook
    events = user.get("/v1/events?limit=1")
    txns = user.get("/v1/balance_transactions?limit=1")
    assert events.status == 200 and events.json["data"], events
    assert txns.status == 200 and txns.json["data"], txns
    return {"account": account["id"], "payment": payment["id"], "refund": refund.json["id"],
            "order": order.json["id"], "transfer": transfer.json["id"],
            "biz_seq": f"seq-{tag}", "sku": f"sku-{tag}", "api_key": key.json["id"],
            "webhook_endpoint": hook.json["id"], "event": events.json["data"][0]["id"],
            "balance_transaction": txns.json["data"][0]["id"], **same}


def kind_of(route):
    parts = route["path"].split("/")
    if "{biz_seq}" in parts:
        return "biz_seq"
    collection = COLLECTIONS.get(parts[2])
    assert collection, (f"{route['method']} {route['path']}: add its collection to COLLECTIONS "
                        "so test and live mode isolation covers it")
    return collection


def request_route(user, route, world):
    kind = kind_of(route)
    path = route["path"]
    for param in ("{id}", "{sku}", "{biz_seq}"):
        path = path.replace(param, world[kind])
    body = minimal_body(route.get("body"))
    headers = {}
    if route["idempotency_key"] == "required":
        headers["Idempotency-Key"] = os.urandom(8).hex()
    return user.request(route["method"], path, body=body, headers=headers)


def objects_in(value):
    """Every object an answer shows (those with an "object" member), however deep, except a
    list's envelope and what a metadata object holds."""
    if isinstance(value, dict):
        if isinstance(value.get("object"), str) and value["object"] != "list":
            yield value
        for k, v in value.items():
            if k != "metadata":
                yield from objects_in(v)
    elif isinstance(value, list):
        for v in value:
            yield from objects_in(v)


def says_its_mode(response, live):
    body = response.json if response.raw else None
    for obj in objects_in(body):
        assert obj.get("livemode") is live, (live, obj, response)


@pytest.fixture(scope="module")
def worlds(server):
    live = server.create_user("modes")
    test = live.in_test_mode()
    return live, test, make_world(live, "live"), make_world(test, "test")


def test_keys_and_objects_say_their_mode(server, worlds):
    live, test, _, _ = worlds
    assert live.key.startswith("sk_live_") and test.key.startswith("sk_test_")
    for user, is_live in ((live, True), (test, False)):
        me = user.get("/v1/users/me")
        assert me.status == 200 and me.json["id"] == live.id and me.json["livemode"] is is_live
        keys = user.get("/v1/api_keys").json["data"]
        assert keys and all(k["mode"] == ("live" if is_live else "test") for k in keys), keys
        says_its_mode(user.get("/v1/events"), is_live)
    # A live key makes a test key (shown as a test key), a test key never a live one.
    made = live.post("/v1/api_keys", {"mode": "test"})
    assert made.status == 201 and made.json["mode"] == "test" and made.json["livemode"] is False
    assert made.json["api_key"].startswith("sk_test_") and made.json["user_id"] == live.id
    assert made.json["id"] in {k["id"] for k in test.get("/v1/api_keys").json["data"]}
    refused = test.post("/v1/api_keys", {"mode": "live"})
    assert refused.status == 400 and refused.json["param"] == "mode", refused
    # `payd key create --mode test`, and an unknown mode refused
    cli = json.loads(server.cli("key", "create", "--user", live.id, "--mode", "test").stdout)
    assert cli["api_key"].startswith("sk_test_") and cli["mode"] == "test"
    assert User(server, live.id, cli["api_key"]).get("/v1/accounts").json["data"] == \
        test.get("/v1/accounts").json["data"]
    assert server.cli("key", "create", "--user", live.id, "--mode", "demo",
                      check=False).returncode == 2


def ids_in(response):
    return {o["id"] for o in objects_in(response.json) if "id" in o}


def test_lists_and_counts_hold_one_mode(worlds):
    live, test, live_world, test_world = worlds
    live_ids = {v for v in live_world.values()}
    test_ids = {v for v in test_world.values()}
    lists = [r for r in routes() if r["auth"] and r["method"] == "GET" and "query" in r]
    assert len(lists) >= 8, lists
    for route in lists:
        for user, world, mine, theirs in ((live, live_world, live_ids, test_ids),
                                          (test, test_world, test_ids, live_ids)):
            path = route["path"].replace("{id}", world[kind_of(route)] if "{" in route["path"]
                                         else "")
            r = user.get(path)
            assert r.status == 200, (route, r)
            shown = ids_in(r)
            assert not shown & theirs, (route, shown & theirs)
            says_its_mode(r, user is live)
    for user, world in ((live, live_world), (test, test_world)):
        count = user.get(f"/v1/accounts/{world['account']}/payments/count")
        assert count.status == 200 and count.json["count"] == 1, count
        listed = user.get("/v1/accounts").json["data"]
        assert len(listed) == 2 and {a["id"] for a in listed} >= {world["account"]}


def test_a_cursor_belongs_to_its_mode(worlds):
    live, test, _, _ = worlds
    for mine, other in ((live, test), (test, live)):
        page = mine.get("/v1/accounts?limit=1")
        cursor = page.json["next_cursor"]
        assert cursor, page
        assert mine.get(f"/v1/accounts?limit=1&cursor={cursor}").status == 200
        r = other.get(f"/v1/accounts?limit=1&cursor={cursor}")
        assert r.status == 400 and r.json["code"] == "cursor_mismatch", r


def test_keys_seqs_orders_and_skus_are_per_mode(worlds):
    live, test, live_world, test_world = worlds
    # make_world used the same biz_seq, external_order_id and sku in both modes
    assert live_world["same_transfer"] != test_world["same_transfer"]
    assert live_world["same_order"] != test_world["same_order"]
    for user, world in ((live, live_world), (test, test_world)):
        r = user.get("/v1/transfers/by-biz-seq/seq-same")
        assert r.status == 200 and r.json["id"] == world["same_transfer"], r
        assert user.get("/v1/products/sku-same").json["livemode"] is (user is live)
        orders = {o["id"] for o in user.get("/v1/orders?limit=100").json["data"]}
        assert world["same_order"] in orders
    # the same Idempotency-Key makes one account in each mode, and replays within its mode
    made = {}
    for user in (live, test):
        first = user.post("/v1/accounts", {"currency": "EUR"}, idem="same-key-both-modes")
        again = user.post("/v1/accounts", {"currency": "EUR"}, idem="same-key-both-modes")
        assert first.status == 201 and again.json["id"] == first.json["id"], (first, again)
        assert again.json["livemode"] is (user is live)
        # from the second replay on the answer comes from memory (idem/replay_cache.c), kept
        # marked with its mode: the same bytes
        for _ in range(2):
            memory = user.post("/v1/accounts", {"currency": "EUR"}, idem="same-key-both-modes")
            assert memory.raw == again.raw, (memory, again)
        made[user is live] = first.json["id"]
    assert made[True] != made[False]


# after the tests above: its requests change and delete what the worlds hold
def test_every_route_with_an_id_hides_the_other_modes_objects(worlds):
    live, test, live_world, test_world = worlds
    checked = 0
    table = [r for r in routes() if r["auth"] and "{" in r["path"]]
    # changes last, so every read still finds its object
    table.sort(key=lambda r: {"GET": 0, "POST": 1, "PUT": 1, "PATCH": 1, "DELETE": 2}[r["method"]])
    for route in table:
        for asker, world, own in ((test, live_world, live), (live, test_world, test)):
            r = request_route(asker, route, world)
            assert r.status == 404 and r.json["code"] == "resource_missing", (route, r)
            mine = request_route(own, route, world)
            assert mine.status != 404, (route, mine)
            says_its_mode(mine, own is live)
            checked += 1
    assert checked >= 2 * 20, checked


def test_events_and_deliveries_stay_in_their_mode(server):
    live = server.create_user("modes-hooks")
    test = live.in_test_mode()
    rx = {True: Receiver(), False: Receiver()}
    try:
        for user, is_live in ((live, True), (test, False)):
            made = user.post("/v1/webhook_endpoints", {"url": rx[is_live].url,
                                                       "events": ["account.created"]})
            assert made.status == 201 and made.json["livemode"] is is_live, made
        accounts = {True: live.create_account()["id"], False: test.create_account()["id"]}
        for is_live in (True, False):
            assert rx[is_live].wait_for(lambda r: accounts[is_live] in json.dumps(r.delivered())), \
                is_live
        time.sleep(0.5)  # room for a stray delivery to the other mode's endpoint
        for is_live in (True, False):
            delivered = list(rx[is_live].delivered().values())
            assert len(delivered) == 1, delivered
            assert delivered[0]["livemode"] is is_live
            assert delivered[0]["data"]["object"]["id"] == accounts[is_live]
            assert delivered[0]["data"]["object"]["livemode"] is is_live
        for user, is_live in ((live, True), (test, False)):
            shown = ids_in(user.get("/v1/events?type=account.created"))
            assert accounts[is_live] in json.dumps(user.get("/v1/events").json)
            assert accounts[not is_live] not in json.dumps(user.get("/v1/events").json), shown
    finally:
        for r in rx.values():
            r.close()


def test_rate_limits_are_per_mode(fresh_server):
    s = fresh_server(["--rate-limit", "5/s", "--rate-burst", "5"])
    live = s.create_user("modes-rate")
    test = live.in_test_mode()
    statuses = [live.get("/v1/accounts").status for _ in range(20)]
    assert 429 in statuses, statuses
    assert test.get("/v1/accounts").status == 200  # the test mode's own budget
    statuses = [test.get("/v1/accounts").status for _ in range(20)]
    assert 429 in statuses, statuses


def test_test_mode_charges_the_builtin_processor(tmp_path):
    sim = Sim(str(tmp_path)).start()
    s = Payd(str(tmp_path), args=["--processor", sim.url])
    s.start()
    try:
        live = s.create_user("modes-processor")
        test = live.in_test_mode()
        live_account, test_account = live.create_account(), test.create_account()
        # a live request with a test token is refused before anything is charged
        for token in ("tok_visa", "tok_chargeDeclined", "tok_slow"):
            r = live.pay(live_account, source=token)
            assert r.status == 400 and r.json["code"] == "invalid_parameter", r
            assert r.json["param"] == "source", r
        assert sim.stats()["charges"] == 0
        # a test request charges the builtin simulator: the external one sees nothing
        r = test.pay(test_account, source="tok_visa")
        assert r.status == 201 and r.json["livemode"] is False, r
        declined = test.pay(test_account, source="tok_chargeDeclined")
        assert declined.status == 402, declined
        assert sim.stats()["charges"] == 0
        # a live card token goes to --processor
        r = live.pay(live_account, source="tok_card4242")
        assert r.status == 201 and r.json["livemode"] is True, r
        assert sim.stats()["charges"] == 1
        # a test charge whose answer was lost resumes on the builtin simulator too
        lost = test.pay(test_account, amount=700, source="tok_lostResponse", idem="test-lost")
        assert lost.status == 503 and lost.json["code"] == "processor_unavailable", lost
        resumed = test.pay(test_account, amount=700, source="tok_lostResponse", idem="test-lost")
        assert resumed.status == 201 and resumed.json["livemode"] is False, resumed
        assert sim.stats()["charges"] == 1
        refund = test.post(f"/v1/payments/{test.pay(test_account).json['id']}/refunds",
                           {"amount": 5}, idem="test-refund")
        assert refund.status == 201 and refund.json["livemode"] is False, refund
        assert sim.stats()["refunds"] == 0
        s.stop()
        # the books add up: live mode's against the simulator, test mode's against the builtin
        summary = verify_ledger(s.db, settle_s=5, processor=sim.url)
        assert summary["ok"] and summary["processor_stats"]["charges"] == 1, summary
        assert not verify_ledger(s.db, settle_s=5, processor="none")["violations"]
    finally:
        s.stop()
        sim.stop()


def test_builtin_processor_takes_test_tokens_in_live_mode(worlds):
    live, _, live_world, _ = worlds
    r = live.pay(live_world["account"], source="tok_visa")
    assert r.status == 201 and r.json["livemode"] is True, r


def test_twins_are_no_users_of_their_own(server):
    before = [json.loads(l)["id"] for l in server.cli("user", "list").stdout.splitlines()]
    made = server.create_user("modes-list")
    after = [json.loads(l)["id"] for l in server.cli("user", "list").stdout.splitlines()]
    assert after == before + [made.id]
    assert server.sql("SELECT COUNT(*) FROM users WHERE mode = 'test' AND live_user_id IS NOT NULL") >= 1
    # disabling the user turns its test keys off too
    server.cli("user", "disable", made.id)
    time.sleep(0.1)
    assert made.in_test_mode().get("/v1/accounts").status == 401
    server.cli("user", "enable", made.id)


def test_a_user_made_before_modes_gets_its_test_mode_on_first_need(server):
    """A user from before schema 16 has live keys only; its test mode (the twin) is made by the
    first test key asked for, over the API or on the command line, and found by the next."""
    old = server.create_user("modes-before")
    twin = f"(SELECT id FROM users WHERE live_user_id = (SELECT id FROM users WHERE name = " \
           f"'modes-before' AND mode = 'live'))"
    server.execute(f"DELETE FROM api_keys WHERE user_id = {twin}",
                   f"DELETE FROM users WHERE id = {twin}")
    assert server.sql(f"SELECT COUNT(*) FROM users WHERE id = {twin}") == 0
    assert old.in_test_mode().get("/v1/accounts").status == 401
    live_account = old.create_account()

    made = old.post("/v1/api_keys", {"mode": "test"})
    assert made.status == 201 and made.json["livemode"] is False, made
    test = User(server, old.id, made.json["api_key"])
    assert test.get("/v1/accounts").json["data"] == []
    assert test.get(f"/v1/accounts/{live_account['id']}").status == 404
    test_account = test.create_account()
    cli = json.loads(server.cli("key", "create", "--user", old.id, "--mode", "test").stdout)
    again = User(server, old.id, cli["api_key"])
    assert [a["id"] for a in again.get("/v1/accounts").json["data"]] == [test_account["id"]]
    assert server.sql(f"SELECT COUNT(*) FROM users WHERE live_user_id IS NOT NULL AND "
                      f"id = {twin}") == 1


def test_the_access_log_names_the_user_and_the_mode(server):
    """A test key's requests are logged under the user (never its twin) with livemode false."""
    user = server.create_user("modes-log")
    for who, live in ((user, True), (user.in_test_mode(), False)):
        request_id = f"req_modes_log_{'live' if live else 'test'}"
        assert who.get("/v1/accounts", headers={"X-Request-Id": request_id}).status == 200
        for _ in range(100):
            lines = [json.loads(l) for l in server.read_log().splitlines()
                     if l.strip().startswith("{") and request_id in l]
            if lines:
                break
            time.sleep(0.05)
        assert lines and lines[0]["user_id"] == user.id and lines[0]["livemode"] is live, lines
