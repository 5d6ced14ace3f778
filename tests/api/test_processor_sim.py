"""`payd processor-sim` and `payd serve --processor http://…` (§5 "Simulated processor").

First the processor protocol itself, spoken to the simulator directly: deduplication on the
Idempotency-Key, declines, looking a charge up by key, refunds, /stats and the fault flags.
Then payd in front of it: an approved and a declined payment, a refund, and a charge whose
answer is lost, which a retry with the same Idempotency-Key must finish without charging twice."""

import http.client
import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.parse

import pytest

from conftest import PAYD, Payd, free_port

VISA = {"amount": 1000, "currency": "USD", "source": "tok_visa"}


class Dropped(Exception):
    """The simulator closed the connection without an answer."""


class Sim:
    """One `payd processor-sim` process on its own database file."""

    def __init__(self, tmpdir, args=(), port=None, db=None):
        self.tmpdir = tmpdir
        self.db = db or os.path.join(tmpdir, "processor-sim.db")
        self.args = list(args)
        self.port = port or free_port()
        self.proc = None
        self.log_path = os.path.join(tmpdir, "processor-sim.log")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [PAYD, "processor-sim", "--listen", f"127.0.0.1:{self.port}", "--db", self.db]
                + self.args, stdout=log, stderr=log)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"processor-sim exited {self.proc.returncode}: {self.read_log()[-2000:]}")
            try:
                if self.request("GET", "/stats")[0] == 200:
                    return self
            except (OSError, Dropped):
                time.sleep(0.05)
        raise RuntimeError("processor-sim did not start")

    def stop(self):
        """SIGTERM; returns the exit code (killing it if it does not stop)."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def request(self, method, path, body=None, key=None, raw_body=None):
        """(status, parsed JSON body); raises Dropped when the connection closes unanswered."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            headers = {}
            if key is not None:
                headers["Idempotency-Key"] = key
            data = raw_body
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=headers)
            try:
                r = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError) as e:
                raise Dropped() from e
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
        finally:
            conn.close()

    def charge(self, key, **body):
        return self.request("POST", "/charges", {**VISA, **body}, key=key)

    def find(self, key):
        return self.request("GET", "/charges?idempotency_key=" + urllib.parse.quote(key, safe=""))

    def refund(self, key, charge_id, amount=1000):
        return self.request("POST", "/refunds", {"charge_id": charge_id, "amount": amount}, key=key)

    def stats(self):
        status, body = self.request("GET", "/stats")
        assert status == 200, body
        return body

    def charge_rows(self):
        db = sqlite3.connect(self.db, timeout=10)
        try:
            return db.execute("SELECT processor_key, charge_id FROM processor_charges").fetchall()
        finally:
            db.close()


@pytest.fixture
def start_sim(tmp_path):
    """Starts simulators on demand; every one of them is stopped when the test ends."""
    sims = []

    def start(args=(), port=None, db=None):
        s = Sim(str(tmp_path), args=args, port=port, db=db)
        sims.append(s)
        return s.start()

    try:
        yield start
    finally:
        for s in sims:
            s.stop()


@pytest.fixture
def start_payd(tmp_path):
    """Starts payd servers in front of a simulator; stopped when the test ends."""
    servers = []

    def start(sim):
        s = Payd(str(tmp_path), args=["--live-test-tokens", "true", "--processor", sim.url])
        servers.append(s)
        return s.start()

    try:
        yield start
    finally:
        for s in servers:
            s.stop()


# ---- the protocol, spoken to the simulator ----


def test_same_key_returns_the_same_charge(start_sim):
    sim = start_sim()
    before = sim.stats()
    status, first = sim.charge("key-1")
    assert status == 200, first
    assert first["id"].startswith("ch_") and first["status"] == "succeeded"
    assert "decline_code" not in first
    status, again = sim.charge("key-1")
    assert (status, again) == (200, first)
    after = sim.stats()
    assert after["charges"] == before["charges"] + 1
    assert after["deduplicated"] == before["deduplicated"] + 1

    status, other = sim.charge("key-2")
    assert status == 200 and other["id"] != first["id"]


@pytest.mark.parametrize("source,code", [("tok_chargeDeclined", "generic_decline"),
                                         ("tok_insufficientFunds", "insufficient_funds")])
def test_declines_carry_a_decline_code(start_sim, source, code):
    sim = start_sim()
    status, body = sim.charge("decline-" + source, source=source)
    assert status == 200, body
    assert body["status"] == "declined" and body["decline_code"] == code
    assert body["id"].startswith("ch_")
    # a decline is a result too: the same key gives it back
    assert sim.charge("decline-" + source, source=source) == (200, body)


def test_find_charge_by_key(start_sim):
    sim = start_sim()
    key = "odd key&with=chars/+?#%"  # must survive the query string
    status, charged = sim.charge(key)
    assert status == 200
    assert sim.find(key) == (200, charged)

    status, body = sim.find("never-used")
    assert status == 404, body
    assert sim.request("GET", "/charges")[0] == 400

    status, declined = sim.charge("find-declined", source="tok_chargeDeclined")
    assert sim.find("find-declined") == (200, declined)


def test_refunds_are_deduplicated(start_sim):
    sim = start_sim()
    _, charge = sim.charge("refund-charge")
    before = sim.stats()
    status, refund = sim.refund("refund-1", charge["id"], 400)
    assert status == 200, refund
    assert refund["id"].startswith("rf_") and refund["status"] == "succeeded"
    assert sim.refund("refund-1", charge["id"], 400) == (200, refund)
    status, other = sim.refund("refund-2", charge["id"], 600)
    assert status == 200 and other["id"] != refund["id"]
    after = sim.stats()
    assert after["refunds"] == before["refunds"] + 2
    assert after["deduplicated"] == before["deduplicated"] + 1


def test_bad_requests(start_sim):
    sim = start_sim()
    assert sim.request("POST", "/charges", VISA)[0] == 400  # no Idempotency-Key
    assert sim.request("POST", "/refunds", {"charge_id": "ch_x", "amount": 1})[0] == 400
    assert sim.request("POST", "/charges", key="k", raw_body=b"{not json")[0] == 400
    assert sim.request("POST", "/charges", key="k", raw_body=b"[1, 2]")[0] == 400
    assert sim.request("POST", "/charges", {"amount": "10", "currency": "USD",
                                            "source": "tok_visa"}, key="k")[0] == 400
    assert sim.request("POST", "/refunds", {"amount": 1}, key="k")[0] == 400
    assert sim.request("GET", "/nope")[0] == 404
    assert sim.request("DELETE", "/charges")[0] == 405
    assert sim.stats()["charges"] == 0


def test_large_body_in_pieces(start_sim):
    """A body that arrives over several reads is gathered before it is parsed."""
    sim = start_sim()
    body = dict(VISA, padding="x" * 20000)
    status, charge = sim.request("POST", "/charges", body, key="big")
    assert status == 200 and charge["status"] == "succeeded"


def test_fail_before_charges_nothing(start_sim):
    sim = start_sim(["--fail-before", "1.0"])
    status, _ = sim.charge("fb-1")
    assert status == 500
    assert sim.find("fb-1")[0] == 404
    assert sim.stats()["charges"] == 0


def test_fail_after_charges_then_loses_the_answer(start_sim):
    sim = start_sim(["--fail-after", "1.0", "--seed", "7"])
    outcomes = set()
    for i in range(12):
        key = f"fa-{i}"
        try:
            status, _ = sim.charge(key)
            assert status == 500
            outcomes.add("500")
        except Dropped:
            outcomes.add("dropped")
        status, charge = sim.find(key)
        assert status == 200 and charge["status"] == "succeeded"
    assert outcomes == {"500", "dropped"}
    assert sim.stats()["charges"] == 12


def test_latency(start_sim):
    sim = start_sim(["--latency-ms", "300"])
    t = time.monotonic()
    assert sim.charge("slow-1")[0] == 200
    assert time.monotonic() - t >= 0.3


def test_stops_cleanly_and_keeps_its_charges(start_sim, tmp_path):
    sim = start_sim()
    _, charge = sim.charge("durable")
    assert sim.stop() == 0
    again = start_sim(port=sim.port, db=sim.db)
    assert again.find("durable") == (200, charge)
    assert again.charge("durable") == (200, charge)
    assert again.stats() == {"charges": 0, "refunds": 0, "deduplicated": 1, "captures": 0,
                             "releases": 0}


def test_stopping_answers_calls_in_flight_and_refuses_new_ones(start_sim):
    """SIGTERM while a charge is being answered: that charge is answered and kept, a request on a
    connection still open meanwhile is refused 503, and the process exits 0."""
    sim = start_sim(["--latency-ms", "1500"])
    idle = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=30)
    idle.request("GET", "/stats")
    assert idle.getresponse().read()  # keep-alive: this connection stays open
    answers = []
    slow = threading.Thread(target=lambda: answers.append(sim.charge("in-flight")))
    slow.start()
    time.sleep(0.5)  # the charge is in its latency sleep
    sim.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    idle.request("POST", "/charges", body=json.dumps(VISA).encode(),
                 headers={"Idempotency-Key": "late", "Content-Type": "application/json"})
    late = idle.getresponse()
    assert late.status == 503 and json.loads(late.read())["error"] == "shutting_down"
    idle.close()
    slow.join(30)
    assert answers and answers[0][0] == 200 and answers[0][1]["status"] == "succeeded", answers
    assert sim.proc.wait(15) == 0
    again = start_sim(port=sim.port, db=sim.db)
    assert again.find("in-flight") == (200, answers[0][1])
    assert again.find("late")[0] == 404


def test_bad_flags():
    out = subprocess.run([PAYD, "processor-sim", "--fail-after", "2"], capture_output=True,
                         timeout=30)
    assert out.returncode == 2
    out = subprocess.run([PAYD, "processor-sim", "--bogus", "1"], capture_output=True, timeout=30)
    assert out.returncode == 2


# ---- payd in front of the simulator ----


def test_payments_through_the_simulator(start_sim, start_payd):
    sim = start_sim()
    server = start_payd(sim)
    user = server.create_user("sim-user")
    account = user.create_account()

    r = user.pay(account, source="tok_visa", idem="pay-visa")
    assert r.status == 201, r
    payment = r.json
    assert payment["status"] == "succeeded"
    rows = sim.charge_rows()
    assert [charge_id for _, charge_id in rows] == [payment["processor_charge_id"]]
    processor_key = rows[0][0]
    assert sim.find(processor_key)[1]["id"] == payment["processor_charge_id"]

    # a replay comes from payd's key store; the processor is not asked again
    r = user.pay(account, source="tok_visa", idem="pay-visa")
    assert r.status == 201 and r.json["id"] == payment["id"]
    assert sim.stats()["charges"] == 1

    r = user.pay(account, source="tok_chargeDeclined", idem="pay-declined")
    assert r.status == 402, r
    assert r.json["code"] == "card_declined"
    assert r.json["decline_code"] == "generic_decline"
    assert sim.stats()["charges"] == 2


def test_refund_through_the_simulator(start_sim, start_payd):
    sim = start_sim()
    server = start_payd(sim)
    user = server.create_user("sim-refunder")
    account = user.create_account()
    payment = user.pay(account, source="tok_visa").json

    r = user.post(f"/v1/payments/{payment['id']}/refunds", {"amount": 400}, idem="refund-1")
    assert r.status == 201, r
    assert r.json["amount"] == 400
    assert sim.stats()["refunds"] == 1
    r = user.post(f"/v1/payments/{payment['id']}/refunds", {"amount": 400}, idem="refund-1")
    assert r.status == 201
    assert sim.stats()["refunds"] == 1


def test_lost_answer_is_finished_by_a_retry(start_sim, start_payd):
    sim = start_sim(["--fail-after", "1.0", "--lose-by", "500"])
    server = start_payd(sim)
    user = server.create_user("in-doubt")
    account = user.create_account()

    r = user.pay(account, source="tok_visa", idem="in-doubt-1")
    assert r.status == 503, r
    assert r.json["code"] == "processor_unavailable"
    assert r.header("Retry-After")
    assert sim.stats()["charges"] == 1  # charged, but payd never heard
    rows = sim.charge_rows()
    assert len(rows) == 1

    # the processor comes back healthy, on the same address and with the same records
    assert sim.stop() == 0
    healthy = start_sim(port=sim.port, db=sim.db)

    r = user.pay(account, source="tok_visa", idem="in-doubt-1")
    assert r.status == 201, r
    assert r.json["processor_charge_id"] == rows[0][1]
    assert healthy.stats()["charges"] == 0  # the retry found the first charge: still one in all
    assert healthy.charge_rows() == rows
    balance = user.get(f"/v1/accounts/{account['id']}").json
    assert balance["balance"] == 1000, balance


# ---- holds (§17): authorize now, capture later ----


def test_holds_at_the_simulator(start_sim):
    sim = start_sim()
    status, hold = sim.charge("hold-1", capture=False)
    assert status == 200 and hold["status"] == "authorized", hold
    assert sim.charge("hold-1", capture=False)[1] == hold  # deduplicated
    cid = hold["id"]
    path = f"/charges/{cid}"
    status, cap = sim.request("POST", path + "/capture", {"amount": 300, "final": False},
                              key="cap-1")
    assert status == 200 and cap["status"] == "succeeded", cap
    assert sim.request("POST", path + "/capture", {"amount": 300, "final": False},
                       key="cap-1")[1] == cap  # the same capture again: captured once
    status, shown = sim.request("GET", path)
    assert (shown["status"], shown["amount"], shown["captured"], shown["released"],
            shown["captures"]) == ("authorized", 1000, 300, 0, 1), shown
    # a final capture releases what it says (or all that remains)
    status, fin = sim.request("POST", path + "/capture", {"amount": 200, "final": True,
                                                          "release": 100}, key="cap-2")
    assert status == 200, fin
    status, shown = sim.request("GET", path)
    assert (shown["captured"], shown["released"]) == (500, 100)
    # past the hold: refused, nothing moves
    status, body = sim.request("POST", path + "/capture", {"amount": 401}, key="cap-3")
    assert status == 409 and body["error"] == "hold_exceeded", body
    status, rel = sim.request("POST", path + "/release", {}, key="rel-1")
    assert status == 200, rel
    assert sim.request("POST", path + "/release", {}, key="rel-1")[1] == rel
    status, shown = sim.request("GET", path)
    assert (shown["captured"], shown["released"], shown["captures"], shown["releases"]) == (
        500, 500, 2, 1)
    assert sim.stats()["captures"] == 2 and sim.stats()["releases"] == 1
    assert sim.request("POST", "/charges/ch_nope/capture", {"amount": 1}, key="x")[0] == 404
    assert sim.request("POST", path + "/capture", {"final": True}, key="y")[0] == 400
    assert sim.request("POST", path + "/capture", {"amount": 1})[0] == 400  # no key


def test_capture_answer_lost_then_found(start_sim):
    """--fail-after applies to captures too: made, then the answer lost; the same key again
    returns the same capture and captures nothing more."""
    sim = start_sim(["--fail-after", "1.0", "--lose-by", "500", "--seed", "1"])
    try:
        sim.charge("hold-lost", capture=False)
    except Dropped:
        pass
    healthy_db = sim.db
    assert sim.stop() == 0
    healthy = start_sim(port=sim.port, db=healthy_db)
    status, hold = healthy.charge("hold-lost", capture=False)
    assert status == 200 and hold["status"] == "authorized"
    assert healthy.stop() == 0
    lossy = start_sim(["--fail-after", "1.0", "--lose-by", "500"], port=sim.port, db=healthy_db)
    path = f"/charges/{hold['id']}"
    assert lossy.request("POST", path + "/capture", {"amount": 100}, key="c1")[0] == 500
    assert lossy.stop() == 0
    healthy = start_sim(port=sim.port, db=healthy_db)
    status, cap = healthy.request("POST", path + "/capture", {"amount": 100}, key="c1")
    assert status == 200
    status, shown = healthy.request("GET", path)
    assert (shown["captured"], shown["captures"]) == (100, 1), shown


def test_manual_payments_through_the_simulator(start_sim, start_payd):
    sim = start_sim()
    server = start_payd(sim)
    user = server.create_user("sim-holder", rate_limit="100000/s")
    account = user.create_account()
    r = user.pay(account, 1000, idem="hold-pay", capture_method="manual")
    assert r.status == 201 and r.json["status"] == "requires_capture", r
    p = r.json
    r = user.post(f"/v1/payments/{p['id']}/capture",
                  {"amount_to_capture": 250, "final_capture": False}, idem="cap-a")
    assert r.status == 200 and r.json["amount_captured"] == 250, r
    r = user.post(f"/v1/payments/{p['id']}/cancel", {}, idem="cancel-a")
    assert r.status == 200 and r.json["status"] == "succeeded", r
    status, shown = sim.request("GET", f"/charges/{p['processor_charge_id']}")
    assert (shown["captured"], shown["released"]) == (250, 750), shown
    server.stop()
    out = subprocess.run([PAYD, "ledger", "verify", "--db", server.db, "--processor", sim.url],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
