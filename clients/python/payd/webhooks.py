"""Verifying webhook deliveries.

payd signs every delivery to the Standard Webhooks specification (standardwebhooks.com):

    webhook-id:        the event id
    webhook-timestamp: Unix seconds
    webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")> [v1,<...> ...]

where the endpoint's secret is "whsec_<base64 key>" (several signatures during a secret
rotation). Deliveries also carry payd's own `Payd-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret,
"<t>.<body>")>`; verify() checks that one only when a request has no Standard Webhooks headers.

The signature covers the body's exact bytes: pass the raw body as it arrived, never JSON parsed
and serialized again (other spacing or key order is another message, and fails)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from typing import Any, Iterable, Mapping, cast

from .models import Event

DEFAULT_TOLERANCE = 300  # seconds either side of now


class WebhookVerificationError(Exception):
    """The delivery is not proven to come from payd: a header missing, a timestamp outside the
    tolerance, no matching signature, or a body that is not JSON."""


def _header_map(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers by lower-case name: a dict, an http.client/email Message, a WSGI-style list."""
    items = headers.items() if hasattr(headers, "items") else headers
    return {str(name).lower(): str(value) for name, value in items}


def _key(secret: str) -> bytes:
    """The HMAC key inside "whsec_<base64>" (the prefix is optional; missing padding is
    restored)."""
    encoded = secret.removeprefix("whsec_")
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as e:
        raise WebhookVerificationError("the secret is not whsec_ and base64") from e


def _body_bytes(payload: bytes | str) -> bytes:
    return payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)


def sign(secret: str, msg_id: str, timestamp: int, payload: bytes | str) -> str:
    """The webhook-signature value for a message: "v1,<base64>"."""
    content = f"{msg_id}.{timestamp}.".encode() + _body_bytes(payload)
    mac = hmac.new(_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def _check_time(timestamp: str, now: float, tolerance: float) -> int:
    if not re.fullmatch(r"[0-9]{1,15}", timestamp):
        raise WebhookVerificationError("the webhook timestamp is not a number")
    when = int(timestamp)
    if now - when > tolerance:
        raise WebhookVerificationError("the webhook timestamp is too old")
    if when - now > tolerance:
        raise WebhookVerificationError("the webhook timestamp is in the future")
    return when


def _verify_standard(secret: str, h: dict[str, str], body: bytes, tolerance: float,
                     now: float) -> None:
    msg_id, timestamp, signatures = (h.get("webhook-id"), h.get("webhook-timestamp"),
                                     h.get("webhook-signature"))
    if not msg_id or timestamp is None or not signatures:
        raise WebhookVerificationError(
            "missing webhook-id, webhook-timestamp or webhook-signature header")
    _check_time(timestamp, now, tolerance)
    expected = base64.b64decode(sign(secret, msg_id, int(timestamp), body)[3:])
    for candidate in signatures.split():
        version, _, value = candidate.partition(",")
        if version != "v1":
            continue  # another scheme (v1a: asymmetric) this verifier does not hold a key for
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            return
    raise WebhookVerificationError("no webhook-signature matches")


def _verify_payd_signature(secret: str, header: str, body: bytes, tolerance: float,
                           now: float) -> None:
    fields = [part.strip().partition("=") for part in header.split(",")]
    timestamps = [value for name, _, value in fields if name == "t"]
    signatures = [value for name, _, value in fields if name == "v1"]
    if len(timestamps) != 1 or not signatures:
        raise WebhookVerificationError("Payd-Signature needs one t= and a v1=")
    _check_time(timestamps[0], now, tolerance)
    expected = hmac.new(secret.encode(), f"{timestamps[0]}.".encode() + body,
                        hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, given.lower()) for given in signatures):
        raise WebhookVerificationError("no Payd-Signature matches")


def verify(secret: str, headers: Mapping[str, str] | Iterable[tuple[str, str]],
           payload: bytes | str, tolerance: float = DEFAULT_TOLERANCE,
           now: float | None = None) -> Event:
    """Checks a delivery and returns its event, or raises WebhookVerificationError.

    secret: the endpoint's "whsec_..." secret. headers: the request's headers (any case).
    payload: the raw body, exactly as received. tolerance: seconds the timestamp may be from
    `now` (default: the current time), so a captured request cannot be replayed later."""
    h = _header_map(headers)
    body = _body_bytes(payload)
    now = time.time() if now is None else now
    if any(name in h for name in ("webhook-id", "webhook-timestamp", "webhook-signature")):
        _verify_standard(secret, h, body, tolerance, now)
    elif "payd-signature" in h:
        _verify_payd_signature(secret, h["payd-signature"], body, tolerance, now)
    else:
        raise WebhookVerificationError("no webhook-signature header")
    try:
        event: Any = json.loads(body)
    except ValueError as e:
        raise WebhookVerificationError("the body is not JSON") from e
    return cast(Event, event)
