"""Unit tests of the retry policy (pure functions), Retry-After parsing, Idempotency-Key
handling, error mapping and the list iterator, against a scripted loopback server on a fake
clock (sleep only moves the clock)."""

import json
import uuid

import pytest

import payd
from payd import _backoff
from payd.errors import error_class

WALL = 1_800_000_000.0  # 2027-01-15T08:00:00Z


# ---- the pure policy ----

def test_nominal_delay_doubles_up_to_the_cap():
    assert [_backoff.nominal_delay(n, 1.0, 30.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert _backoff.nominal_delay(1, 0.1, 5.0) == 0.1


def test_jitter_stays_within_thirty_percent():
    for n in range(1, 8):
        nominal = _backoff.nominal_delay(n, 1.0, 30.0)
        assert _backoff.jittered_delay(n, 1.0, 30.0, 0.0) == pytest.approx(nominal * 0.7)
        assert _backoff.jittered_delay(n, 1.0, 30.0, 0.5) == pytest.approx(nominal)
        assert _backoff.jittered_delay(n, 1.0, 30.0, 0.999999) == pytest.approx(
            nominal * 1.3, rel=1e-5)


def test_retry_after_is_a_floor_spread_above_it():
    # nominal 1 s, Retry-After 2 s: at least 2 s, at most 2.6 s
    assert _backoff.next_delay(1, 1.0, 30.0, 0.0, 2.0) == pytest.approx(2.0)
    assert _backoff.next_delay(1, 1.0, 30.0, 0.999, 2.0) == pytest.approx(2.0 * 1.2997)
    # a Retry-After below the backoff changes nothing
    assert _backoff.next_delay(4, 1.0, 30.0, 0.5, 1.0) == pytest.approx(8.0)


def test_retry_after_beyond_max_delay_gives_up():
    assert _backoff.next_delay(1, 1.0, 30.0, 0.5, 31.0) is None
    assert _backoff.next_delay(1, 1.0, 30.0, 0.5, 30.0) is not None


@pytest.mark.parametrize("value, seconds", [
    ("2", 2.0), (" 7 ", 7.0), ("0", 0.0), ("99999999999", 86400.0),
    ("Fri, 15 Jan 2027 08:00:05 GMT", 5.0),          # IMF-fixdate
    ("Friday, 15-Jan-27 08:00:30 GMT", 30.0),         # RFC 850
    ("Fri Jan 15 08:01:00 2027", 60.0),               # asctime
    ("Fri Jan  1 08:00:00 2027", 0.0),                # asctime, one-digit day; in the past: 0
    ("Thu, 01 Jan 2026 00:00:00 GMT", 0.0),           # in the past: 0
])
def test_retry_after_both_forms(value, seconds):
    assert _backoff.parse_retry_after(value, WALL) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [
    None, "", "soon", "-1", "1.5", "2s", "Fri, 32 Jan 2027 08:00:05 GMT",
    "Fri, 15 Foo 2027 08:00:05 GMT", "Fri, 15 Jan 2027 08:00:05 UTC", "\u0663"])
def test_unreadable_retry_after_is_ignored(value):
    assert _backoff.parse_retry_after(value, WALL) is None


# ---- the loop, against a scripted server ----

def client_for(server, fake_time, **policy):
    policy.setdefault("rand", lambda: 0.5)  # no jitter: delays are exactly nominal
    return payd.Client("sk_test", server.url, sleep=fake_time.sleep, clock=fake_time.clock,
                       wall_clock=fake_time.wall_clock, **policy)


CREATED = (201, {}, {"id": "pay_1", "object": "payment"})


def problem(status, code, **extra):
    return {"type": "about:blank", "title": "t", "status": status, "detail": f"{code} detail",
            "code": code, "request_id": f"req_{status}", **extra}


def test_503_503_201_is_one_call_under_one_generated_key(scripted, fake_time):
    s = scripted((503, {}, problem(503, "overloaded")), "drop", CREATED)
    c = client_for(s, fake_time)
    r = c.request("POST", "/v1/payments", body={"amount": 1})
    assert r.status == 201 and r.attempts == 3 and r.body["id"] == "pay_1"
    keys = {q["headers"]["idempotency-key"] for q in s.requests}
    assert len(s.requests) == 3 and keys == {r.idempotency_key}
    assert uuid.UUID(r.idempotency_key).version == 4
    assert r.idempotency_key == r.idempotency_key.lower()
    assert fake_time.sleeps == pytest.approx([1.0, 2.0])
    assert all(q["headers"]["authorization"] == "Bearer sk_test" for q in s.requests)
    assert json.loads(s.requests[0]["body"]) == {"amount": 1}


def test_each_logical_call_gets_its_own_key(scripted, fake_time):
    s = scripted(CREATED, CREATED)
    c = client_for(s, fake_time)
    c.payments.create(account_id="acct_1", amount=1, currency="USD", source="tok_visa")
    c.payments.create(account_id="acct_1", amount=1, currency="USD", source="tok_visa")
    a, b = (q["headers"]["idempotency-key"] for q in s.requests)
    assert a != b


def test_the_callers_key_is_sent_on_every_attempt_and_never_replaced(scripted, fake_time):
    s = scripted((409, {"Retry-After": "1"}, problem(409, "request_in_progress")), CREATED)
    c = client_for(s, fake_time)
    p = c.payments.create(account_id="acct_1", amount=1, currency="USD", source="tok_visa",
                          idempotency_key="order-1234")
    assert p["id"] == "pay_1"
    assert [q["headers"]["idempotency-key"] for q in s.requests] == ["order-1234"] * 2
    assert fake_time.sleeps[0] >= 1.0


@pytest.mark.parametrize("key", ["", "a b", "x" * 256, "caf\u00e9", "a\r\nX-Evil: 1"])
def test_an_invalid_key_is_refused_before_sending(scripted, fake_time, key):
    s = scripted()
    with pytest.raises(ValueError):
        client_for(s, fake_time).request("POST", "/v1/payments", body={}, idempotency_key=key)
    assert s.requests == []


def test_get_carries_no_key_and_escapes_ids(scripted, fake_time):
    s = scripted((200, {}, {"id": "pay_1"}))
    client_for(s, fake_time).payments.retrieve("pay_1/../x")
    assert s.requests[0]["path"] == "/v1/payments/pay_1%2F..%2Fx"
    assert "idempotency-key" not in s.requests[0]["headers"]


@pytest.mark.parametrize("status, code, cls", [
    (400, "invalid_parameter", payd.InvalidRequestError),
    (401, "unauthorized", payd.AuthenticationError),
    (402, "card_declined", payd.CardError),
    (404, "resource_missing", payd.NotFoundError),
    (409, "duplicate_payment", payd.ConflictError),
    (412, "version_conflict", payd.ConflictError),
    (422, "idempotency_key_reused", payd.IdempotencyError),
])
def test_final_4xx_is_not_retried_and_typed(scripted, fake_time, status, code, cls):
    s = scripted((status, {"X-Request-Id": "req_hdr"},
                  problem(status, code, param="amount", decline_code="generic_decline")))
    with pytest.raises(cls) as e:
        client_for(s, fake_time).request("POST", "/v1/payments", body={})
    err = e.value
    assert isinstance(err, payd.PaydError)
    assert (err.status, err.code, err.param) == (status, code, "amount")
    assert err.request_id == f"req_{status}"
    assert err.attempts == 1 and not err.retryable and err.give_up is None
    assert err.problem["detail"] == f"{code} detail"
    assert err.idempotency_key == s.requests[0]["headers"]["idempotency-key"]
    assert len(s.requests) == 1 and fake_time.sleeps == []
    if cls is payd.CardError:
        assert err.decline_code == "generic_decline"


def test_max_retries_then_a_typed_error_that_says_why(scripted, fake_time):
    s = scripted(*[(503, {}, problem(503, "database_unavailable"))] * 3)
    with pytest.raises(payd.APIError) as e:
        client_for(s, fake_time, max_retries=2).request("POST", "/v1/payments", body={})
    assert e.value.attempts == 3 and e.value.retryable and e.value.give_up == "max_retries"
    assert e.value.code == "database_unavailable"
    assert fake_time.sleeps == pytest.approx([1.0, 2.0])


def test_429_waits_retry_after_and_too_long_gives_up(scripted, fake_time):
    s = scripted((429, {"Retry-After": "3"}, problem(429, "rate_limited")), CREATED)
    assert client_for(s, fake_time).request("GET", "/v1/accounts").attempts == 2
    assert 3.0 <= fake_time.sleeps[0] <= 3.9
    s2 = scripted((429, {"Retry-After": "31"}, problem(429, "rate_limited")))
    with pytest.raises(payd.RateLimitError) as e:
        client_for(s2, fake_time).request("GET", "/v1/accounts")
    assert e.value.give_up == "retry_after" and e.value.attempts == 1


def test_retry_after_as_an_http_date(scripted, fake_time):
    date = "Fri, 15 Jan 2027 08:00:04 GMT"  # 4 s after the fake wall clock's now
    s = scripted((503, {"Retry-After": date}, problem(503, "x")), CREATED)
    client_for(s, fake_time).request("GET", "/v1/accounts")
    assert 4.0 <= fake_time.sleeps[0] <= 5.2


def test_no_answer_is_a_connection_error_after_the_retries(fake_time):
    import socket
    with socket.socket() as sock:  # a port that refuses: bound, never listening
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        c = payd.Client("sk", url, max_retries=2, sleep=fake_time.sleep, clock=fake_time.clock,
                        rand=lambda: 0.5)
        with pytest.raises(payd.APIConnectionError) as e:
            c.request("POST", "/v1/payments", body={})
    assert e.value.status == 0 and e.value.attempts == 3 and e.value.idempotency_key


def test_the_deadline_stops_before_a_wait_that_would_pass_it(scripted, fake_time):
    s = scripted(*[(503, {}, problem(503, "x"))] * 5)
    with pytest.raises(payd.APIError) as e:
        client_for(s, fake_time, deadline=2.5).request("GET", "/v1/accounts")
    # waits 1 s, then 2 s would end past 2.5 s: give up at attempt 2
    assert e.value.give_up == "deadline" and e.value.attempts == 2


def test_the_list_iterator_follows_next_cursor_until_has_more_is_false(scripted, fake_time):
    page = lambda ids, cursor: (200, {}, {"object": "list", "data": [{"id": i} for i in ids],
                                          "has_more": cursor is not None, "next_cursor": cursor})
    s = scripted(page(["p4", "p3"], "c2"), (503, {}, problem(503, "x")), page(["p2", "p1"], "c3"),
                 page([], None))
    c = client_for(s, fake_time)
    assert [p["id"] for p in c.payments.list(account="acct_1", limit=2)] == ["p4", "p3", "p2", "p1"]
    paths = [q["path"] for q in s.requests]
    assert paths == ["/v1/accounts/acct_1/payments?limit=2",
                     "/v1/accounts/acct_1/payments?limit=2&cursor=c2",
                     "/v1/accounts/acct_1/payments?limit=2&cursor=c2",
                     "/v1/accounts/acct_1/payments?limit=2&cursor=c3"]


def test_error_classes_by_status():
    assert error_class(0) is payd.APIConnectionError
    assert error_class(500) is error_class(503) is payd.APIError
    assert error_class(429) is payd.RateLimitError
    assert error_class(418) is payd.InvalidRequestError


def test_a_base_url_that_is_not_http_is_refused():
    with pytest.raises(ValueError):
        payd.Client("sk", "ftp://127.0.0.1")
