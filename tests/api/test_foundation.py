"""The HTTP layer, auth, accounts and the operational routes (§1, §3, §12)."""

import json
import socket
import subprocess

from conftest import PAYD


def problem(r, status, code):
    assert r.status == status, r
    assert r.header("content-type") == "application/problem+json", r.headers
    body = r.json
    assert body["code"] == code, body
    assert body["status"] == status
    assert body["type"] == "about:blank" and body["title"] and body["detail"]
    assert body["request_id"] == r.header("x-request-id")
    return body


def test_healthz_and_readyz(server):
    assert server.request("GET", "/healthz").json == {"status": "ok"}
    assert server.request("GET", "/readyz").status == 200


def test_missing_or_wrong_key_is_401_with_www_authenticate(server):
    r = server.request("GET", "/v1/accounts")
    problem(r, 401, "unauthorized")
    assert r.header("www-authenticate").startswith("Bearer")
    r = server.request("GET", "/v1/accounts", key="sk_not_a_real_key_at_all")
    problem(r, 401, "unauthorized")
    assert r.header("www-authenticate").startswith("Bearer")


def test_unknown_route_and_wrong_method(alice):
    problem(alice.get("/v1/nothing"), 404, "route_not_found")
    r = alice.request("DELETE", "/v1/accounts")
    problem(r, 405, "method_not_allowed")
    assert set(m.strip() for m in r.header("allow").split(",")) == {"GET", "HEAD", "POST"}


def test_body_too_large_is_413(alice):
    big = b'{"currency": "USD", "name": "' + b"x" * (70 * 1024) + b'"}'
    r = alice.request("POST", "/v1/accounts", raw_body=big,
                      headers={"Content-Type": "application/json"})
    problem(r, 413, "payload_too_large")


def test_non_json_body_is_415(alice):
    r = alice.request("POST", "/v1/accounts", raw_body=b"currency=USD",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    problem(r, 415, "unsupported_media_type")


def test_malformed_json_is_400_invalid_json(alice):
    for raw in (b'{"currency": "USD"', b"[1, 2]", b"nul", b'{"a": 1, "a": 2}'):
        r = alice.request("POST", "/v1/accounts", raw_body=raw,
                          headers={"Content-Type": "application/json"})
        problem(r, 400, "invalid_json")


def test_parameter_errors_name_the_param(alice):
    body = problem(alice.post("/v1/accounts", {"currency": "USD", "colour": "red"}), 400,
                   "unknown_parameter")
    assert body["param"] == "colour"
    assert problem(alice.post("/v1/accounts", {"name": "x"}), 400,
                   "missing_parameter")["param"] == "currency"
    assert problem(alice.post("/v1/accounts", {"currency": 42}), 400,
                   "invalid_parameter")["param"] == "currency"
    assert problem(alice.post("/v1/accounts", {"currency": "US1"}), 400,
                   "invalid_parameter")["param"] == "currency"
    assert problem(alice.post("/v1/accounts", {"currency": "USD", "name": "n" * 101}), 400,
                   "invalid_parameter")["param"] == "name"


def test_account_create_and_get_with_etag(alice):
    r = alice.post("/v1/accounts", {"currency": "eur", "name": "Main"})
    assert r.status == 201, r
    acct = r.json
    assert acct["id"].startswith("acct_") and len(acct["id"]) == 18
    assert acct["currency"] == "EUR" and acct["balance"] == 0 and acct["version"] == 1
    assert acct["object"] == "account" and acct["name"] == "Main"
    assert acct["created_at"].endswith("Z") and len(acct["created_at"]) == 24
    assert r.header("location") == "/v1/accounts/" + acct["id"]
    g = alice.get("/v1/accounts/" + acct["id"])
    assert g.status == 200 and g.json == acct
    assert g.header("etag") == '"v1"'
    nm = alice.get("/v1/accounts/" + acct["id"], headers={"If-None-Match": '"v1"'})
    assert nm.status == 304 and nm.raw == b"" and nm.header("etag") == '"v1"'


def test_another_users_account_is_404(alice, bob):
    acct = alice.create_account()
    problem(bob.get("/v1/accounts/" + acct["id"]), 404, "resource_missing")
    problem(bob.get("/v1/accounts/acct_zzzzzzzzzzzzz"), 404, "resource_missing")
    problem(bob.get("/v1/accounts/not-an-id"), 404, "resource_missing")


def test_request_id_echoed_or_generated(alice):
    r = alice.get("/v1/accounts", headers={"X-Request-Id": "trace-123"})
    assert r.header("x-request-id") == "trace-123"
    r = alice.get("/v1/accounts")
    assert r.header("x-request-id").startswith("req_")
    r = alice.get("/v1/accounts", headers={"X-Request-Id": "x" * 129})
    assert r.header("x-request-id") != "x" * 129
    r = alice.get("/nowhere", headers={"X-Request-Id": "abc"})
    assert r.json["request_id"] == "abc"


def test_api_key_never_in_the_log(server, alice):
    alice.get("/v1/accounts")
    alice.create_account()
    server.request("GET", "/v1/accounts", key=alice.key + "x")
    log = server.read_log()
    assert alice.key not in log
    lines = [json.loads(l) for l in log.splitlines() if '"route"' in l]
    assert lines, log[-500:]
    for line in lines:
        assert {"time", "request_id", "method", "route", "status", "duration_ms", "user_id"} <= set(line)
    assert any(l["route"] == "/v1/accounts/{id}" or l["route"] == "/v1/accounts" for l in lines)


def test_openapi_document_is_served(server):
    r = server.request("GET", "/openapi.json")
    assert r.status == 200
    doc = r.json
    assert doc["openapi"].startswith("3.1")


def test_id_decode_command():
    out = subprocess.run([PAYD, "id", "decode", "pay_03b42q5kg0000"], capture_output=True,
                         text=True, check=True)
    d = json.loads(out.stdout)
    assert d["id"] == "pay_03b42q5kg0000"
    assert d["timestamp"].startswith("2026-")
    assert 0 <= d["node_id"] <= 1023 and 0 <= d["sequence"] <= 4095
    bad = subprocess.run([PAYD, "id", "decode", "pay_NOPE"], capture_output=True, text=True)
    assert bad.returncode != 0


def test_serve_help_lists_flags():
    out = subprocess.run([PAYD, "serve", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for flag in ("--listen", "--db", "--node-id", "--processor", "--rate-limit", "--rate-burst",
                 "--idempotency-ttl", "--idempotency-lock-timeout", "--max-queue",
                 "--shutdown-timeout", "PAYD_DB"):
        assert flag in out.stdout, flag


def test_bad_flag_values_are_refused(tmp_path):
    for args in (["--idempotency-ttl", "24"], ["--rate-limit", "fast"], ["--node-id", "2000"],
                 ["--listen", "nonsense"], ["--listen", "127.0.0.1:99999"], ["--listen", "::1:80"]):
        out = subprocess.run([PAYD, "serve", "--db", str(tmp_path / "x.db"), *args],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 2, (args, out.stderr)
        assert args[0] in out.stderr


def test_listen_address_usage_error_and_port_in_use(tmp_path):
    """A malformed --listen is a usage error (2), for serve and processor-sim alike; a well-formed
    address that cannot be bound is a failure (1)."""
    for cmd in ("serve", "processor-sim"):
        out = subprocess.run([PAYD, cmd, "--db", str(tmp_path / f"{cmd}.db"), "--listen", "x"],
                             capture_output=True, text=True, timeout=10)
        assert out.returncode == 2, (cmd, out.stderr)
        assert "--listen" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for cmd in ("serve", "processor-sim"):
            out = subprocess.run([PAYD, cmd, "--db", str(tmp_path / f"{cmd}.db"), "--listen",
                                  f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=10)
            assert out.returncode == 1, (cmd, out.stderr)
            assert "cannot listen" in out.stderr
