"""Several API keys per user (§13): create, list, revoke through the API and `payd key`; keys
shown once and stored hashed; rotation without a failed request; a revoked key refused on this
node at once and on every node within --auth-cache-ttl (two nodes on one PostgreSQL)."""

import hashlib
import json
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BACKEND, Payd, User

TTL_S = 1  # the --auth-cache-ttl of the servers that test revocation


def keys_of(user, query=""):
    r = user.get("/v1/api_keys" + query)
    assert r.status == 200, r
    return r.json["data"]


def new_key(user, name=None):
    r = user.post("/v1/api_keys", {"name": name} if name else None)
    assert r.status == 201, r
    return r.json


def test_create_shows_the_key_once_and_lists_prefixes_only(server):
    u = server.create_user("keys-create")
    first = keys_of(u)
    assert len(first) == 1 and first[0]["status"] == "active" and first[0]["revoked_at"] is None

    made = new_key(u, "ci")
    assert made["object"] == "api_key" and made["id"].startswith("key_") and made["name"] == "ci"
    assert made["api_key"].startswith("sk_live_") and made["api_key"].startswith(made["prefix"])
    assert len(made["prefix"]) == 16 and made["status"] == "active" and made["user_id"] == u.id
    assert made["mode"] == "live" and made["livemode"] is True

    listed = keys_of(u)
    assert {k["id"] for k in listed} == {first[0]["id"], made["id"]}
    for k in listed:
        assert "api_key" not in k and "key_hash" not in k
        assert set(k) == {"id", "object", "livemode", "user_id", "name", "prefix", "status",
                          "mode", "created_at", "revoked_at"}
    assert made["api_key"] not in json.dumps(listed)

    # The new key works at once; the database holds its SHA-256, never the key.
    assert User(server, u.id, made["api_key"]).get("/v1/users/me").status == 200
    digest = hashlib.sha256(made["api_key"].encode()).hexdigest()
    assert server.sql(f"SELECT COUNT(*) FROM api_keys WHERE key_hash = '{digest}'") == 1
    assert server.sql(f"SELECT COUNT(*) FROM api_keys WHERE key_hash = '{made['api_key']}' "
                      f"OR prefix = '{made['api_key']}'") == 0


def test_create_validates_the_body(server):
    u = server.create_user("keys-body")
    r = u.post("/v1/api_keys", {"name": "x", "scope": "all"})
    assert r.status == 400 and r.json["code"] == "unknown_parameter", r
    r = u.post("/v1/api_keys", {"name": "x" * 101})
    assert r.status == 400 and r.json["code"] == "invalid_parameter", r


def test_a_request_cannot_revoke_its_own_key(server):
    u = server.create_user("keys-self")
    own = keys_of(u)[0]["id"]
    r = u.request("DELETE", f"/v1/api_keys/{own}")
    assert r.status == 409 and r.json["code"] == "api_key_in_use", r
    assert u.get("/v1/users/me").status == 200


def test_rotation_without_a_failed_request(fresh_server):
    """Clients keep calling with the old key while the new one is made, they move to the new
    key, and the old one is revoked: not one request fails."""
    s = fresh_server(["--auth-cache-ttl", f"{TTL_S}s", "--rate-limit", "100000/s"])
    old = s.create_user("keys-rotate")
    old_id = keys_of(old)[0]["id"]
    calls = lambda user, n: [user.get("/v1/users/me").status for _ in range(n)]
    with ThreadPoolExecutor(4) as pool:
        during = pool.submit(calls, old, 40)
        made = new_key(old, "next")
        new = User(s, old.id, made["api_key"])
        both = [pool.submit(calls, old, 20), pool.submit(calls, new, 20)]
        assert during.result() == [200] * 40
        assert all(f.result() == [200] * 20 for f in both)
    r = new.request("DELETE", f"/v1/api_keys/{old_id}")
    assert r.status == 200 and r.json["status"] == "revoked" and r.json["revoked_at"], r
    # This node forgets the revoked key at once.
    gone = old.get("/v1/users/me")
    assert gone.status == 401 and gone.json["code"] == "unauthorized", gone
    assert calls(new, 10) == [200] * 10
    # Revoking again changes nothing; the list shows it revoked, ?status filters.
    again = new.request("DELETE", f"/v1/api_keys/{old_id}")
    assert again.status == 200 and again.json["revoked_at"] == r.json["revoked_at"]
    assert [k["id"] for k in keys_of(new, "?status=revoked")] == [old_id]
    assert [k["id"] for k in keys_of(new, "?status=active")] == [made["id"]]


def test_another_users_key_is_missing(server):
    alice = server.create_user("keys-alice")
    bob = server.create_user("keys-bob")
    alices = keys_of(alice)[0]["id"]
    r = bob.request("DELETE", f"/v1/api_keys/{alices}")
    assert r.status == 404 and r.json["code"] == "resource_missing", r
    assert alices not in {k["id"] for k in keys_of(bob)}
    assert alice.get("/v1/users/me").status == 200
    r = bob.request("DELETE", "/v1/api_keys/key_notanid")
    assert r.status == 404 and r.json["code"] == "resource_missing", r
    r = bob.request("DELETE", "/v1/api_keys")
    assert r.status == 405, r


def test_command_line_keys(fresh_server):
    s = fresh_server(["--auth-cache-ttl", f"{TTL_S}s"])
    u = s.create_user("keys-cli")
    made = json.loads(s.cli("key", "create", "--user", u.id, "--name", "deploy").stdout)
    assert set(made) >= {"key_id", "api_key"} and made["api_key"].startswith("sk_")
    second = User(s, u.id, made["api_key"])
    listed = [json.loads(line) for line in s.cli("key", "list", "--user", u.id).stdout.split()]
    # the live and test keys `user create` made, and this one (live unless --mode test)
    assert [k["status"] for k in listed] == ["active", "active", "active"]
    assert [k["mode"] for k in listed] == ["live", "test", "live"]
    assert made["key_id"] in {k["id"] for k in listed}
    assert made["api_key"] not in s.cli("key", "list", "--user", u.id).stdout

    assert second.get("/v1/users/me").status == 200  # now cached on the server
    revoked = json.loads(s.cli("key", "revoke", made["key_id"]).stdout)
    assert revoked["status"] == "revoked"
    # Another process revoked it: the server refuses it once its cache entry expires.
    time.sleep(TTL_S + 0.5)
    assert second.get("/v1/users/me").status == 401
    assert u.get("/v1/users/me").status == 200

    missing = s.cli("key", "revoke", "key_0000000000000", check=False)
    assert missing.returncode == 1 and "no such key" in missing.stderr
    assert s.cli("key", "list", "--user", "usr_0000000000000", check=False).returncode == 1
    assert s.cli("key", "create", check=False).returncode == 2
    assert s.cli("key", "frob", check=False).returncode == 2


def test_migration_moves_existing_keys(tmp_path):
    """A database made before api_keys existed: its users' keys keep working after upgrade."""
    s = Payd(str(tmp_path))
    s.cli("migrate")
    key = "sk_" + "legacy" + os.urandom(8).hex()
    digest = hashlib.sha256(key.encode()).hexdigest()
    # before api_keys, and so before modes (schema 16) too
    downgrade = ["DROP TABLE api_keys", "DROP INDEX users_test_twin",
                 "ALTER TABLE users DROP COLUMN live_user_id", "ALTER TABLE users DROP COLUMN mode",
                 "DELETE FROM schema_migrations WHERE version IN (3, 16)",
                 "INSERT INTO users (id, name, api_key_hash, version, created_at, updated_at) "
                 f"VALUES (4242, 'old', '{digest}', 1, 1, 1)"]
    if s.pg_database:
        import pg
        for statement in downgrade:
            pg.cluster().psql(statement, s.pg_database)
    else:
        with sqlite3.connect(s.db) as c:
            for statement in downgrade:
                c.execute(statement)
    s.start()
    try:
        old = User(s, None, key)
        r = old.get("/v1/users/me")
        assert r.status == 200 and r.json["name"] == "old", r
        listed = keys_of(old)
        assert len(listed) == 1 and listed[0]["prefix"] == "sk_" and listed[0]["status"] == "active"
        assert s.sql("SELECT MAX(version) FROM schema_migrations") >= 3
    finally:
        s.stop()


@pytest.mark.skipif(BACKEND != "postgres",
                    reason="two nodes share one database on PostgreSQL only")
def test_revocation_reaches_every_node_within_the_cache_ttl(tmp_path):
    args = ["--auth-cache-ttl", f"{TTL_S}s"]
    a = Payd(str(tmp_path / "a"), args=args + ["--node-id", "1"])
    os.makedirs(a.tmpdir)
    a.start()
    b = Payd(str(tmp_path / "b"), args=args + ["--node-id", "2"], db=a.db)
    os.makedirs(b.tmpdir)
    b.start()
    try:
        user = a.create_user("keys-nodes")
        old_id = keys_of(user)[0]["id"]
        made = new_key(user, "rotated")
        new_on_a = User(a, user.id, made["api_key"])
        old_on_b, new_on_b = User(b, user.id, user.key), User(b, user.id, made["api_key"])
        # Both keys work on both nodes, and node b now holds the old key in its cache.
        assert old_on_b.get("/v1/users/me").status == 200
        assert new_on_b.get("/v1/users/me").status == 200

        r = new_on_a.request("DELETE", f"/v1/api_keys/{old_id}")
        assert r.status == 200 and r.json["status"] == "revoked", r
        assert user.get("/v1/users/me").status == 401  # node a: at once
        time.sleep(TTL_S + 0.5)
        refused = old_on_b.get("/v1/users/me")  # node b: once its cache entry expired
        assert refused.status == 401 and refused.json["code"] == "unauthorized", refused
        assert new_on_b.get("/v1/users/me").status == 200
        # Node b lists what node a revoked.
        assert {k["id"]: k["status"] for k in keys_of(new_on_b)}[old_id] == "revoked"
    finally:
        b.stop()
        a.stop()
