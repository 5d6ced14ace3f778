"""The language-neutral conformance scenarios (clients/conformance/scenarios/*.json) replayed
against the scripted server (clients/conformance/server.py): for each, load it, configure the
client from its `client` and `api_key`, run its `call`, check `expect`, and check the server's
report (the requests it saw: their number, order, timing, keys and authorization)."""

import glob
import json
import os
import subprocess
import sys
import urllib.request

import pytest

import payd
from conftest import CONFORMANCE_DIR

SCENARIOS = sorted(glob.glob(os.path.join(CONFORMANCE_DIR, "scenarios", "*.json")))


@pytest.fixture(scope="module")
def server():
    proc = subprocess.Popen([sys.executable, os.path.join(CONFORMANCE_DIR, "server.py"),
                             "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(proc.stdout.readline())["port"]
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def control(url, method, path):
    data = b"" if method == "POST" else None
    request = urllib.request.Request(url + path, method=method, data=data)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.load(answer)


def run_call(client, call):
    """The scenario's call through the client's own API: ("result", body), ("items", ids) or
    ("error", PaydError)."""
    params = call["params"]
    try:
        if call["op"] == "create_payment":
            return "result", client.payments.create(**params,
                                                    idempotency_key=call.get("idempotency_key"))
        if call["op"] == "get_payment":
            return "result", client.payments.retrieve(params["id"])
        if call["op"] == "list_payments":
            items = client.payments.list(account=params["account_id"], limit=params["limit"])
            return "items", [p["id"] for p in items]
    except payd.PaydError as e:
        return "error", e
    raise AssertionError(f"unknown op {call['op']}")


def test_every_scenario_is_here():
    assert len(SCENARIOS) >= 10


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: os.path.basename(p)[:-5])
def test_scenario(server, path):
    name = os.path.basename(path)[:-5]
    scenario = control(server, "POST", f"/_conformance/load/{name}")
    policy = scenario["client"]
    client = payd.Client(scenario["api_key"], server,
                         max_retries=policy.get("max_retries", 4),
                         base_delay=policy.get("base_delay_ms", 1000) / 1000,
                         max_delay=policy.get("max_delay_ms", 30000) / 1000,
                         timeout=policy.get("timeout_ms", 30000) / 1000,
                         deadline=policy.get("deadline_ms", 120000) / 1000)
    kind, outcome = run_call(client, scenario["call"])
    expect = scenario["expect"]
    assert kind in expect, f"expected {expect}, got {kind}: {outcome}"
    if kind == "result":
        for member, value in expect["result"].items():
            assert outcome[member] == value, (member, outcome)
    elif kind == "items":
        assert outcome == expect["items"]
    else:
        assert isinstance(outcome, payd.PaydError)
        for field, value in expect["error"].items():
            assert getattr(outcome, field) == value, (field, getattr(outcome, field), str(outcome))
        if outcome.status == 0:
            assert isinstance(outcome, payd.APIConnectionError)
    report = control(server, "GET", "/_conformance/report")
    assert report["ok"], report["failures"]
    posts = [r for r in report["requests"] if r["method"] == "POST"]
    if kind == "error" and posts:  # the key the error reports is the one every attempt sent
        assert outcome.idempotency_key == posts[0]["idempotency_key"]
        assert outcome.attempts == len(report["requests"])
