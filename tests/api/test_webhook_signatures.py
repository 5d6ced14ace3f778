"""Standard Webhooks signatures and secret rotation (docs/webhooks.md, "Verifying" and "Rotating
the secret"): every delivery carries webhook-id, webhook-timestamp and webhook-signature beside
Payd-Event-Id and Payd-Signature; a verifier written here from the specification (hmac, base64)
accepts them and refuses a tampered body or a stale timestamp; a rotation signs with the new and
the previous secret until the previous one expires, then with the new one only."""

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time
from datetime import datetime

import pytest

from conftest import PAYCTL, Payd
from receiver import Receiver, sign

VECTORS = os.path.join(os.path.dirname(__file__),
                       "../../clients/conformance/standard-webhooks-vectors.json")
TOLERANCE = 300


class Refused(Exception):
    pass


def standard_key(secret):
    """The specification's key: the base64 decoding of what follows whsec_, padding restored."""
    text = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError as e:
        raise Refused(f"secret is not base64: {e}")


def standard_signature(secret, msg_id, timestamp, body):
    mac = hmac.new(standard_key(secret), f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify(secret, headers, body, now=None, tolerance=TOLERANCE):
    """A Standard Webhooks verifier: raises Refused unless one v1 signature of the
    webhook-signature header is the HMAC of "<webhook-id>.<webhook-timestamp>.<body>" and the
    timestamp is within the tolerance of now."""
    msg_id, stamp = headers.get("webhook-id"), headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not msg_id or not stamp or not signatures:
        raise Refused("a webhook-* header is missing")
    if not stamp.isdigit():
        raise Refused("webhook-timestamp is not a number")
    now = time.time() if now is None else now
    if abs(now - int(stamp)) > tolerance:
        raise Refused("webhook-timestamp is outside the tolerance")
    expected = standard_signature(secret, msg_id, stamp, body)
    for candidate in signatures.split(" "):
        if candidate.startswith("v1,") and hmac.compare_digest(candidate, expected):
            return True
    raise Refused("no signature matches")


def verifies(secret, headers, body, **kw):
    try:
        return verify(secret, headers, body, **kw)
    except Refused:
        return False


def payd_signatures(header):
    """Payd-Signature's timestamp and its v1 MACs, in order."""
    parts = header.split(",")
    assert parts[0].startswith("t="), header
    return int(parts[0][2:]), [p[3:] for p in parts[1:] if p.startswith("v1=")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd")), args=["--rate-limit", "100000/s"]).start()
    yield s
    s.stop()


@pytest.fixture
def rx():
    receiver = Receiver()
    yield receiver
    receiver.close()


def endpoint(user, rx):
    made = user.post("/v1/webhook_endpoints", {"url": rx.url, "events": ["account.created"]})
    assert made.status == 201, made
    return made.json


def next_delivery(user, rx):
    """Makes one event and returns its first delivery."""
    seen = len(rx.requests)
    event_account = user.create_account()
    assert rx.wait_for(lambda r: len(r.requests) > seen), "no delivery"
    req = rx.requests[seen]
    assert json.loads(req["body"])["data"]["object"]["id"] == event_account["id"]
    return req


def rotate(user, ep, body=None, idem=None):
    return user.post(f"/v1/webhook_endpoints/{ep['id']}/rotate_secret", body or {}, idem=idem)


# ---- the verifier itself ----

def test_the_verifier_here_agrees_with_the_specifications_vectors():
    """The test's verifier is a real check: it accepts exactly the vectors' valid cases."""
    with open(VECTORS) as f:
        vectors = json.load(f)
    assert vectors["tolerance_seconds"] == TOLERANCE
    for case in vectors["sign"]:
        assert standard_signature(case["secret"], case["msg_id"], case["timestamp"],
                                  case["payload"].encode()) == case["signature"]
    for case in vectors["verify"]:
        accepted = verifies(case["secret"], case["headers"], case["payload"].encode(),
                            now=case["now"])
        assert accepted == case["valid"], case["name"]


# ---- every delivery ----

def test_a_delivery_carries_standard_webhooks_headers(server, rx):
    u = server.create_user("standard")
    ep = endpoint(u, rx)
    assert ep["previous_secret_expires_at"] is None
    secret = ep["secret"]
    # a new secret is whsec_ and the standard base64 of 32 bytes
    assert len(standard_key(secret)) == 32 and base64.b64encode(standard_key(secret)).decode() \
        == secret[len("whsec_"):]
    req = next_delivery(u, rx)
    h, body = req["headers"], req["body"]
    event = json.loads(body)
    assert h["webhook-id"] == h["payd-event-id"] == event["id"]
    stamp = int(h["webhook-timestamp"])
    assert abs(stamp - time.time()) < 60
    assert verify(secret, h, body)
    assert " " not in h["webhook-signature"]  # one secret, one signature
    # Payd-Signature is still there, signed at the same second
    t, macs = payd_signatures(h["payd-signature"])
    assert t == stamp and len(macs) == 1
    assert h["payd-signature"] == sign(secret, t, body)
    # what the verifier refuses: a changed body, a stale or early timestamp, another secret,
    # the signature moved to another id
    assert not verifies(secret, h, body.replace(b'"account.created"', b'"account.deleted"'))
    assert not verifies(secret, h, body + b" ")
    assert not verifies(secret, h, body, now=stamp + TOLERANCE + 1)
    assert not verifies(secret, h, body, now=stamp - TOLERANCE - 1)
    assert verifies(secret, h, body, now=stamp + TOLERANCE)
    assert not verifies(secret, {**h, "webhook-timestamp": str(stamp + 1)}, body, now=stamp)
    assert not verifies(secret, {**h, "webhook-id": "evt_0000000000000"}, body)
    assert not verifies(endpoint(u, rx)["secret"], h, body)


def test_a_secret_of_the_first_release_signs_as_base64_text(fresh_server, rx):
    """A secret made before (whsec_ and 48 hex digits) keeps working: its key is those 48
    characters base64-decoded (36 bytes)."""
    s = fresh_server()
    u = s.create_user()
    ep = endpoint(u, rx)
    old_secret = "whsec_" + "0123456789abcdef" * 3
    s.stop()
    s.execute(f"UPDATE webhook_endpoints SET secret = '{old_secret}' WHERE 1 = 1")
    s.start()  # sealed at start, as any secret stored in the clear
    req = next_delivery(u, rx)
    assert len(standard_key(old_secret)) == 36
    assert verify(old_secret, req["headers"], req["body"])
    assert not verifies(ep["secret"], req["headers"], req["body"])
    t, _ = payd_signatures(req["headers"]["payd-signature"])
    assert req["headers"]["payd-signature"] == sign(old_secret, t, req["body"])


# ---- rotation ----

def test_rotation_signs_with_both_secrets_until_the_previous_one_expires(server, rx):
    u = server.create_user("rotation")
    ep = endpoint(u, rx)
    first = ep["secret"]
    k = os.urandom(8).hex()
    before = time.time()
    rotated = rotate(u, ep, idem=k)
    assert rotated.status == 200, rotated
    second = rotated.json["secret"]
    assert second.startswith("whsec_") and second != first and len(standard_key(second)) == 32
    assert rotated.json["id"] == ep["id"] and rotated.json["url"] == ep["url"]
    # the default overlap: a day
    expires = rotated.json["previous_secret_expires_at"]
    shown = u.get(f"/v1/webhook_endpoints/{ep['id']}").json
    assert "secret" not in shown and shown["previous_secret_expires_at"] == expires
    expires_s = datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp()
    assert abs(expires_s - (before + 86400)) < 60

    # during the overlap: both signatures, the new one first, each verifying with its secret
    req = next_delivery(u, rx)
    h, body = req["headers"], req["body"]
    new_sig, old_sig = h["webhook-signature"].split(" ")
    assert verify(second, {**h, "webhook-signature": new_sig}, body)
    assert verify(first, {**h, "webhook-signature": old_sig}, body)
    assert not verifies(first, {**h, "webhook-signature": new_sig}, body)
    t, macs = payd_signatures(h["payd-signature"])
    assert t == int(h["webhook-timestamp"])
    assert [f"t={t},v1={m}" for m in macs] == [sign(second, t, body), sign(first, t, body)]

    # a replay of the rotation shows no secret and rotates nothing
    replay = rotate(u, ep, idem=k)
    assert replay.status == 200 and replay.header("Idempotent-Replayed") == "true", replay
    assert replay.json["secret"] is None
    assert replay.json["redacted"]["code"] == "secret_shown_once"
    assert second not in replay.raw.decode() and first not in replay.raw.decode()
    stored = server.sql(f"SELECT response_body FROM idempotency_keys WHERE idem_key = '{k}'")
    assert second not in stored and '"secret":null' in stored
    sealed = server.sql(f"SELECT secret FROM webhook_endpoints WHERE url = '{rx.url}' "
                        f"AND previous_secret IS NOT NULL")
    assert sealed.startswith("sealed:v1:")
    req = next_delivery(u, rx)
    assert [verifies(s, {**req["headers"], "webhook-signature": sig}, req["body"])
            for s, sig in zip((second, first), req["headers"]["webhook-signature"].split(" "))] \
        == [True, True]

    # a second rotation during the overlap: the previous secret is now `second`, `first` is gone
    third = rotate(u, ep, {"expire_previous_in": 600}).json["secret"]
    req = next_delivery(u, rx)
    h, body = req["headers"], req["body"]
    assert len(h["webhook-signature"].split(" ")) == 2
    assert verify(third, h, body) and verify(second, h, body)
    assert not verifies(first, h, body)
    t, macs = payd_signatures(h["payd-signature"])
    assert len(macs) == 2 and sign(first, t, body)[len(f"t={t},v1="):] not in macs

    # a short overlap: both while it lasts, then the new secret only
    fourth_answer = rotate(u, ep, {"expire_previous_in": 2})
    assert fourth_answer.status == 200, fourth_answer
    fourth = fourth_answer.json["secret"]
    deadline = time.time() + 2
    req = next_delivery(u, rx)
    if time.time() < deadline - 0.5:  # sent inside the overlap (a loaded machine may be later)
        assert len(req["headers"]["webhook-signature"].split(" ")) == 2
    time.sleep(max(0.0, deadline - time.time()) + 0.5)
    req = next_delivery(u, rx)
    h, body = req["headers"], req["body"]
    assert " " not in h["webhook-signature"]
    assert verify(fourth, h, body)
    assert not verifies(third, h, body)
    assert payd_signatures(h["payd-signature"])[1] == \
        [sign(fourth, int(h["webhook-timestamp"]), body).split("v1=")[1]]

    # no overlap at all: the previous secret stops at once
    fifth = rotate(u, ep, {"expire_previous_in": 0}).json
    assert fifth["previous_secret_expires_at"] is None
    req = next_delivery(u, rx)
    assert " " not in req["headers"]["webhook-signature"]
    assert verify(fifth["secret"], req["headers"], req["body"])
    assert not verifies(fourth, req["headers"], req["body"])


@pytest.mark.parametrize("value", [-1, 604801, "60", 1.5, True, None])
def test_rotation_refuses_a_bad_overlap(server, value):
    u = server.create_user(f"bad-{os.urandom(4).hex()}")
    made = u.post("/v1/webhook_endpoints", {"url": "http://127.0.0.1:9/", "events": ["*"]}).json
    r = rotate(u, made, {"expire_previous_in": value})
    if value is None:  # null reads as not given: the default
        assert r.status == 200 and r.json["secret"], r
        return
    assert r.status == 400, r
    assert r.json["code"] == "invalid_parameter" and r.json["param"] == "expire_previous_in"
    # nothing rotated: no previous secret was kept
    assert u.get(f"/v1/webhook_endpoints/{made['id']}").json["previous_secret_expires_at"] is None


def test_rotation_of_another_users_or_an_unknown_endpoint_is_404(server, rx):
    owner, other = server.create_user("owner"), server.create_user("other")
    ep = endpoint(owner, rx)
    for user, target in ((other, ep), (owner, {"id": "we_0000000000000"})):
        r = rotate(user, target, idem=os.urandom(8).hex())
        assert r.status == 404 and r.json["code"] == "resource_missing", r
    r = owner.post("/v1/webhook_endpoints/acct_0000000000000/rotate_secret", {})
    assert r.status == 404, r
    # the owner's endpoint still signs with its own secret, and only with it
    req = next_delivery(owner, rx)
    assert " " not in req["headers"]["webhook-signature"]
    assert verify(ep["secret"], req["headers"], req["body"])


def test_payctl_rotates_a_secret(server, rx):
    u = server.create_user("cli-rotation")
    ep = endpoint(u, rx)
    env = dict(os.environ, PAYD_URL=server.url, PAYD_API_KEY=u.key)
    out = subprocess.run([PAYCTL, "webhooks", "rotate-secret", ep["id"],
                          "--expire-previous-in", "120"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["id"] == ep["id"] and answer["secret"].startswith("whsec_")
    req = next_delivery(u, rx)
    assert verify(answer["secret"], req["headers"], req["body"])
    assert verify(ep["secret"], req["headers"], req["body"])
    bad = subprocess.run([PAYCTL, "webhooks", "rotate-secret", ep["id"],
                          "--expire-previous-in", "604801"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 1 and "expire_previous_in" in bad.stdout + bad.stderr
