"""The dashboard's server side (§16): the static files built into the binary (content types,
strong ETags and 304, a strict Content-Security-Policy), and GET /v1/accounts/{id}/payments/stats
answered from the volume rollup, which must always equal the sums over the payments themselves,
after declines, partial refunds, concurrent writers and `payd dev seed`."""

import json
import os
import random
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

HOUR = timedelta(hours=1)


def key():
    return os.urandom(8).hex()


def stats(user, account, **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return user.get(f"/v1/accounts/{account['id']}/payments/stats" + (f"?{q}" if q else ""))


def listed(user, account):
    out, cursor = [], None
    while True:
        r = user.get(f"/v1/accounts/{account['id']}/payments?limit=100"
                     + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        out += r.json["data"]
        if not r.json["has_more"]:
            return out
        cursor = r.json["next_cursor"]


def sums(payments):
    charged = [p for p in payments if p["status"] != "failed"]
    return {"count": len(charged), "amount": sum(p["amount"] for p in charged),
            "refunded_amount": sum(p["refunded_amount"] for p in charged),
            "net_amount": sum(p["amount"] - p["refunded_amount"] for p in charged)}


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def this_hour():
    return datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)


# ---- static files ----

def test_index_and_assets_are_served_with_types_and_a_strict_policy(server):
    r = server.request("GET", "/")
    assert r.status == 200, r
    assert r.header("content-type") == "text/html; charset=utf-8"
    csp = r.header("content-security-policy")
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'",
                      "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'"):
        assert directive in csp, csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "http" not in csp
    assert r.header("x-content-type-options") == "nosniff"
    html = r.raw.decode()
    # nothing inline and nothing from elsewhere: every script and style is a file of ours
    assert "<style" not in html and " style=" not in html and not re.search(r"<script(?![^>]*src=)", html)
    refs = re.findall(r'(?:src|href)="([^"#]+)"', html)
    assert refs and all(ref.startswith("/assets/") for ref in refs), refs
    types = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
             ".svg": "image/svg+xml"}
    for ref in set(refs):
        a = server.request("GET", ref)
        assert a.status == 200, (ref, a)
        assert a.header("content-type") == types[os.path.splitext(ref)[1]], ref
        assert a.header("content-security-policy") == csp
        if ref.endswith(".js"):  # the modules import each other only by relative path
            for imported in re.findall(r"from '([^']+)'", a.raw.decode()):
                assert imported.startswith("./"), (ref, imported)
                assert server.request("GET", "/assets/" + imported[2:]).status == 200


def test_etag_is_strong_and_if_none_match_answers_304(server):
    first = server.request("GET", "/assets/app.js")
    etag = first.header("etag")
    assert re.fullmatch(r'"[0-9a-f]{32}"', etag), etag
    assert first.header("cache-control") == "no-cache"  # revalidated on every load
    again = server.request("GET", "/assets/app.js")
    assert again.header("etag") == etag and again.raw == first.raw
    for inm in (etag, f'W/{etag}', f'"other", {etag}', "*"):
        r = server.request("GET", "/assets/app.js", headers={"If-None-Match": inm})
        assert r.status == 304 and r.raw == b"" and r.header("etag") == etag, (inm, r)
    stale = server.request("GET", "/assets/app.js", headers={"If-None-Match": '"0000"'})
    assert stale.status == 200 and stale.raw == first.raw
    assert server.request("GET", "/").header("etag") != etag  # one tag per file


def test_unknown_asset_is_a_problem(server):
    for path in ("/assets/nope.js", "/assets/..", "/assets/index.html"):
        r = server.request("GET", path)
        assert r.status == 404 and r.header("content-type") == "application/problem+json", (path, r)
        assert r.json["code"] == "route_not_found"
    r = server.request("POST", "/")
    assert r.status == 405 and r.json["code"] == "method_not_allowed"


# ---- statistics ----

def test_stats_equal_the_listed_payments_after_declines_and_refunds(alice):
    account = alice.create_account()
    payments = []
    for i in range(12):
        r = alice.pay(account, 1000 + i, source="tok_chargeDeclined" if i % 4 == 3 else "tok_visa")
        assert r.status in (201, 402), r
        payments.append(r.json if r.status == 201 else r.json["payment"])
    ok = [p for p in payments if p["status"] == "succeeded"]
    assert alice.post(f"/v1/payments/{ok[0]['id']}/refunds", {"amount": 300}, idem=key()).status == 201
    assert alice.post(f"/v1/payments/{ok[1]['id']}/refunds", {}, idem=key()).status == 201
    # a refused refund leaves the rollup alone
    too_much = alice.post(f"/v1/payments/{ok[0]['id']}/refunds", {"amount": 5000}, idem=key())
    assert too_much.json["code"] == "amount_exceeds_refundable"

    expected = sums(listed(alice, account))
    assert expected["count"] == 9 and expected["refunded_amount"] == 300 + ok[1]["amount"]
    for interval in ("hour", "day"):
        r = stats(alice, account, interval=interval)
        assert r.status == 200, r
        body = r.json
        assert (body["object"], body["account_id"], body["currency"], body["interval"]) == (
            "payment_stats", account["id"], "USD", interval)
        assert body["created_gte"] is None and body["created_lt"] is None
        assert body["total"] == expected, body
        bucket_sum = {k: sum(b[k] for b in body["data"]) for k in expected}
        assert bucket_sum == expected
        for b in body["data"]:
            start = datetime.fromisoformat(b["bucket_start"].replace("Z", "+00:00"))
            assert start.minute == start.second == 0 and (interval == "hour" or start.hour == 0)
    assert stats(alice, account).json["interval"] == "day"  # the default


def test_stats_bounds_select_buckets(alice):
    account = alice.create_account()
    assert alice.pay(account, 700).status == 201
    hour = this_hour()
    inside = stats(alice, account, interval="hour", created_gte=iso(hour),
                   created_lt=iso(hour + HOUR)).json
    # the payment may have landed just before the hour turned: then it is one bucket earlier
    if inside["total"]["count"] == 0:
        hour -= HOUR
        inside = stats(alice, account, interval="hour", created_gte=iso(hour),
                       created_lt=iso(hour + HOUR)).json
    assert inside["total"]["amount"] == 700 and len(inside["data"]) == 1
    assert inside["data"][0]["bucket_start"] == hour.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert inside["created_gte"] == hour.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    later = stats(alice, account, interval="hour", created_gte=iso(hour + HOUR)).json
    assert later["data"] == [] and later["total"] == {
        "count": 0, "amount": 0, "refunded_amount": 0, "net_amount": 0}
    earlier = stats(alice, account, interval="hour", created_lt=iso(hour)).json
    assert earlier["data"] == []
    day = hour.replace(hour=0)
    whole_day = stats(alice, account, interval="day", created_gte=iso(day),
                      created_lt=iso(day + timedelta(days=1))).json
    assert whole_day["total"]["amount"] == 700


def test_stats_validation(alice, bob):
    account = alice.create_account()
    hour = this_hour()
    cases = [
        ({"interval": "week"}, "invalid_parameter", "interval"),
        ({"interval": ""}, "invalid_parameter", "interval"),
        ({"interval": "hour", "created_gte": "yesterday"}, "invalid_parameter", "created_gte"),
        ({"interval": "hour", "created_gte": iso(hour + timedelta(minutes=30))},
         "invalid_parameter", "created_gte"),
        ({"interval": "day", "created_lt": iso(hour.replace(hour=1))}, "invalid_parameter",
         "created_lt"),
        ({"interval": "hour", "created_gte": iso(hour), "created_lt": iso(hour)},
         "invalid_parameter", "created_lt"),
        ({"interval": "hour", "limit": "5"}, "unknown_parameter", "limit"),
    ]
    for query, code, param in cases:
        r = stats(alice, account, **query)
        assert r.status == 400, (query, r)
        assert r.header("content-type") == "application/problem+json"
        assert (r.json["code"], r.json["param"]) == (code, param), (query, r)
    twice = alice.get(f"/v1/accounts/{account['id']}/payments/stats?interval=day&interval=hour")
    assert (twice.status, twice.json["code"], twice.json["param"]) == (
        400, "invalid_parameter", "interval")
    # another user's account, and no key at all
    assert stats(bob, account).json["code"] == "resource_missing"
    assert alice.server.request(
        "GET", f"/v1/accounts/{account['id']}/payments/stats").status == 401


def test_rollup_equals_the_payments_under_concurrent_writers(fresh_server):
    server = fresh_server(["--rate-limit", "100000/s"])
    user = server.create_user("busy")
    accounts = [user.create_account() for _ in range(2)]

    def work(seed):
        rng = random.Random(seed)
        account = accounts[seed % 2]
        for _ in range(10):
            source = "tok_chargeDeclined" if rng.random() < 0.2 else "tok_visa"
            r = user.pay(account, rng.randint(100, 900), source=source)
            assert r.status in (201, 402), r
            if r.status == 201 and rng.random() < 0.5:
                # two racing refunds of one payment: at most what it holds counts
                with ThreadPoolExecutor(2) as pool:
                    list(pool.map(lambda _: user.post(
                        f"/v1/payments/{r.json['id']}/refunds",
                        {"amount": rng.randint(1, r.json["amount"])}, idem=key()), range(2)))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(16)))
    for account in accounts:
        expected = sums(listed(user, account))
        assert expected["count"] > 0 and expected["refunded_amount"] > 0
        assert stats(user, account, interval="hour").json["total"] == expected


def test_dev_seed_fills_the_rollup(fresh_server):
    server = fresh_server(start=False)
    user = server.create_user("seeded")
    account = json.loads(server.cli("account", "create", "--user", user.id,
                                    "--currency", "EUR").stdout)
    server.cli("dev", "seed", "--account", account["id"], "--count", "2500")
    server.start()
    expected = sums(listed(user, account))
    assert expected["count"] == 2250  # every tenth seeded payment failed
    body = stats(user, account, interval="hour").json
    assert body["total"] == expected and body["currency"] == "EUR"
