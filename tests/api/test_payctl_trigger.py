"""payctl trigger (docs/api.md §13, docs/client.md): in test mode, for every event type a client
can cause, the command makes the objects whose change fires it, and the event is then in
/v1/events; a live key is refused before anything is made; a type that cannot be triggered is a
usage error."""

import json
import os
import subprocess

import pytest

from conftest import PAYCTL

# every event type but webhook_endpoint.disabled, which follows days of failed deliveries
TRIGGERABLE = [
    "account.created", "payment.succeeded", "payment.failed", "payment.authorized",
    "payment.captured", "payment.canceled", "refund.succeeded", "order.created",
    "order.status_changed", "transfer.succeeded", "transfer.failed", "reservation.created",
]


def trigger(server, key, event):
    env = dict(os.environ, PAYD_URL=server.url, PAYD_API_KEY=key)
    return subprocess.run([PAYCTL, "trigger", event], env=env, capture_output=True, text=True,
                          timeout=60)


def events_of(user, key, event):
    r = user.server.request("GET", f"/v1/events?type={event}&limit=100", key=key)
    assert r.status == 200, r
    return r.json["data"]


def test_the_types_are_the_api_s():
    with open(os.path.join(os.path.dirname(__file__), "../../docs/openapi.json")) as f:
        spec = json.load(f)
    types = set(spec["components"]["schemas"]["EventType"]["enum"])
    assert set(TRIGGERABLE) | {"webhook_endpoint.disabled"} == types


@pytest.mark.parametrize("event", TRIGGERABLE)
def test_trigger_fires_the_event_in_test_mode(server, event):
    user = server.create_user(f"trigger-{event}")
    before = len(events_of(user, user.test_key, event))
    out = trigger(server, user.test_key, event)
    assert out.returncode == 0, out.stderr
    made = [json.loads(line) for line in out.stdout.splitlines()]
    assert made and all(m.get("livemode") is False for m in made if "object" in m and
                        m["object"] != "list"), made
    after = events_of(user, user.test_key, event)
    assert len(after) == before + 1, (event, after)
    assert after[0]["livemode"] is False
    # nothing of it reached live mode
    assert events_of(user, user.key, event) == []


def test_a_live_key_is_refused_and_nothing_is_made(server):
    user = server.create_user("trigger-live")
    out = trigger(server, user.key, "payment.succeeded")
    assert out.returncode == 2 and "test mode only" in out.stderr, out
    assert out.stdout == ""
    r = server.request("GET", "/v1/accounts", key=user.key)
    assert r.status == 200 and r.json["data"] == []


def test_an_event_that_cannot_be_triggered(server):
    user = server.create_user("trigger-unknown")
    for event in ("webhook_endpoint.disabled", "payment.exploded"):
        out = trigger(server, user.test_key, event)
        assert out.returncode == 2 and "cannot be triggered" in out.stderr, out
