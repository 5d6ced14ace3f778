"""Rate limits, graceful shutdown, metrics and connection limits (§11, §12)."""

import concurrent.futures
import re
import signal
import socket
import time
import uuid


def test_rate_limit_429_with_retry_after_then_recovers(fresh_server):
    s = fresh_server()
    user = s.create_user("slow", rate_limit="5/s")
    results = [user.get("/v1/accounts") for _ in range(25)]
    limited = [r for r in results if r.status == 429]
    # the burst of 5 passes, then refusals; how many depends on how fast 25 requests go out
    assert len(limited) >= 5, [r.status for r in results]
    assert [r.status for r in results[:5]] == [200] * 5
    r = limited[-1]
    assert r.json["code"] == "rate_limited"
    retry = int(r.header("retry-after"))
    assert retry >= 1
    time.sleep(retry)
    assert user.get("/v1/accounts").status == 200


def test_rate_limit_headers_are_consistent(fresh_server):
    s = fresh_server()
    user = s.create_user("counted", rate_limit="5/s")
    seen = []
    for _ in range(4):
        r = user.get("/v1/accounts")
        assert r.status == 200
        seen.append(r)
    remaining = [int(r.header("x-ratelimit-remaining")) for r in seen]
    assert remaining == sorted(remaining, reverse=True) and remaining[0] > remaining[-1]
    for r in seen:
        assert r.header("x-ratelimit-limit") == "5"
        assert int(r.header("x-ratelimit-reset")) >= int(time.time())
        assert int(r.header("x-ratelimit-reset-after")) >= 1
        assert r.header("ratelimit-policy") == '"default";q=5;w=1'
        rl = r.header("ratelimit")
        assert rl == '"default";r=%s;t=%s' % (r.header("x-ratelimit-remaining"),
                                             r.header("x-ratelimit-reset-after"))
    # the server's own default applies to users without a limit of their own
    other = s.create_user("default")
    assert other.get("/v1/accounts").header("x-ratelimit-limit") == "100"
    # operational routes are not limited
    assert s.request("GET", "/healthz").header("x-ratelimit-limit") is None


def test_rate_limited_post_does_not_consume_its_key(fresh_server):
    s = fresh_server()
    user = s.create_user("burst", rate_limit="3/s")
    acct = user.create_account()
    while user.get("/v1/accounts").status != 429:
        pass
    k = str(uuid.uuid4())
    r = user.pay(acct, idem=k)
    assert r.status == 429
    time.sleep(int(r.header("retry-after")) + 0.1)
    r = user.pay(acct, idem=k)
    assert r.status == 201 and r.header("idempotent-replayed") is None


def test_sigterm_finishes_in_flight_requests(fresh_server):
    s = fresh_server()
    user = s.create_user()
    acct = user.create_account()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(user.pay, acct, 500, "tok_slow", str(uuid.uuid4()))
        time.sleep(0.5)
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        try:
            late = user.get("/v1/accounts", timeout=5)
            assert late.status == 503 and late.json["code"] == "shutting_down"
            assert late.header("retry-after")
        except OSError:
            pass  # refused: the listener is closed
        assert pending.result().status == 201
    assert s.proc.wait(15) == 0
    s.start(s.port)
    assert user.get("/v1/accounts/" + acct["id"]).json["balance"] == 500


def parse_prometheus(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            assert line == "" or re.match(r"# (HELP|TYPE) [a-z_]+ ", line), line
            continue
        m = re.match(r'^([a-z_]+)(\{[^}]*\})? (-?[0-9.e+]+|\+Inf)$', line)
        assert m, line
        samples[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return samples


def test_metrics_parse_and_move(fresh_server):
    s = fresh_server()
    user = s.create_user()
    acct = user.create_account()
    before = parse_prometheus(s.request("GET", "/metrics").raw.decode())
    k = str(uuid.uuid4())
    user.pay(acct, idem=k)
    user.pay(acct, idem=k)
    user.pay(acct, idem=str(uuid.uuid4()), source="tok_chargeDeclined")
    key = 'payd_http_requests_total{route="/v1/payments",method="POST",code="201"}'
    latency = 'payd_http_request_duration_seconds_count{route="/v1/payments"}'
    # a request is counted when it completes, just after its answer is sent: the client can
    # read /metrics before the last one is in
    deadline = time.time() + 5
    while True:
        r = s.request("GET", "/metrics")
        after = parse_prometheus(r.raw.decode())
        if after.get(latency, 0) - before.get(latency, 0) >= 3 or time.time() > deadline:
            break
        time.sleep(0.05)
    assert r.header("content-type").startswith("text/plain")
    assert after[key] - before.get(key, 0) == 2
    assert after["payd_idempotent_replays_total"] - before["payd_idempotent_replays_total"] == 1
    assert after['payd_processor_calls_total{operation="charge",outcome="approved"}'] >= 1
    assert after['payd_processor_calls_total{operation="charge",outcome="declined"}'] >= 1
    assert after[latency] - before.get(latency, 0) == 3
    assert after["payd_store_commit_batch_size_count"] > before["payd_store_commit_batch_size_count"]
    assert "payd_store_queue_depth" in after and "payd_rate_limited_total" in after


def test_slowloris_is_cut_off_while_others_are_served(fresh_server):
    s = fresh_server(["--header-timeout", "2s"])
    user = s.create_user()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.settimeout(1)
    request = b"GET /v1/accounts HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 40
    cut_at = None
    start = time.time()
    for byte in request:
        try:
            sock.send(bytes([byte]))
            if sock.recv(1024) == b"":
                cut_at = time.time() - start
                break
        except socket.timeout:
            pass
        except OSError:
            cut_at = time.time() - start
            break
        assert user.get("/healthz").status == 200  # others are served meanwhile
        if time.time() - start > 8:
            break
    sock.close()
    assert cut_at is not None and cut_at < 6, cut_at


def test_too_many_headers_is_431(fresh_server):
    s = fresh_server(["--max-headers", "10"])
    user = s.create_user()
    r = user.get("/v1/accounts", headers={f"X-H{i}": "v" for i in range(20)})
    assert r.status == 431 and r.json["code"] == "headers_too_large"
