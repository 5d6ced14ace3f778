"""A node id's high-water mark across restarts (docs/concurrency.md, "Node ids: leases"): payd
started again with its clock set back refuses to start when the clock is far behind the newest id
its node id issued, waits when it is a little behind, and no id it issues is older than one issued
before. Debian's libfaketime sets the clock back (preloaded, so the process is payd itself)."""

import glob
import json
import os
import subprocess
import time

import pytest

from conftest import PAYD, Payd, User, free_port

FAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
pytestmark = pytest.mark.skipif(not FAKETIME, reason="libfaketime not installed (faketime)")

GENERATOR_DRIFT_S = 5  # max_drift_ms (src/core/ids.c): a clock this far behind is absorbed


def clock_set_back(offset):
    return {"LD_PRELOAD": FAKETIME[-1], "FAKETIME": offset, "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # the sanitizer build's runtime must otherwise come first in the library list
            "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}


def payments(user, account, count):
    ids = []
    for _ in range(count):
        r = user.pay(account)
        assert r.status == 201, r
        ids.append(r.json["id"])
    return ids


def started_with_clock(tmp_path, db, offset):
    node = Payd(str(tmp_path), env=clock_set_back(offset), db=db)
    began = time.monotonic()
    node.start()
    return node, time.monotonic() - began


def test_a_clock_set_back_is_refused_or_waited_for_and_ids_never_go_back(tmp_path):
    first = Payd(str(tmp_path)).start()
    user = first.create_user("clock")
    account = user.create_account()
    issued = payments(user, account, 3)
    assert first.stop() == 0

    # ten minutes behind: refused, with one JSON line saying why, and nothing served
    refused = subprocess.run(
        [PAYD, "serve", "--listen", f"127.0.0.1:{free_port()}", "--db", first.db],
        env=dict(os.environ, **clock_set_back("-10m")), capture_output=True, text=True,
        timeout=60)
    assert refused.returncode != 0, refused
    lines = [json.loads(line) for line in refused.stderr.splitlines() if line.startswith("{")]
    assert lines and lines[-1]["msg"] == "payd cannot start", refused.stderr
    assert "behind the newest id node id" in lines[-1]["error"], lines[-1]
    assert "correct the clock" in lines[-1]["error"], lines[-1]

    # nine seconds behind: more than the generator absorbs, so it waits, says so, then serves
    waited, took = started_with_clock(tmp_path, first.db, "-9s")
    me = User(waited, user.id, user.key)
    later = payments(me, account, 3)
    assert waited.stop() == 0
    waits = [json.loads(line) for line in waited.read_log().splitlines()
             if "waiting for it to pass" in line]
    assert waits, waited.read_log()[-1500:]
    behind_s = waits[-1]["behind_ms"] / 1000
    assert GENERATOR_DRIFT_S < behind_s <= 9, waits[-1]
    assert took >= behind_s - 0.5, f"served {took:.1f} s after start, {behind_s:.1f} s behind"
    assert min(later) > max(issued), (issued, later)

    # a few seconds behind that one (the generator absorbs it): served at once, and the ids go
    # on from the newest one, stamped ahead of this clock until it catches up
    absorbed, _ = started_with_clock(tmp_path, first.db, "-13s")
    me = User(absorbed, user.id, user.key)
    last = payments(me, account, 3)
    assert absorbed.stop() == 0
    assert min(last) > max(later), (later, last)
    assert sorted(issued + later + last) == issued + later + last
