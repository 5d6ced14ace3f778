"""The HTTP edge under hostile clients (§1 query parameters, headers, framing, HEAD, errors; §12
logs and metrics; §13 --listen and --db). One test per finding of the hostile test; raw sockets
wherever http.client would refuse to send the request."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest

from conftest import PAYD, Payd, free_port


def connect(server, timeout=10):
    s = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_all(s, limit=10):
    """Everything the server sends until it closes (or `limit` seconds pass)."""
    s.settimeout(limit)
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def exchange(server, data, limit=10):
    with connect(server) as s:
        s.sendall(data)
        return read_all(s, limit)


def parse(raw):
    """The first response in raw: (status, {lower-case header: value}, body)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", len(rest)))
    return status, headers, rest[:length]


def problem_of(raw, status, code):
    st, headers, body = parse(raw)
    assert st == status, raw[:500]
    assert headers["content-type"].startswith("application/problem+json"), raw[:500]
    p = json.loads(body)
    assert p["code"] == code and p["status"] == status, p
    return p


def request_bytes(method, path, headers=(), body=b"", close=True):
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: payd"]
    lines += [h if isinstance(h, bytes) else h.encode() for h in headers]
    if close:
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def log_lines(server):
    return [json.loads(l) for l in server.read_log().splitlines() if l.startswith("{")]


def payment_json(acct, amount=1000):
    return json.dumps({"account_id": acct["id"], "amount": amount, "currency": "USD",
                       "source": "tok_visa"}).encode()


# 1. Slow bodies: a deadline for the body, 408, and a fast 503 past --max-connections.

def test_slow_body_gets_408_and_others_are_served(fresh_server):
    s = fresh_server(["--body-timeout", "1s", "--max-connections", "20"])
    slow = []
    for _ in range(10):
        c = connect(s)
        c.sendall(b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{")
        slow.append(c)
    # while they trickle, a normal client is answered
    assert s.request("GET", "/healthz").status == 200
    started = time.time()
    for c in slow:
        c.sendall(b" ")  # a byte now and then must not reset the deadline
    for c in slow:
        raw = read_all(c, 10)
        p = problem_of(raw, 408, "request_timeout")
        assert p["request_id"]
        assert b"connection: close" in raw.lower()
        c.close()
    assert time.time() - started < 8  # cut at the deadline, not left to the idle timeout
    deadline = time.time() + 5
    while time.time() < deadline:
        timed_out = [l for l in log_lines(s) if l.get("msg") == "request" and l["status"] == 408]
        if len(timed_out) == 10:
            break
        time.sleep(0.1)
    assert len(timed_out) == 10


def test_past_max_connections_is_answered_503_at_once(fresh_server):
    s = fresh_server(["--max-connections", "5", "--header-timeout", "5s"])
    held = [connect(s) for _ in range(5)]
    time.sleep(0.2)
    started = time.time()
    raw = exchange(s, request_bytes("GET", "/healthz"), limit=5)
    p = problem_of(raw, 503, "overloaded")
    assert parse(raw)[1].get("retry-after")
    assert time.time() - started < 3
    for c in held:
        c.close()
    time.sleep(0.3)
    assert s.request("GET", "/healthz").status == 200
    assert p["request_id"]


def test_content_length_larger_than_body_is_408(fresh_server):
    s = fresh_server(["--body-timeout", "1s"])
    raw = exchange(s, b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}",
                   limit=10)
    problem_of(raw, 408, "request_timeout")


def test_request_deadline_covers_headers_and_body(fresh_server):
    s = fresh_server(["--body-timeout", "30s", "--request-timeout", "1s"])
    with connect(s) as c:
        c.sendall(b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{")
        problem_of(read_all(c, 10), 408, "request_timeout")


# 2. NUL and control bytes in header values.

def test_idempotency_key_with_nul_is_refused_not_cut(server, alice):
    acct = alice.create_account()
    auth = f"Authorization: Bearer {alice.key}"
    answers = []
    for suffix in (b"a", b"b"):
        raw = exchange(server, request_bytes(
            "POST", "/v1/payments",
            [auth, "Content-Type: application/json", b"Idempotency-Key: order-1\x00" + suffix,
             f"Content-Length: {len(payment_json(acct))}"], payment_json(acct)))
        answers.append(raw)
    for raw in answers:
        p = problem_of(raw, 400, "invalid_header")
        assert p["param"] == "Idempotency-Key"
        assert b"idempotent-replayed" not in raw.lower()
    assert alice.get(f"/v1/accounts/{acct['id']}/payments").json["data"] == []


@pytest.mark.parametrize("header", [b"X-Trace: a\x00b", b"User-Agent: a\x01b",
                                    b"Authorization: Bearer k\x7f"], ids=["nul", "soh", "del"])
def test_control_bytes_in_any_header_value(server, header):
    raw = exchange(server, request_bytes("GET", "/v1/accounts", [header]))
    p = problem_of(raw, 400, "invalid_header")
    assert p["param"] == header.split(b":")[0].decode()


# 3. Singleton headers and query parameters at most once.

@pytest.mark.parametrize("name", ["Idempotency-Key", "Authorization", "If-Match", "If-None-Match",
                                  "Content-Type", "Content-Length"])
def test_singleton_header_twice(server, alice, name):
    base = {"Authorization": f"Bearer {alice.key}", "Content-Type": "application/json",
            "Content-Length": "2"}
    headers = [f"{k}: {v}" for k, v in base.items()]
    # a second copy: the same value where a different one would change the framing
    headers.append(f"{name}: {base[name] if name in base else 'v1'}")
    if name not in base:
        headers.append(f"{name}: v2")
    raw = exchange(server, request_bytes("POST", "/v1/accounts", headers, b"{}"))
    p = problem_of(raw, 400, "invalid_header")
    assert p["param"] == name, p


def test_two_authorization_headers_do_not_pick_one(server, alice, bob):
    raw = exchange(server, request_bytes("GET", "/v1/users/me", [
        f"Authorization: Bearer {alice.key}", f"Authorization: Bearer {bob.key}"]))
    assert problem_of(raw, 400, "invalid_header")["param"] == "Authorization"


@pytest.mark.parametrize("query,code", [("limit=5&limit=500", "invalid_parameter"),
                                        ("limit=5%00", "invalid_parameter"),
                                        ("cursor=a%0Ab", "invalid_parameter")])
def test_query_repeated_or_with_control_bytes(alice, query, code):
    r = alice.get("/v1/accounts?" + query)
    assert r.status == 400 and r.json["code"] == code, r
    assert r.json["param"] in ("limit", "cursor")


# 4. Hostile methods: the log and /metrics stay valid, and no client adds series.

def test_hostile_methods_keep_metrics_valid_and_log_lines_whole(fresh_server):
    s = fresh_server()
    user = s.create_user()
    acct = user.create_account()
    methods = [b'A"B', b"X\\Y", b'G{"level":"x"}', b"\xff\xfe", b"M" * 2000]
    methods += [b"Q%d" % i for i in range(600)]
    for m in methods:
        exchange(s, m + b" /v1/payments HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert user.pay(acct).status == 201
    # a request is counted when it completes, just after its answer is sent
    deadline = time.time() + 5
    while True:
        text = s.request("GET", "/metrics").raw.decode()
        if 'route="/v1/payments",method="POST",code="201"} 1' in text or time.time() > deadline:
            break
        time.sleep(0.05)
    assert 'route="/v1/payments",method="POST",code="201"} 1' in text, text[:2000]
    series = [l for l in text.splitlines() if l.startswith("payd_http_requests_total{")]
    assert {l.split('method="')[1].split('"')[0] for l in series} <= \
        {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
    # promtool comes from Debian's prometheus package (scripts/install-deps.sh test)
    assert shutil.which("promtool"), "promtool is missing: scripts/install-deps.sh test"
    check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    lines = [l for l in log_lines(s) if l.get("msg") == "request"]
    logged = {l["method"] for l in lines}
    assert 'A"B' in logged and "X\\Y" in logged and "M" * 2000 in logged
    assert not any(l.get("level") == "x" for l in lines)  # nothing injected a field
    # every line of this payd's log is checked as JSON when the fixture stops it


# 5. Transfer-Encoding together with Content-Length.

def test_transfer_encoding_with_content_length_is_refused_and_closed(server):
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    raw = exchange(server, b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\n"
                   b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n" + smuggled)
    problem_of(raw, 400, "bad_framing")
    assert raw.count(b"HTTP/1.1 ") == 1, raw  # the bytes after it were not served
    assert b"connection: close" in raw.lower()


# 6. Many query parameters get an answer.

def test_500_query_parameters_are_answered(server):
    query = "&".join(f"p{i}=1" for i in range(500))
    started = time.time()
    raw = exchange(server, request_bytes("GET", "/v1/accounts?" + query), limit=5)
    assert raw, "no answer"
    st, _, _ = parse(raw)
    assert st in (400, 414)
    assert time.time() - started < 4


# 7. Errors at the framing level, HEAD, Expect.

def test_library_errors_are_logged_with_their_status(fresh_server):
    s = fresh_server()
    raw = exchange(s, b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 400")
    raw = exchange(s, b"GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n")
    assert raw.startswith(b"HTTP/1.1 505")
    raw = exchange(s, b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                   b"\r\nzz\r\n")
    assert raw.startswith(b"HTTP/1.1 400")
    s.stop()
    lines = log_lines(s)
    statuses = [l["status"] for l in lines if l.get("msg") == "request"]
    assert statuses.count(400) == 2, statuses  # those that had a request line: access lines
    assert 0 not in statuses and None not in statuses, statuses
    refused = [l["status"] for l in lines if l.get("msg") == "refused by the HTTP library"]
    assert sorted(refused) == [400, 400, 505], lines  # and every refusal, with its status


@pytest.mark.parametrize("request_line,extra,status,code", [
    (b"GET /" + b"a" * 12000 + b" HTTP/1.1", b"", 414, "uri_too_long"),
    (b"GET /healthz HTTP/1.1", b"X-Big: " + b"a" * 12000 + b"\r\n", 431, "headers_too_large")],
    ids=["uri", "headers"])
def test_too_long_uri_and_headers_are_problem_json(server, request_line, extra, status, code):
    raw = exchange(server, request_line + b"\r\nHost: x\r\n" + extra + b"\r\n")
    problem_of(raw, status, code)


@pytest.mark.xfail(reason="libmicrohttpd 0.9.75 writes its own status line and headers twice for "
                          "a malformed Content-Length; see docs/architecture.md", strict=True)
def test_negative_content_length_gets_one_status_line(server):
    raw = exchange(server, b"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n")
    assert raw.count(b"HTTP/1.1 400") == 1, raw


@pytest.mark.parametrize("path", ["/healthz", "/v1/accounts", "/v1/users/me", "/openapi.json"])
def test_head_answers_like_get_without_body(server, alice, path):
    auth = [f"Authorization: Bearer {alice.key}"]
    got = parse(exchange(server, request_bytes("GET", path, auth)))
    raw = exchange(server, request_bytes("HEAD", path, auth))
    head_status, head_headers, _ = parse(raw)
    assert head_status == got[0] == 200
    assert raw.endswith(b"\r\n\r\n"), raw[-200:]  # no body at all
    for name in ("content-type", "content-length", "etag"):
        assert head_headers.get(name) == got[1].get(name), (name, head_headers, got[1])


def test_expect_continue_only_after_auth(server, alice):
    with connect(server) as c:
        c.sendall(request_bytes("POST", "/v1/accounts",
                                ["Expect: 100-continue", "Content-Type: application/json",
                                 "Content-Length: 2"]))
        raw = read_all(c, 5)
    assert b"100 Continue" not in raw
    problem_of(raw, 401, "unauthorized")
    body = b'{"currency":"USD"}'
    with connect(server) as c:
        c.sendall(request_bytes("POST", "/v1/accounts",
                                ["Expect: 100-continue", "Content-Type: application/json",
                                 f"Authorization: Bearer {alice.key}",
                                 f"Content-Length: {len(body)}"]))
        c.settimeout(5)
        first = c.recv(4096)
        assert first.startswith(b"HTTP/1.1 100"), first
        c.sendall(body)
        raw = read_all(c, 5)
    assert parse(raw[raw.index(b"HTTP/1.1 2"):] if b"HTTP/1.1 2" in raw else raw)[0] == 201, raw


# 8. One process per port.

def test_second_payd_on_the_same_port_is_refused(server, tmp_path):
    out = subprocess.run([PAYD, "serve", "--listen", f"127.0.0.1:{server.port}", "--db",
                          str(tmp_path / "second.db")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "Address already in use" in out.stderr, out.stderr


def test_port_held_by_another_program_names_the_reason(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        out = subprocess.run([PAYD, "serve", "--listen", f"127.0.0.1:{port}", "--db",
                              str(tmp_path / "x.db")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "Address already in use" in out.stderr, out.stderr


# 9. Failures are logged with the request id.

def test_processor_failure_is_logged_with_the_request_id(server, alice):
    acct = alice.create_account()
    r = alice.post("/v1/payments", {"account_id": acct["id"], "amount": 1000, "currency": "USD",
                                    "source": "tok_processorDown"}, idem=os.urandom(8).hex())
    assert r.status == 503
    rid = r.header("x-request-id")
    failures = [l for l in log_lines(server) if l.get("request_id") == rid and l["level"] == "error"]
    assert failures and failures[0]["code"] == "processor_unavailable", failures
    assert all("time" in l for l in failures)


def test_http_processor_down_is_logged_with_the_request_id(fresh_server):
    dead = free_port()
    s = fresh_server(["--live-test-tokens", "true", "--processor", f"http://127.0.0.1:{dead}", "--processor-timeout", "500ms"])
    user = s.create_user()
    acct = user.create_account()
    r = user.pay(acct)
    assert r.status == 503
    rid = r.header("x-request-id")
    lines = [l for l in log_lines(s) if l.get("request_id") == rid]
    assert any(l["msg"] == "processor call failed" and l["error"] for l in lines), lines
    assert any(l["msg"] == "request failed" for l in lines), lines


def test_access_and_startup_lines_have_level_and_time(server, alice):
    alice.get("/v1/accounts")
    lines = log_lines(server)
    # the startup line is written once the socket listens, so a first request may be logged
    # just before it; what matters is that it is there, with time and level like the rest
    assert [l["msg"] for l in lines].count("payd serving") == 1, lines[:5]
    for l in lines:
        assert l["level"] and l["time"].endswith("Z"), l


def test_recovered_key_is_logged_with_user_key_hash_and_outcome(fresh_server):
    s = fresh_server(env={"PAYD_FAULT": "crash-after-charge"})
    user = s.create_user()
    acct = user.create_account()
    key = os.urandom(8).hex()
    with pytest.raises(Exception):
        user.pay(acct, idem=key)
    s.proc.wait(10)
    s.log.close()
    s.env.pop("PAYD_FAULT")
    s.args = ["--idempotency-lock-timeout", "1s", "--processor-timeout", "500ms",
              "--recovery-interval", "200ms"]
    s.start(s.port)
    deadline = time.time() + 10
    settled = []
    while time.time() < deadline and not settled:
        settled = [l for l in log_lines(s) if l.get("msg") == "recovered idempotency key"]
        time.sleep(0.2)
    assert settled, s.read_log()[-2000:]
    import hashlib
    line = settled[0]
    assert line["user_id"] == user.id and line["outcome"] == "completed"
    assert line["key_sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in s.read_log()
    assert line["time"]


# 10. Unknown query parameters.

@pytest.mark.parametrize("path,param", [("/v1/accounts?starting_after=acct_x", "starting_after"),
                                        ("/v1/users/me?expand=x", "expand"),
                                        ("/healthz?x", "x")])
def test_unknown_query_parameter(alice, path, param):
    r = alice.get(path)
    assert r.status == 400 and r.json["code"] == "unknown_parameter", r
    assert r.json["param"] == param


def test_declared_query_parameters_still_work(alice):
    alice.create_account()
    r = alice.get("/v1/accounts?limit=1")
    assert r.status == 200 and len(r.json["data"]) == 1


# 11. --listen and --db.

def start_with(tmp_path, listen, name):
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([PAYD, "serve", "--listen", listen, "--db",
                                 str(tmp_path / f"{name}.db")], stderr=out, stdout=out)
    deadline = time.time() + 10
    while time.time() < deadline:
        lines = [json.loads(l) for l in log.read_text().splitlines() if l.startswith("{")]
        serving = [l for l in lines if l["msg"] == "payd serving"]
        if serving:
            return proc, serving[0]["listen"]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(log.read_text())


@pytest.mark.parametrize("listen,family", [("localhost:0", socket.AF_INET),
                                           ("127.0.0.1:0", socket.AF_INET),
                                           ("[::1]:0", socket.AF_INET6)])
def test_listen_takes_names_and_ipv6_and_logs_the_real_port(tmp_path, listen, family):
    if family == socket.AF_INET6 and not socket.has_ipv6:
        pytest.skip("no IPv6")
    proc, real = start_with(tmp_path, listen, "l")
    try:
        host, port = real.rsplit(":", 1)
        assert int(port) > 0
        with socket.socket(family) as c:
            c.settimeout(5)
            c.connect((host.strip("[]"), int(port)))
            c.sendall(request_bytes("GET", "/healthz"))
            assert read_all(c, 5).startswith(b"HTTP/1.1 200")
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("db,message", [("mysql://u@h/db", "unsupported database"),
                                        ("sqlite:", "path is empty")])
def test_db_url_errors_are_clear(tmp_path, db, message):
    out = subprocess.run([PAYD, "serve", "--listen", "127.0.0.1:0", "--db", db],
                         capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert not list(tmp_path.iterdir())  # no stray database file
