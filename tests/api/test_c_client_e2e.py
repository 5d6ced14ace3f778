"""The C client (libpaydclient, through payctl and tests/clients/verify_c) end to end against a
real payd, as the Node and Python clients are tested in their own suites (docs/client.md): an
answer lost on the way and a 409 in flight end with one charge, a 429 waits its Retry-After, a
402 is not retried, a 250-item list is read to its end with no repeat, and a real delivery
verifies with the C verifier while a tampered or stale one does not. Its conformance run against
the scripted server is the ctest test client-c.conformance."""
import json
import os
import re
import subprocess
import threading
import time

import pytest

from conftest import PAYCTL, Payd
from lossy_proxy import AnswerDroppingProxy
from receiver import Receiver

VERIFY_C = os.path.join(os.path.dirname(PAYCTL), "verify_c")


def payctl(user, *args, url=None):
    env = dict(os.environ, PAYD_URL=url or user.server.url, PAYD_API_KEY=user.key)
    return subprocess.run([PAYCTL, *args], capture_output=True, text=True, env=env, timeout=120)


def attempts(stderr):
    return [line for line in stderr.splitlines() if re.match(r"payctl: attempt \d+:", line)]


def keys_of(lines):
    return {re.search(r"Idempotency-Key (\S+)\]", line).group(1) for line in lines}


def create(user, account, source="tok_visa", *extra, url=None):
    return payctl(user, "--verbose", "payments", "create", "--account", account["id"],
                  "--amount", "4200", "--currency", "USD", "--source", source, *extra, url=url)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


def test_an_answer_lost_on_the_way_is_retried_with_one_key_and_charges_once(server):
    alice = server.create_user("c-lost")
    account = alice.create_account()
    proxy = AnswerDroppingProxy(server.port)
    try:
        out = create(alice, account, url=proxy.url)
    finally:
        proxy.close()
    assert out.returncode == 0, out.stderr
    tries = attempts(out.stderr)
    assert len(tries) == 2 and len(keys_of(tries)) == 1, out.stderr
    payment = json.loads(out.stdout)
    listed = alice.get(f"/v1/accounts/{account['id']}/payments").json["data"]
    assert [p["id"] for p in listed] == [payment["id"]]
    assert alice.get(f"/v1/accounts/{account['id']}").json["balance"] == 4200


def test_a_409_in_flight_is_waited_out_and_gives_the_one_payment(server):
    alice = server.create_user("c-inflight")
    account = alice.create_account()
    key = "c-inflight-" + os.urandom(6).hex()
    results = {}

    def run(name):
        results[name] = create(alice, account, "tok_slow", "--idempotency-key", key)

    first = threading.Thread(target=run, args=("first",))
    first.start()
    time.sleep(0.3)  # the first holds the key while the processor is slow
    run("second")
    first.join()
    for out in results.values():
        assert out.returncode == 0, out.stderr
    assert json.loads(results["first"].stdout) == json.loads(results["second"].stdout)
    waited = [line for out in results.values() for line in attempts(out.stderr)
              if "409 request_in_progress" in line]
    assert waited, [out.stderr for out in results.values()]
    assert alice.get(f"/v1/accounts/{account['id']}/payments/count").json["count"] == 1


def test_a_429_waits_its_retry_after(fresh_server):
    s = fresh_server()
    slow = s.create_user("c-429", rate_limit="1/s")
    account = slow.create_account()  # takes the second's one request
    started = time.monotonic()
    out = create(slow, account)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr
    tries = attempts(out.stderr)
    assert "429 rate_limited" in tries[0], out.stderr
    waited_ms = int(re.search(r"retrying in (\d+) ms", tries[0]).group(1))
    assert waited_ms >= 1000  # payd's Retry-After is whole seconds, at least 1 (docs/api.md §11)
    assert took >= waited_ms / 1000


def test_a_402_is_not_retried(server):
    alice = server.create_user("c-402")
    account = alice.create_account()
    out = create(alice, account, "tok_chargeDeclined")
    assert out.returncode == 1
    assert json.loads(out.stdout)["code"] == "card_declined"
    assert len(attempts(out.stderr)) == 1


def test_a_250_item_list_is_read_to_its_end_with_no_repeat(server):
    alice = server.create_user("c-list")
    account = alice.create_account()
    made = []
    for i in range(250):
        r = alice.pay(account, amount=100 + i)
        assert r.status == 201, r
        made.append(r.json["id"])
    out = payctl(alice, "payments", "list", "--account", account["id"], "--all", "--limit", "100")
    assert out.returncode == 0, out.stderr
    listed = [json.loads(line)["id"] for line in out.stdout.splitlines() if line.strip()]
    assert len(listed) == len(set(listed)) == 250
    assert listed == made[::-1]


def verify_c(secret, headers, body, tmp_path, now=None):
    path = tmp_path / "body"
    path.write_bytes(body)
    args = [VERIFY_C, secret, headers.get("webhook-id", ""), headers.get("webhook-timestamp", ""),
            headers.get("webhook-signature", ""), str(path)]
    out = subprocess.run(args + ([str(now)] if now else []), capture_output=True, text=True)
    return out.returncode, out.stdout.strip()


def test_a_real_delivery_verifies_with_the_c_verifier_and_a_changed_one_does_not(server, tmp_path):
    alice = server.create_user("c-hooks")
    rx = Receiver()
    try:
        made = alice.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["account.created"]})
        assert made.status == 201, made
        secret = made.json["secret"]
        alice.create_account()
        assert rx.wait_for(lambda r: len(r.requests) >= 1), "no delivery"
        delivery = rx.requests[0]
    finally:
        rx.close()
    headers, body = delivery["headers"], delivery["body"]
    assert verify_c(secret, headers, body, tmp_path) == (0, "ok")
    tampered = body.replace(b'"account.created"', b'"account.deleted"')
    assert tampered != body
    assert verify_c(secret, headers, tampered, tmp_path)[0] == 1
    stale = int(headers["webhook-timestamp"]) + 301
    assert verify_c(secret, headers, body, tmp_path, now=stale)[0] == 1
    other = alice.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["order.created"]})
    assert verify_c(other.json["secret"], headers, body, tmp_path)[0] == 1
