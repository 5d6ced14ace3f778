"""The webhook verifier: every case of the Standard Webhooks test vectors
(clients/conformance/standard-webhooks-vectors.json), sign and verify, with each case's clock;
then the input forms a handler meets (headers in any case, raw bytes or str) and payd's own
Payd-Signature."""

import hashlib
import hmac
import json
import os

import pytest

import payd
from conftest import CONFORMANCE_DIR
from payd import webhooks

with open(os.path.join(CONFORMANCE_DIR, "standard-webhooks-vectors.json"), encoding="utf-8") as f:
    VECTORS = json.load(f)


@pytest.mark.parametrize("case", VECTORS["sign"], ids=lambda c: c["msg_id"])
def test_sign_vector(case):
    assert webhooks.sign(case["secret"], case["msg_id"], case["timestamp"],
                         case["payload"]) == case["signature"]


@pytest.mark.parametrize("case", VECTORS["verify"], ids=lambda c: c["name"])
def test_verify_vector(case):
    verify = lambda: webhooks.verify(case["secret"], case["headers"], case["payload"].encode(),
                                     tolerance=VECTORS["tolerance_seconds"], now=case["now"])
    if case["valid"]:
        assert verify() == json.loads(case["payload"])
    else:
        with pytest.raises(payd.WebhookVerificationError):
            verify()


SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
BODY = (b'{"id":"evt_1","object":"event","type":"payment.succeeded",'
        b'"data":{"object":{"id":"pay_1"}}}')


def signed_headers(body=BODY, t=1_800_000_000, msg_id="evt_1"):
    return {"Webhook-Id": msg_id, "WEBHOOK-TIMESTAMP": str(t),
            "webhook-signature": webhooks.sign(SECRET, msg_id, t, body)}


def test_headers_in_any_case_and_any_form():
    expected = json.loads(BODY)
    h = signed_headers()
    assert webhooks.verify(SECRET, h, BODY, now=1_800_000_000) == expected
    assert webhooks.verify(SECRET, list(h.items()), BODY.decode(), now=1_800_000_000) == expected
    import email.message
    message = email.message.Message()
    for name, value in h.items():
        message[name] = value
    assert webhooks.verify(SECRET, message, BODY, now=1_800_000_000) == expected


def test_reserialized_json_fails():
    again = json.dumps(json.loads(BODY)).encode()  # ", " and ": ": other bytes
    with pytest.raises(payd.WebhookVerificationError):
        webhooks.verify(SECRET, signed_headers(), again, now=1_800_000_000)


def test_the_default_clock_refuses_an_old_delivery():
    with pytest.raises(payd.WebhookVerificationError, match="too old"):
        webhooks.verify(SECRET, signed_headers(t=1_000_000_000), BODY)


def payd_signature(secret, t, body):
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def test_payd_signature_when_no_standard_headers():
    h = {"Payd-Signature": payd_signature(SECRET, 1_800_000_000, BODY)}
    assert webhooks.verify(SECRET, h, BODY, now=1_800_000_100)["id"] == "evt_1"
    for bad in ({"Payd-Signature": payd_signature("whsec_other", 1_800_000_000, BODY)},
                {"Payd-Signature": payd_signature(SECRET, 1_800_000_000, BODY + b" ")},
                {"Payd-Signature": "v1=00"}, {}):
        with pytest.raises(payd.WebhookVerificationError):
            webhooks.verify(SECRET, bad, BODY, now=1_800_000_100)
    with pytest.raises(payd.WebhookVerificationError):  # stale
        webhooks.verify(SECRET, h, BODY, now=1_800_000_301)


def test_a_broken_standard_header_does_not_fall_back_to_payd_signature():
    h = {"webhook-id": "evt_1", "webhook-timestamp": "1800000000", "webhook-signature": "v1,AAAA",
         "Payd-Signature": payd_signature(SECRET, 1_800_000_000, BODY)}
    with pytest.raises(payd.WebhookVerificationError):
        webhooks.verify(SECRET, h, BODY, now=1_800_000_000)
