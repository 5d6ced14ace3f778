"""Webhook delivery under failure (§15), with a compressed retry schedule: a receiver that
refuses 15 % of attempts with 500 and drops the connection on another 15 %, while payd is
killed with SIGKILL twice in the middle of the run. Every event reaches the receiver at least
once, the receiver's deduplicated set equals the event table, and the attempts list explains
every retry. On PostgreSQL two nodes share the database (one of them is the one killed): the
receiver never sees two attempts of one event in flight at the same moment."""

import json
import os
import sys
import threading
import time
from collections import Counter

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../api"))
from conftest import BACKEND, Payd, free_port, fresh_server, verify_ledger  # noqa: E402,F401
from receiver import Receiver, sign  # noqa: E402

FLAGS = ["--rate-limit", "100000/s", "--webhook-retry-scale", "0.0003", "--webhook-lease", "11s"]
LOAD_SECONDS = 8
KILLS_AT = (2.5, 5.5)


class Load:
    """Changes made steadily by one client, riding out the server's absences: a request that
    fails for want of a server is sent again with the same Idempotency-Key."""

    def __init__(self, nodes, user_key):
        self.nodes, self.key = nodes, user_key
        self.stop = threading.Event()
        self.made = 0

    def call(self, i, method, path, body, idem=None):
        while True:
            node = self.nodes[i % len(self.nodes)]
            h = {"Idempotency-Key": idem} if idem else {}
            try:
                r = node.request(method, path, key=self.key, body=body, headers=h, timeout=10)
                if r.status < 500:
                    return r
            except OSError:
                pass
            i += 1
            time.sleep(0.05)

    def run(self):
        account = self.call(0, "POST", "/v1/accounts", {"currency": "USD"}).json
        i = 0
        while not self.stop.is_set():
            i += 1
            if i % 5 == 0:
                self.call(i, "POST", "/v1/accounts", {"currency": "EUR"})
            else:
                self.call(i, "POST", "/v1/payments",
                          {"account_id": account["id"], "amount": 100 + i, "currency": "USD",
                           "source": "tok_chargeDeclined" if i % 7 == 0 else "tok_visa"},
                          idem=os.urandom(8).hex())
            self.made += 1
            time.sleep(0.01)


def all_pages(user_request, path):
    out, cursor = [], None
    while True:
        r = user_request(f"{path}?limit=100" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        out += r.json["data"]
        if not r.json["has_more"]:
            return out
        cursor = r.json["next_cursor"]


def test_every_event_delivered_through_failures_and_kills(tmp_path):
    rx = Receiver(fail_rate=0.15, drop_rate=0.15, hold=0.01, seed=7)
    # node ids are leased (--node-id auto): a node restarted after kill -9 takes a free one
    # rather than wait for its old lease to run out
    nodes = [Payd(str(tmp_path), args=FLAGS)]
    nodes[0].start()
    if BACKEND == "postgres":  # a second node on the same database
        second = tmp_path / "second"
        second.mkdir()
        nodes.append(Payd(str(second), args=FLAGS, db=nodes[0].db))
        nodes[1].start()
    try:
        user = nodes[0].create_user("chaos")
        secrets = {}
        for path in ("/a", "/b"):
            ep = user.post("/v1/webhook_endpoints", {"url": rx.url + path, "events": ["*"]})
            assert ep.status == 201, ep
            secrets["/hooks" + path] = (ep.json["id"], ep.json["secret"])
        # an endpoint nobody answers: its retries must not hold up the others
        dead = user.post("/v1/webhook_endpoints",
                         {"url": f"http://127.0.0.1:{free_port()}/dead", "events": ["*"]})
        assert dead.status == 201

        load = Load(nodes, user.key)
        worker = threading.Thread(target=load.run)
        worker.start()
        started, kills = time.time(), []
        for at in KILLS_AT:
            time.sleep(max(0, started + at - time.time()))
            kills.append(time.time())
            nodes[0].kill9()
            time.sleep(0.3)
            nodes[0].start(port=nodes[0].port)
        time.sleep(max(0, started + LOAD_SECONDS - time.time()))
        load.stop.set()
        worker.join()
        assert load.made > 100

        events = {e["id"]: e for e in all_pages(user.get, "/v1/events")}
        assert len(events) == nodes[0].sql("SELECT COUNT(*) FROM events")

        def delivered_everywhere(r):
            with r.lock:
                ok = {(q["path"], q["event_id"]) for q in r.requests if q["outcome"] == "ok"}
            return all((p, e) in ok for p in secrets for e in events)

        assert rx.wait_for(delivered_everywhere, timeout=100), (
            f"{len(events)} events, delivered {len({(q['path'], q['event_id']) for q in rx.requests if q['outcome'] == 'ok'})}")

        with rx.lock:
            requests = list(rx.requests)
        for path, (endpoint_id, secret) in secrets.items():
            mine = [q for q in requests if q["path"] == path]
            # the deduplicated set equals the event table, body for body, and every request
            # carried a good signature
            dedup = {q["event_id"]: json.loads(q["body"]) for q in mine if q["outcome"] == "ok"}
            assert dedup == events
            for q in mine:
                t = int(q["signature"].split(",")[0][2:])
                assert q["signature"] == sign(secret, t, q["body"])
            # the attempts list explains each retry: every recorded attempt matches what the
            # receiver did with it, and a request with no record was cut off by a kill
            time.sleep(0.5)
            attempts = all_pages(user.get, f"/v1/webhook_endpoints/{endpoint_id}/deliveries")
            recorded = {}
            for a in attempts:
                recorded.setdefault(a["event_id"], []).append(a)
            seen = {}
            for q in mine:
                seen.setdefault(q["event_id"], []).append(q)
            for event_id, tries in seen.items():
                tries_made = recorded.get(event_id, [])
                tries_made.sort(key=lambda a: a["attempt"])
                assert [a["attempt"] for a in tries_made] == list(range(1, len(tries_made) + 1))
                kind = {"ok": 200, "failed": 500, "dropped": None}
                assert not (Counter(a["response_status"] for a in tries_made) -
                            Counter(kind[q["outcome"]] for q in tries)), (event_id, tries_made)
                for a in tries_made[:-1]:
                    assert a["outcome"] == "retrying" and a["error"] and a["next_attempt_at"]
                if any(q["outcome"] == "ok" for q in tries) and tries_made:
                    assert tries_made[-1]["outcome"] == "delivered" or len(tries) > len(tries_made)
                # a request the receiver saw but payd has no record of is explained by a kill
                # (answered just before payd died, so made again after the restart) or by
                # libcurl itself: when a reused keep-alive connection closes without an answer
                # it sends the same bytes (same signature, timestamp included) once more on a
                # fresh connection, within the same attempt; that connection's SYN may be
                # retransmitted (1 s, then 3 s) on a loaded machine, hence the window
                unrecorded = len(tries) - len(tries_made)
                by_kill = [q for q in tries if any(k - 2 <= q["at"] <= k + 1 for k in kills)]
                by_reuse = [q for j, q in enumerate(tries) if q["outcome"] == "dropped" and any(
                    r["signature"] == q["signature"] and 0 <= r["at"] - q["at"] < 8
                    for r in tries[j + 1:])]
                assert unrecorded <= len(by_kill) + len(by_reuse), (
                    event_id, [(q["outcome"], q["at"]) for q in tries], tries_made, kills)
        assert rx.overlaps == [], rx.overlaps
        # the money moved under the same kills adds up (docs/ledger.md)
        summary = verify_ledger(nodes[0].db)
        print(f"ledger verify: {summary['entries']} entries, 0 violations")
    finally:
        for n in nodes:
            n.stop()
        rx.close()
