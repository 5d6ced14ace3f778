"""`--processor http://…` holds no worker while the processor answers a charge or a refund.

A charge through an HTTP processor is started on the processor client's own thread (one libcurl
multi handle for every charge in flight), and its answer resumes the payment: with two workers,
many payments still wait on the processor at the same time. The simulator counts the charges it
holds at once, which says so without timing anything. Then a processor that never answers: the
payment gets 503 processor_unavailable after --processor-timeout, and its key stays resumable."""

import concurrent.futures
import contextlib
import json
import os
import socket
import threading

from conftest import Payd
from test_processor_sim import Sim

WORKERS = 2
PAYMENTS = 64
REFUNDS = 16
HOLD_MS = 300  # the simulator holds each call this long


@contextlib.contextmanager
def slow_processor_and_payd(tmp_path, name):
    """A simulator that holds every call HOLD_MS, and a payd with WORKERS workers in front of it:
    yields the simulator, a user and an account."""
    sim = Sim(str(tmp_path), args=["--latency-ms", str(HOLD_MS)]).start()
    server = Payd(str(tmp_path), args=["--live-test-tokens", "true", "--processor", sim.url, "--workers", str(WORKERS),
                                       "--rate-limit", "100000/s"])
    try:
        server.start()
        user = server.create_user(name)
        yield sim, user, user.create_account()
    finally:
        server.stop()
        sim.stop()


def most_held_at_once(sim, kind):
    """The most calls of this kind ("charges", "refunds") the simulator held at once; none is
    held any longer."""
    status, load = sim.request("GET", "/concurrency")
    assert status == 200 and load[f"{kind}_in_flight"] == 0, load
    print(f"most {kind} held at once: {load[f'most_{kind}_in_flight']}")
    return load[f"most_{kind}_in_flight"]


def all_created(results):
    assert [r.status for r in results] == [201] * len(results), \
        [r for r in results if r.status != 201][:3]


def test_charges_overlap_beyond_the_workers(tmp_path):
    with slow_processor_and_payd(tmp_path, "overlap") as (sim, user, account):
        with concurrent.futures.ThreadPoolExecutor(PAYMENTS) as pool:
            all_created(list(pool.map(lambda i: user.pay(account, idem=f"overlap-{i}"),
                                      range(PAYMENTS))))
        assert sim.stats()["charges"] == PAYMENTS
        # a worker per charge would cap this at WORKERS
        assert most_held_at_once(sim, "charges") > WORKERS
        assert user.get(f"/v1/accounts/{account['id']}").json["balance"] == 1000 * PAYMENTS


def test_refunds_overlap_beyond_the_workers(tmp_path):
    """A refund's processor call is started the same way: refunds of many payments wait on the
    processor at once, more than the workers could carry."""
    with slow_processor_and_payd(tmp_path, "overlap-refunds") as (sim, user, account):
        with concurrent.futures.ThreadPoolExecutor(REFUNDS) as pool:
            paid = list(pool.map(lambda i: user.pay(account, idem=f"pay-{i}"), range(REFUNDS)))
            all_created(paid)
            all_created(list(pool.map(
                lambda r: user.post(f"/v1/payments/{r.json['id']}/refunds", {"amount": 100},
                                    idem=f"refund-{r.json['id']}"), paid)))
        assert sim.stats()["refunds"] == REFUNDS
        assert most_held_at_once(sim, "refunds") > WORKERS
        assert user.get(f"/v1/accounts/{account['id']}").json["balance"] == 900 * REFUNDS


class SilentProcessor:
    """Accepts connections and reads the requests, never answers."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.requests = []
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            data += chunk
        self.requests.append(data)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept(), which close alone does not
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            c.close()


def test_silent_processor_times_out_and_the_key_stays_resumable(tmp_path):
    silent = SilentProcessor()
    server = Payd(str(tmp_path), args=["--live-test-tokens", "true", "--processor", f"http://127.0.0.1:{silent.port}",
                                       "--processor-timeout", "500ms", "--workers", "1"])
    sim = None
    try:
        server.start()
        user = server.create_user("silence")
        account = user.create_account()
        key = "silent-" + os.urandom(6).hex()
        r = user.pay(account, amount=1500, idem=key)
        assert r.status == 503, r
        assert r.json["code"] == "processor_unavailable" and r.header("retry-after"), r
        # the charge went out as the blocking client sends it: the processor key, JSON
        assert len(silent.requests) == 1, silent.requests
        head = silent.requests[0].decode(errors="replace").lower()
        assert head.startswith("post /charges ")
        assert "\r\nidempotency-key: " in head and "\r\ncontent-type: application/json" in head
        lines = [json.loads(l) for l in server.read_log().splitlines() if l.startswith("{")]
        assert any(l["msg"] == "processor call timed out" and
                   l.get("request_id") == r.header("x-request-id") for l in lines), lines[-5:]
        assert user.get(f"/v1/accounts/{account['id']}").json["balance"] == 0

        # the processor comes back on the same address: the same key finishes the payment
        silent.close()
        sim = Sim(str(tmp_path), port=silent.port).start()
        r = user.pay(account, amount=1500, idem=key)
        assert r.status == 201, r
        assert sim.stats()["charges"] == 1
        assert user.pay(account, amount=1500, idem=key).raw == r.raw
        assert user.get(f"/v1/accounts/{account['id']}").json["balance"] == 1500
    finally:
        server.stop()
        if sim:
            sim.stop()
        silent.close()
