"""The client end to end against a real payd (build/payd or $PAYD_BIN, started by the API
tests' harness, tests/api/conftest.py): a lost answer and a 409 in flight each end as one charge;
a 429 waits its Retry-After; a 402 is not retried; a 250-item list is iterated to the end with no
repeat; balances and balance transactions after payments, a refund and a transfer; a signed
delivery from payd is verified, and a tampered or stale one refused."""

import importlib.util
import http.server
import os
import sys
import threading
import time

import pytest

import payd
from conftest import ROOT

API_TESTS = os.path.join(ROOT, "tests", "api")
sys.path.append(API_TESTS)  # the harness's own imports (pg, for PAYD_TEST_BACKEND=postgres)
_spec = importlib.util.spec_from_file_location("payd_api_harness",
                                               os.path.join(API_TESTS, "conftest.py"))
harness = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(harness)

from lossy_proxy import AnswerDroppingProxy  # noqa: E402  (tests/api, shared with the C client's test)

if not os.path.exists(harness.PAYD):
    pytest.skip(f"no payd binary at {harness.PAYD} (set PAYD_BIN)", allow_module_level=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = harness.Payd(str(tmp_path_factory.mktemp("payd")),
                     args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def user(server):
    return server.create_user("python")


def client(server, user, **policy):
    policy.setdefault("base_delay", 0.2)
    policy.setdefault("max_delay", 5.0)
    return payd.Client(user.key, server.url, **policy)


def payment_ids(c, account):
    return [p["id"] for p in c.payments.list(account=account["id"], limit=100)]


def test_a_lost_answer_ends_as_one_charge(server, user):
    c = client(server, user)
    account = c.accounts.create("USD")
    proxy = AnswerDroppingProxy(server.port)
    try:
        r = payd.Client(user.key, proxy.url, base_delay=0.2).request("POST", "/v1/payments", body={
            "account_id": account["id"], "amount": 4200, "currency": "USD", "source": "tok_visa"})
    finally:
        proxy.close()
    assert proxy.dropped == 1 and r.status == 201 and r.attempts == 2
    assert r.replayed  # the second attempt got the first one's stored answer
    assert payment_ids(c, account) == [r.body["id"]]
    assert c.accounts.retrieve(account["id"])["balance"] == 4200


def test_a_409_in_flight_ends_as_one_charge(server, user):
    c = client(server, user)
    account = c.accounts.create("USD")
    key = f"py-inflight-{time.time_ns()}"
    body = {"account_id": account["id"], "amount": 500, "currency": "USD", "source": "tok_slow"}
    answers = []

    def pay():
        answers.append(c.request("POST", "/v1/payments", idempotency_key=key, body=body))

    first = threading.Thread(target=pay)
    first.start()
    time.sleep(0.5)  # the first is now inside the processor's 2 s
    pay()
    first.join(30)
    assert len(answers) == 2
    # one ran the charge; the other met 409 request_in_progress, waited, and got its answer
    assert sorted(a.replayed for a in answers) == [False, True]
    assert max(a.attempts for a in answers) >= 2
    assert answers[0].body["id"] == answers[1].body["id"]
    assert payment_ids(c, account) == [answers[0].body["id"]]


def test_a_429_waits_its_retry_after(server):
    # one request per 3 s: room for a slow machine between the refusal and the client's call
    limited = server.create_user(f"limited{time.time_ns()}", rate_limit="20/m")
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        time.sleep(seconds)

    c = payd.Client(limited.key, server.url, base_delay=0.05, max_delay=5.0, sleep=sleep)
    refused = None
    for _ in range(20):  # spend the quota by hand until payd refuses
        r = limited.get("/v1/accounts")
        if r.status == 429:
            refused = r
            break
    assert refused is not None and refused.json["code"] == "rate_limited"
    retry_after = int(refused.header("retry-after"))
    started = time.monotonic()
    r = c.request("GET", "/v1/accounts")
    assert r.status == 200 and r.attempts >= 2
    assert sleeps[0] >= retry_after  # its own backoff alone would have waited 0.05 s
    assert time.monotonic() - started >= retry_after


def test_a_402_is_not_retried(server, user):
    c = client(server, user)
    account = c.accounts.create("USD")
    with pytest.raises(payd.CardError) as e:
        c.payments.create(account_id=account["id"], amount=300, currency="USD",
                          source="tok_chargeDeclined")
    err = e.value
    assert (err.status, err.code, err.attempts) == (402, "card_declined", 1)
    assert err.decline_code == "generic_decline" and err.problem["payment"]["status"] == "failed"
    assert err.request_id and err.idempotency_key and not err.retryable


def test_a_250_item_list_is_iterated_to_the_end_with_no_repeat(server, user):
    c = client(server, user)
    account = c.accounts.create("USD")
    created = [c.payments.create(account_id=account["id"], amount=n + 1, currency="USD",
                                 source="tok_visa")["id"] for n in range(250)]
    seen = list(c.payments.list(account=account["id"], limit=100))
    ids = [p["id"] for p in seen]
    assert len(ids) == 250 and len(set(ids)) == 250 and set(ids) == set(created)
    assert ids == list(reversed(created))  # newest first
    page = c.payments.list_page(account=account["id"], limit=100)
    assert len(page["data"]) == 100 and page["has_more"] and page["next_cursor"]


def test_balances_and_balance_transactions(server, user):
    c = client(server, user)
    source, dest = c.accounts.create("USD"), c.accounts.create("USD")
    payments = [c.payments.create(account_id=source["id"], amount=1000 + n, currency="USD",
                                  source="tok_visa") for n in range(7)]
    refund = c.refunds.create(payments[2]["id"], amount=300)
    transfer = c.transfers.create(biz_seq=f"py-e2e-{source['id']}", from_account=source["id"],
                                  to_account=dest["id"], amount=2500, currency="USD")
    assert transfer["status"] == "succeeded"

    charged = sum(p["amount"] for p in payments)
    assert c.accounts.balance(source["id"]) == {
        "object": "balance", "livemode": True, "available": charged - 300 - 2500, "pending": 0,
        "currency": "USD"}
    assert c.accounts.balance(dest["id"]) == {
        "object": "balance", "livemode": True, "available": 2500, "pending": 0, "currency": "USD"}
    assert c.accounts.balance(source["id"])["available"] == \
        c.accounts.retrieve(source["id"])["balance"]

    # 9 lines on the source account, 2 a page: the generator follows next_cursor to the end
    lines = list(c.balance_transactions.list(account_id=source["id"], limit=2))
    assert len(lines) == 9 and len({t["id"] for t in lines}) == 9
    assert [(t["type"], t["amount"], t["source"]) for t in lines] == [
        ("transfer", -2500, transfer["id"]), ("refund", -300, refund["id"]),
        *[("charge", p["amount"], p["id"]) for p in reversed(payments)]]
    assert sum(t["amount"] for t in lines) == c.accounts.balance(source["id"])["available"]
    assert all(t["object"] == "balance_transaction" and t["account_id"] == source["id"]
               and t["id"].startswith("txn_") for t in lines)
    page = c.balance_transactions.list_page(account_id=source["id"], limit=2)
    assert [t["id"] for t in page["data"]] == [t["id"] for t in lines[:2]] and page["has_more"]
    rest = list(c.balance_transactions.list(account_id=source["id"], limit=2,
                                            cursor=page["next_cursor"]))
    assert rest == lines[2:]

    # the filters: a type, a source (both sides of the transfer, one entry), every account
    assert len(list(c.balance_transactions.list(account_id=source["id"], type="charge"))) == 7
    sides = list(c.balance_transactions.list(source=transfer["id"]))
    assert sorted((t["account_id"], t["amount"]) for t in sides) == sorted(
        [(source["id"], -2500), (dest["id"], 2500)])
    assert sides[0]["entry_id"] == sides[1]["entry_id"]
    every = {t["id"] for t in c.balance_transactions.list(limit=100)}
    assert {t["id"] for t in lines} <= every

    assert c.balance_transactions.retrieve(lines[1]["id"]) == lines[1]
    assert c.balance_transactions.get(lines[0]["id"]) == lines[0]
    with pytest.raises(payd.NotFoundError):
        c.balance_transactions.retrieve("txn_0000000000000")
    with pytest.raises(payd.InvalidRequestError):
        list(c.balance_transactions.list(type="gift"))
    # another user sees none of it
    stranger = client(server, server.create_user("python-stranger"))
    with pytest.raises(payd.NotFoundError):
        stranger.accounts.balance(source["id"])
    with pytest.raises(payd.NotFoundError):
        stranger.balance_transactions.retrieve(lines[0]["id"])
    assert list(stranger.balance_transactions.list()) == []


class Receiver:
    def __init__(self):
        self.deliveries = []  # (headers as a list of pairs, raw body)
        self.arrived = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.deliveries.append((list(self.headers.items()), body))
                receiver.arrived.set()
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_signed_delivery_is_verified_and_a_tampered_or_stale_one_refused(server):
    owner = server.create_user(f"hooks{time.time_ns()}")
    c = payd.Client(owner.key, server.url, base_delay=0.2)
    receiver = Receiver()
    try:
        endpoint = c.webhook_endpoints.create(url=receiver.url, events=["payment.succeeded"])
        assert endpoint["secret"].startswith("whsec_")
        assert c.webhook_endpoints.retrieve(endpoint["id"])["url"] == receiver.url
        account = c.accounts.create("USD")
        paid = c.payments.create(account_id=account["id"], amount=700, currency="USD",
                                 source="tok_visa")
        assert receiver.arrived.wait(20), "no delivery"
    finally:
        receiver.close()
        c.webhook_endpoints.delete(endpoint["id"])
    headers, body = receiver.deliveries[0]
    secret = endpoint["secret"]
    event = payd.webhooks.verify(secret, headers, body)
    assert event["type"] == "payment.succeeded" and event["data"]["object"]["id"] == paid["id"]
    assert c.events.retrieve(event["id"])["id"] == event["id"]

    tampered = body.replace(b'"amount":700', b'"amount":70000')
    assert tampered != body
    with pytest.raises(payd.WebhookVerificationError):
        payd.webhooks.verify(secret, headers, tampered)
    with pytest.raises(payd.WebhookVerificationError):
        payd.webhooks.verify("whsec_" + "0" * 48, headers, body)
    with pytest.raises(payd.WebhookVerificationError):
        payd.webhooks.verify(secret, headers, body, now=time.time() + 3600)
    names = {name.lower() for name, _ in headers}
    if "webhook-signature" in names:  # payd signs to Standard Webhooks: that alone suffices
        standard = [(n, v) for n, v in headers if n.lower() != "payd-signature"]
        assert payd.webhooks.verify(secret, standard, body)["id"] == event["id"]


def test_a_manual_payment_is_captured_in_part_then_canceled(server, user):
    """docs/api.md §17 through the client: capture, cancel, and a retried capture under one key
    that captures once."""
    c = client(server, user)
    account = c.accounts.create("USD")
    p = c.payments.create(account_id=account["id"], amount=1000, currency="USD",
                          source="tok_visa", capture_method="manual")
    assert p["status"] == "requires_capture" and p["amount_capturable"] == 1000
    first = c.payments.capture(p["id"], amount_to_capture=300, final_capture=False,
                               idempotency_key="py-capture-1")
    again = c.payments.capture(p["id"], amount_to_capture=300, final_capture=False,
                               idempotency_key="py-capture-1")
    assert first == again and first["amount_captured"] == 300
    done = c.payments.cancel(p["id"], cancellation_reason="abandoned")
    assert (done["status"], done["amount_captured"], done["amount_released"]) == (
        "succeeded", 300, 700)
    with pytest.raises(payd.ConflictError) as refused:
        c.payments.cancel(p["id"])
    assert refused.value.code == "payment_not_capturable"
