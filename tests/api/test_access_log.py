"""The access log and the log level (docs/api.md §12, docs/operations.md): every request line
names the client, the user agent, the bytes in and out, the problem code of a 4xx or 5xx and the
idempotency outcome; `X-Forwarded-For` is believed only from a proxy `--trust-proxy` names; no
line ever holds an API key or a webhook secret; `--log-level` drops the lines below it; a
refusal to start is one JSON line."""

import concurrent.futures
import json
import os
import subprocess
import time

import pytest

from conftest import PAYD, Payd, free_port


@pytest.fixture
def servers(tmp_path):
    """Servers with a directory, database and log each, so one's lines are never another's."""
    made = []

    def start(name, args=(), env=None):
        directory = tmp_path / name
        directory.mkdir()
        made.append(Payd(str(directory), args=args, env=env).start())
        return made[-1]

    yield start
    for s in made:
        s.stop()


def log_lines(server):
    return [json.loads(l) for l in server.read_log().splitlines() if l.strip()]


def request_lines(server, expected=1, timeout=5):
    """The access-log lines, once at least `expected` are written (the log's thread writes
    them a few milliseconds after each request ends)."""
    deadline = time.time() + timeout
    while True:
        lines = [l for l in log_lines(server) if l.get("msg") == "request"]
        if len(lines) >= expected or time.time() > deadline:
            return lines
        time.sleep(0.05)


def line_of(server, request_id):
    for _ in range(100):
        found = [l for l in request_lines(server) if l.get("request_id") == request_id]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no access-log line for {request_id}")


def payment_body(account, source="tok_visa"):
    return {"account_id": account["id"], "amount": 1000, "currency": "USD", "source": source}


def tagged(request_id, extra=None):
    return dict(extra or {}, **{"X-Request-Id": request_id})


def test_every_line_carries_the_new_fields(servers):
    s = servers("fields")
    user = s.create_user("logged")
    account = user.create_account()
    agent = 'curl/8.0 "quoted" \\back' + "x" * 400
    made = user.post("/v1/payments", payment_body(account), idem="log-key-1",
                     headers=tagged("req_log_new", {"User-Agent": agent}))
    assert made.status == 201, made
    again = user.post("/v1/payments", payment_body(account), idem="log-key-1",
                      headers=tagged("req_log_replayed"))
    assert again.status == 201 and again.header("idempotent-replayed") == "true"
    reused = user.post("/v1/payments", dict(payment_body(account), amount=5), idem="log-key-1",
                       headers=tagged("req_log_reused"))
    assert reused.status == 422 and reused.json["code"] == "idempotency_key_reused"
    declined = user.post("/v1/payments", payment_body(account, "tok_chargeDeclined"),
                         idem="log-key-2", headers=tagged("req_log_declined"))
    assert declined.status == 402, declined
    declined_again = user.post("/v1/payments", payment_body(account, "tok_chargeDeclined"),
                               idem="log-key-2", headers=tagged("req_log_declined_again"))
    assert declined_again.status == 402 and declined_again.header("idempotent-replayed")
    missing = user.get("/v1/payments/pay_0000000000000", headers=tagged("req_log_missing"))
    assert missing.status == 404
    anonymous = s.request("GET", "/v1/accounts", headers=tagged("req_log_anonymous"))
    assert anonymous.status == 401
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(user.post, "/v1/payments", payment_body(account, "tok_slow"),
                           "log-key-3")
        time.sleep(0.5)
        busy = user.post("/v1/payments", payment_body(account, "tok_slow"), idem="log-key-3",
                         headers=tagged("req_log_in_flight"))
        assert busy.status == 409 and busy.json["code"] == "request_in_progress"
        assert slow.result().status == 201

    first = line_of(s, "req_log_new")
    assert first["client_ip"] == "127.0.0.1" and "forwarded_for" not in first
    assert first["user_agent"] == agent[:200]  # cut to a bound, every byte escaped
    body = json.dumps(payment_body(account)).encode()
    assert first["bytes_in"] == len(body) and first["bytes_out"] == len(made.raw)
    assert first["code"] is None and first["idempotency"] == "new"
    assert first["user_id"] == user.id and first["status"] == 201

    expected = {"req_log_replayed": (201, None, "replayed"),
                "req_log_reused": (422, "idempotency_key_reused", "reused"),
                "req_log_declined": (402, "card_declined", "new"),
                "req_log_declined_again": (402, "card_declined", "replayed"),
                "req_log_in_flight": (409, "request_in_progress", "in_flight"),
                "req_log_missing": (404, "resource_missing", None),
                "req_log_anonymous": (401, "unauthorized", None)}
    for request_id, (status, code, outcome) in expected.items():
        line = line_of(s, request_id)
        assert (line["status"], line["code"], line.get("idempotency")) == \
            (status, code, outcome), line
        assert line["user_agent"] is None  # http.client sends none
    assert line_of(s, "req_log_missing")["bytes_out"] == len(missing.raw)
    for line in request_lines(s):
        for field in ("client_ip", "user_agent", "bytes_in", "bytes_out", "code", "status",
                      "route", "method", "duration_ms", "user_id", "request_id"):
            assert field in line, (field, line)
        assert (line["code"] is not None) == (line["status"] >= 400), line
        assert line.get("idempotency") in (None, "new", "replayed", "in_flight", "reused")


def test_no_line_holds_an_api_key_or_a_webhook_secret(servers):
    s = servers("secrets")
    user = s.create_user("secretive")
    key = user.key
    made = user.post("/v1/api_keys", {"name": "second"}, idem="key-made")
    assert made.status == 201, made
    second_key = made.json["api_key"]
    endpoint = user.post("/v1/webhook_endpoints",
                         {"url": "http://127.0.0.1:9/hooks", "events": ["*"],
                          "description": f"holds {key}"}, idem="endpoint-made")
    assert endpoint.status == 201, endpoint
    first_secret = endpoint.json["secret"]
    rotated = user.post(f"/v1/webhook_endpoints/{endpoint.json['id']}/rotate_secret",
                        {"expire_previous_in": 0}, idem="rotated")
    assert rotated.status == 200, rotated
    second_secret = rotated.json["secret"]
    # the secrets, carried everywhere a client might put them
    for secret in (key, second_key, first_secret, second_secret):
        user.get(f"/v1/accounts?api_key={secret}")
        user.get(f"/v1/payments/{secret}")
        user.get("/v1/accounts", headers={"X-Api-Key": secret, "Cookie": f"session={secret}"})
        user.post("/v1/accounts", {"currency": "USD", "name": secret}, idem=f"k-{secret[:8]}")
        s.request("GET", "/v1/accounts", key=secret + "x")  # a wrong key is not logged either
        s.request("POST", "/v1/accounts", key=secret, body={"secret": secret})
    user.post("/v1/api_keys", {"name": "second"}, idem="key-made")  # replays, redacted
    s.stop()
    text = s.read_log()
    assert len([l for l in log_lines(s) if l.get("msg") == "request"]) >= 28
    for secret in (key, second_key, first_secret, second_secret):
        assert secret not in text
        assert secret[3:20] not in text  # nor a piece of one


def test_forwarded_for_is_believed_only_from_a_trusted_proxy(servers):
    plain = servers("plain")
    plain.request("GET", "/healthz", headers=tagged("req_untrusted",
                                                     {"X-Forwarded-For": "127.0.0.9"}))
    line = line_of(plain, "req_untrusted")
    assert line["client_ip"] == "127.0.0.1" and "forwarded_for" not in line

    for n, trusted in enumerate(["127.0.0.1", "127.0.0.0/8", "10.0.0.0/8, 127.0.0.1/32",
                                 "::ffff:127.0.0.0/104"]):
        s = servers(f"trusted{n}", ["--trust-proxy", trusted])
        s.request("GET", "/healthz", headers=tagged("req_trusted",
                                                     {"X-Forwarded-For": "127.0.0.8, 127.0.0.9"}))
        line = line_of(s, "req_trusted")
        # the last address is the one the proxy appended; those before it are the client's word
        assert line["client_ip"] == "127.0.0.1" and line["forwarded_for"] == "127.0.0.9", line
        s.request("GET", "/healthz", headers=tagged("req_no_header"))
        assert "forwarded_for" not in line_of(s, "req_no_header")

    other = servers("other", ["--trust-proxy", "10.0.0.0/8,::1"])  # names a proxy that is not this peer
    other.request("GET", "/healthz", headers=tagged("req_other", {"X-Forwarded-For": "127.0.0.9"}))
    assert "forwarded_for" not in line_of(other, "req_other")


def refusal(*args, env=None):
    out = subprocess.run([PAYD, "serve", *args], capture_output=True, text=True, timeout=30,
                         env=dict(os.environ, **(env or {})))
    return out.returncode, out.stderr


def test_a_bad_trust_proxy_is_refused():
    for bad in ("127.0.0.1/33", "10.0.0.0/", "fd00::/129", "proxy.example", "127.0.0.1/x"):
        code, err = refusal("--trust-proxy", bad, "--listen", "127.0.0.1:0")
        assert code == 2 and "--trust-proxy" in err, (bad, err)


def test_log_level_filters(servers):
    s = servers("warn", ["--log-level", "warn"])
    user = s.create_user("quiet")
    user.get("/v1/accounts")
    s.request("GET", "/v1/accounts")
    s.stop()
    levels = {l["level"] for l in log_lines(s)}
    assert levels <= {"warn", "error"}, levels
    assert not [l for l in log_lines(s) if l.get("msg") in ("payd serving", "request")]

    loud = servers("debug", ["--log-level", "debug"])
    loud.request("GET", "/healthz")
    loud.stop()
    messages = [l.get("msg") for l in log_lines(loud)]
    assert "payd serving" in messages and "request" in messages

    errors_only = servers("error", env={"PAYD_LOG_LEVEL": "error"})
    errors_only.request("GET", "/nothing/here")
    errors_only.stop()
    assert {l["level"] for l in log_lines(errors_only)} <= {"error"}

    code, err = refusal("--log-level", "loud")
    assert code == 2 and "--log-level" in err


def test_a_refusal_to_start_is_one_json_line(servers, tmp_path):
    def one_line(code, err, expected_code, words):
        lines = err.splitlines()
        assert code == expected_code and len(lines) == 1, (code, err)
        line = json.loads(lines[0])
        assert line["level"] == "error" and line["msg"] == "payd cannot start", line
        assert words in line["error"], line
        assert "time" in line

    one_line(*refusal("--no-such-flag"), 2, "--no-such-flag")
    one_line(*refusal("--listen", "127.0.0.1:0", "--rate-limit", "fast"), 2, "--rate-limit")
    one_line(*refusal("--listen", "127.0.0.1:0", "--db", str(tmp_path / "no/such/dir/x.db")), 1,
             "")
    running = servers("running")
    one_line(*refusal("--listen", f"127.0.0.1:{running.port}", "--db",
                      str(tmp_path / "second.db")), 1, "Address already in use")
    port = free_port()
    one_line(*refusal("--listen", f"127.0.0.1:{port}", "--db", str(tmp_path / "third.db"),
                      env={"PAYD_IDEMPOTENCY_TTL": "forever"}), 2, "PAYD_IDEMPOTENCY_TTL")
