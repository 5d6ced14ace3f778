"""`payd user list`, `payd user disable` and `payd user enable` (docs/api.md §13), on SQLite and
PostgreSQL: the list shows every user and its count of active keys and never a key; a disabled
user's keys answer 401 on every route, at once on a node without an auth cache and within
--auth-cache-ttl on one with it; enabling gives them back."""

import json
import time

import pytest

from conftest import User


def listed(server, *extra):
    return [json.loads(l) for l in server.cli("user", "list", *extra).stdout.splitlines()]


def test_user_list_shows_every_user_and_never_a_key(fresh_server):
    s = fresh_server(["--auth-cache-ttl", "0s"])
    ann = s.create_user("ann", email="ann@example.test")
    ben = s.create_user('ben "the\tbold"')
    made = ann.post("/v1/api_keys", {"name": "second"}, idem="second-key")
    assert made.status == 201
    users = listed(s)
    # oldest first; a user's test mode (its test twin, docs/modes.md) is no user of its own, and
    # its test key counts among the user's keys
    assert [u["id"] for u in users] == [ann.id, ben.id]
    assert users[0] == {"id": ann.id, "name": "ann", "email": "ann@example.test",
                        "created_at": users[0]["created_at"], "disabled": False,
                        "disabled_at": None, "active_keys": 3}
    assert users[1]["name"] == 'ben "the\tbold"' and users[1]["email"] is None
    assert users[1]["active_keys"] == 2
    text = s.cli("user", "list").stdout + s.cli("user", "list", "--format", "table").stdout
    for secret in (ann.key, ann.test_key, ben.key, made.json["api_key"], made.json["prefix"]):
        assert secret not in text

    table = s.cli("user", "list", "--format", "table").stdout.splitlines()
    assert table[0].split() == ["ID", "NAME", "EMAIL", "CREATED", "DISABLED", "ACTIVE", "KEYS"]
    assert table[1].split()[:3] == [ann.id, "ann", "ann@example.test"]
    assert table[2].startswith(ben.id) and "\t" not in table[2]  # no control character drawn
    assert table[1].split()[-2:] == ["no", "3"]

    bad = s.cli("user", "list", "--format", "xml", check=False)
    assert bad.returncode == 2 and bad.stdout == ""


@pytest.mark.parametrize("cache", ["0s", "1s"])
def test_disable_turns_every_key_off_and_enable_back_on(fresh_server, cache):
    s = fresh_server(["--auth-cache-ttl", cache])
    ann = s.create_user("ann")
    other = s.create_user("other")
    second = ann.post("/v1/api_keys", {"name": "second"}, idem="second").json["api_key"]
    account = ann.create_account()
    keys = [ann.key, second]
    for key in keys:  # the cache, when there is one, now holds both keys
        assert s.request("GET", "/v1/users/me", key=key).status == 200

    out = s.cli("user", "disable", ann.id)
    shown = json.loads(out.stdout)
    assert shown["id"] == ann.id and shown["disabled"] is True and shown["disabled_at"]
    assert json.loads(s.cli("user", "disable", ann.id).stdout) == shown  # again: unchanged

    routes = [("GET", "/v1/users/me", None), ("GET", "/v1/accounts", None),
              ("GET", f"/v1/accounts/{account['id']}", None),
              ("POST", "/v1/accounts", {"currency": "USD"}),
              ("POST", "/v1/payments", {"account_id": account["id"], "amount": 100,
                                        "currency": "USD", "source": "tok_visa"}),
              ("GET", "/v1/events", None), ("GET", "/v1/api_keys", None)]
    deadline = time.time() + (0 if cache == "0s" else 1.0 + 2.0)  # the bound, and some slack
    while True:
        refused = [s.request("GET", "/v1/users/me", key=k).status == 401 for k in keys]
        if all(refused) or time.time() > deadline:
            break
        time.sleep(0.1)
    statuses = [s.request(m, p, key=k, body=b, headers={"Idempotency-Key": f"i{n}"}).status
                for n, (m, p, b) in enumerate(routes) for k in keys]
    assert set(statuses) == {401}, statuses
    assert User(s, other.id, other.key).get("/v1/users/me").status == 200  # others unaffected
    assert listed(s)[0]["disabled"] is True

    enabled = json.loads(s.cli("user", "enable", ann.id).stdout)
    assert enabled["disabled"] is False and enabled["disabled_at"] is None
    for key in keys:
        assert s.request("GET", "/v1/users/me", key=key).status == 200


def test_disable_refuses_what_it_cannot_find(fresh_server):
    s = fresh_server()
    for args, code in ((["user", "disable", "usr_0000000000000"], 1),
                       (["user", "enable", "usr_0000000000000"], 1),
                       (["user", "disable", "acct_0000000000000"], 2),
                       (["user", "disable"], 2),
                       (["user", "frobnicate"], 2)):
        out = s.cli(*args, check=False)
        assert out.returncode == code and out.stdout == "", (args, out.stderr)
