"""Caps per user (README flag table): --max-webhook-endpoints, --max-api-keys and
--max-webhook-fanout. Over a cap the create is refused 409 with its own code and nothing is
written; two creates racing at cap - 1 never both pass (the count runs in the write job that
inserts, on both databases); one event is delivered to at most the fan-out cap of endpoints."""

import os
import threading
import time

from receiver import Receiver


def key():
    return os.urandom(8).hex()


def endpoint(user, path="/x", idem=None):
    return user.post("/v1/webhook_endpoints",
                     {"url": f"http://127.0.0.1:9{path}", "events": ["*"]}, idem=idem)


def count(server, sql):
    return int(server.sql(sql))


def numeric(payd_id):
    """The 64-bit id inside "<prefix>_<13 Crockford base32 chars>"."""
    value = 0
    for ch in payd_id.split("_", 1)[1]:
        value = value * 32 + "0123456789abcdefghjkmnpqrstvwxyz".index(ch)
    return value


def test_webhook_endpoints_per_user(fresh_server):
    s = fresh_server(args=["--max-webhook-endpoints", "3"])
    u, other = s.create_user("capped"), s.create_user("other")
    made = [endpoint(u, f"/{i}") for i in range(3)]
    assert all(r.status == 201 for r in made), made
    # a disabled endpoint still counts
    assert u.request("PATCH", f"/v1/webhook_endpoints/{made[0].json['id']}",
                     {"disabled": True}).status == 200
    k = key()
    over = endpoint(u, "/3", idem=k)
    assert over.status == 409 and over.json["code"] == "webhook_endpoint_limit_reached", over
    assert "3" in over.json["detail"]
    assert count(s, f"SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = {numeric(u.id)}") == 3
    assert endpoint(other, "/other").status == 201  # the cap is per user
    # nothing was kept for the key: once one is deleted, the same request makes the endpoint
    assert u.request("DELETE", f"/v1/webhook_endpoints/{made[1].json['id']}").status == 200
    again = endpoint(u, "/3", idem=k)
    assert again.status == 201 and again.header("Idempotent-Replayed") is None, again


def test_active_api_keys_per_user(fresh_server):
    s = fresh_server(args=["--max-api-keys", "3"])
    u = s.create_user("keys")  # its first key is one of the three
    made = [u.post("/v1/api_keys", {"name": f"k{i}"}) for i in range(2)]
    assert all(r.status == 201 for r in made), made
    over = u.post("/v1/api_keys", {"name": "one too many"}, idem=key())
    assert over.status == 409 and over.json["code"] == "api_key_limit_reached", over
    assert count(s, f"SELECT COUNT(*) FROM api_keys WHERE user_id = {numeric(u.id)}") == 3
    # a revoked key does not count
    assert u.request("DELETE", f"/v1/api_keys/{made[0].json['id']}").status == 200
    assert u.post("/v1/api_keys", {"name": "replacement"}).status == 201
    assert u.post("/v1/api_keys", {"name": "one too many"}).status == 409


def race(n, create):
    """n creates released at one instant; their statuses."""
    start = threading.Barrier(n)
    statuses = [None] * n

    def run(i):
        start.wait()
        statuses[i] = create(i).status

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


def test_creates_racing_at_cap_minus_one_never_both_pass(fresh_server):
    cap = 4
    s = fresh_server(args=["--max-webhook-endpoints", str(cap), "--max-api-keys", str(cap),
                           "--rate-limit", "100000/s"])
    for round_ in range(3):
        u = s.create_user(f"racer{round_}")
        for i in range(cap - 1):
            assert endpoint(u, f"/{i}").status == 201
        for i in range(cap - 2):  # the user's first key is one
            assert u.post("/v1/api_keys", {"name": f"k{i}"}).status == 201
        statuses = race(8, lambda i: endpoint(u, f"/race{i}", idem=key()))
        assert sorted(statuses) == [201] + [409] * 7, statuses
        assert count(s, f"SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = {numeric(u.id)}") == cap
        statuses = race(8, lambda i: u.post("/v1/api_keys", {"name": f"race{i}"}, idem=key()))
        assert sorted(statuses) == [201] + [409] * 7, statuses
        assert count(s, f"SELECT COUNT(*) FROM api_keys WHERE user_id = {numeric(u.id)} "
                        "AND status = 'active'") == cap


def test_one_event_goes_to_at_most_the_fanout_cap(fresh_server):
    """Three endpoints with the same url: they are not merged (each has its own secret and
    attempts), so each counts; the cap of 2 delivers to the two oldest."""
    s = fresh_server(args=["--max-webhook-fanout", "2", "--webhook-retry-scale", "0.001"])
    u = s.create_user()
    rx = Receiver()
    try:
        made = [u.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["*"]}).json
                for _ in range(3)]
        u.create_account()
        assert rx.wait_for(lambda r: len(r.requests) >= 2)
        time.sleep(1)  # room for a third delivery, which must not come
        assert len(rx.requests) == 2, rx.requests
        signatures = {r["signature"] for r in rx.requests}
        assert len(signatures) == 2  # two endpoints, two secrets
        attempts = [u.get(f"/v1/webhook_endpoints/{e['id']}/deliveries").json["data"]
                    for e in made]
        assert [len(a) for a in attempts] == [1, 1, 0], attempts
        assert count(s, "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = "
                        f"{int(s.sql('SELECT MAX(id) FROM webhook_endpoints'))}") == 0
    finally:
        rx.close()
