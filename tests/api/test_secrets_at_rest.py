"""Secrets at rest (docs/webhooks.md, docs/idempotency.md): a webhook endpoint's signing secret
and a new API key are shown in their create's first answer only; the database holds neither in
the clear (the endpoint's row keeps the secret sealed, the idempotency key keeps the answer with
the secret redacted); a replay shows it redacted with how to rotate it; POST /v1/api_keys honours
Idempotency-Key; deliveries still sign with the secret shown at creation; secrets stored in the
clear before this release are sealed when the server starts."""

import glob
import json
import os
import sqlite3
import subprocess

from conftest import BACKEND, User
from receiver import Receiver, sign


def key():
    return os.urandom(8).hex()


def without_secret(body, member):
    return {k: v for k, v in body.items() if k not in (member, "redacted")}


def assert_redacted(replay, first, member):
    """The replay is the first answer with `member` redacted, and says how to rotate it."""
    assert replay.status == 201 and replay.header("Idempotent-Replayed") == "true", replay
    assert replay.header("Location") == first.header("Location")
    assert replay.json[member] is None
    assert replay.json["redacted"]["member"] == member
    assert replay.json["redacted"]["code"] == "secret_shown_once"
    assert "rotate" in replay.json["redacted"]["detail"] or "revoke" in \
        replay.json["redacted"]["detail"]
    assert without_secret(replay.json, member) == without_secret(first.json, member)
    # the members keep their order: only the secret's place changed
    assert list(replay.json)[:len(first.json) - 1] == list(first.json)[:-1]


def database_text(server):
    """Every value of every table of the server's database, as one text: SQLite read with
    python's sqlite3 (and the raw bytes of the file and its WAL besides), PostgreSQL with
    pg_dump."""
    if BACKEND == "postgres":
        import pg
        out = subprocess.run([f"{pg.cluster().bindir}/pg_dump", "--data-only",
                              pg.cluster().url(server.pg_database)],
                             capture_output=True, text=True, check=True)
        return out.stdout
    parts = []
    with sqlite3.connect(server.db) as c:
        tables = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in c.execute(f"SELECT * FROM {table}"):
                parts.extend(str(v) for v in row)
    for path in glob.glob(server.db + "*"):
        with open(path, "rb") as f:
            parts.append(f.read().decode("latin-1"))
    return "\n".join(parts)


def test_a_replayed_endpoint_create_shows_the_secret_redacted(server):
    u = server.create_user("hooks-replay")
    k = key()
    body = {"url": "http://127.0.0.1:9/hooks", "events": ["*"], "description": "replayed"}
    first = u.post("/v1/webhook_endpoints", body, idem=k)
    assert first.status == 201 and first.json["secret"].startswith("whsec_"), first
    again = u.post("/v1/webhook_endpoints", body, idem=k)
    assert_redacted(again, first, "secret")
    # every later replay (from the database or from memory) is byte for byte the same
    assert u.post("/v1/webhook_endpoints", body, idem=k).raw == again.raw
    assert u.get("/v1/webhook_endpoints").json["data"] == [without_secret(first.json, "secret")]


def test_two_sends_with_one_key_make_one_api_key(server):
    u = server.create_user("keys-replay")
    before = len(u.get("/v1/api_keys").json["data"])
    k = key()
    first = u.post("/v1/api_keys", {"name": "deploy"}, idem=k)
    assert first.status == 201 and first.json["api_key"].startswith("sk_"), first
    assert first.header("Cache-Control") == "no-store"
    again = u.post("/v1/api_keys", {"name": "deploy"}, idem=k)
    assert_redacted(again, first, "api_key")
    keys = u.get("/v1/api_keys").json["data"]
    assert len(keys) == before + 1
    # the key shown the first time is the one that was made, and it works
    made = User(server, u.id, first.json["api_key"])
    assert made.get("/v1/api_keys").status == 200
    # the same key with another body is a misuse, as on every other route
    other = u.post("/v1/api_keys", {"name": "other"}, idem=k)
    assert other.status == 422 and other.json["code"] == "idempotency_key_reused", other
    # without a key each send makes a key
    assert u.post("/v1/api_keys", {"name": "a"}).status == 201
    assert len(u.get("/v1/api_keys").json["data"]) == before + 2


def test_no_secret_in_the_clear_in_any_table(server):
    u = server.create_user("at-rest")
    k1, k2 = key(), key()
    endpoint = u.post("/v1/webhook_endpoints",
                      {"url": "http://127.0.0.1:9/at-rest", "events": ["*"]}, idem=k1)
    plain_endpoint = u.post("/v1/webhook_endpoints",
                            {"url": "http://127.0.0.1:9/no-key", "events": ["*"]})
    api_key = u.post("/v1/api_keys", {"name": "at rest"}, idem=k2)
    assert endpoint.status == plain_endpoint.status == api_key.status == 201
    assert u.post("/v1/api_keys", {"name": "at rest"}, idem=k2).status == 201  # replayed
    secrets = [endpoint.json["secret"], plain_endpoint.json["secret"], api_key.json["api_key"]]
    stored = server.sql("SELECT secret FROM webhook_endpoints WHERE url = "
                        "'http://127.0.0.1:9/at-rest'")
    assert stored.startswith("sealed:v1:"), stored
    text = database_text(server)
    assert "at-rest" in text and u.key[:11] in text  # the read sees the rows
    for secret in secrets:
        assert secret not in text
        assert secret[-16:] not in text
    assert "whsec_" not in text


def test_deliveries_sign_with_the_secret_shown_at_creation(server):
    u = server.create_user("sealed-signs")
    rx = Receiver()
    try:
        made = u.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["account.created"]},
                      idem=key())
        assert made.status == 201, made
        u.create_account()
        assert rx.wait_for(lambda r: len(r.requests) >= 1)
        req = rx.requests[0]
        t = int(req["signature"].split(",")[0][2:])
        assert req["signature"] == sign(made.json["secret"], t, req["body"])
    finally:
        rx.close()


def test_secrets_stored_in_the_clear_are_sealed_at_start(fresh_server):
    """A database written before secrets were sealed: the endpoint's row holds its secret and
    the key's answer shows it. The next start seals the one and redacts the other; deliveries
    sign with the same secret as before."""
    s = fresh_server()
    u = s.create_user()
    rx = Receiver()
    try:
        k = key()
        body = {"url": rx.url, "events": ["account.created"]}
        made = u.post("/v1/webhook_endpoints", body, idem=k)
        assert made.status == 201, made
        old_secret = "whsec_" + "ab" * 24
        old_answer = made.raw.decode().replace(made.json["secret"], old_secret)
        s.stop()
        # as the previous release left them
        quoted = old_answer.replace("'", "''")
        s.execute(f"UPDATE webhook_endpoints SET secret = '{old_secret}'",
                  f"UPDATE idempotency_keys SET response_body = '{quoted}' "
                  f"WHERE idem_key = '{k}'")
        assert old_secret in database_text(s)
        s.start()
        assert s.sql("SELECT secret FROM webhook_endpoints").startswith("sealed:v1:")
        assert old_secret not in database_text(s)
        again = u.post("/v1/webhook_endpoints", body, idem=k)
        assert_redacted(again, made, "secret")
        u.create_account()
        assert rx.wait_for(lambda r: len(r.requests) >= 1)
        req = rx.requests[0]
        t = int(req["signature"].split(",")[0][2:])
        assert req["signature"] == sign(old_secret, t, req["body"])
    finally:
        rx.close()
