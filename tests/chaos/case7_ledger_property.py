"""A property test of the books (docs/ledger.md): many random operations against payd while it
is killed -9 and its processor fails, then the books must add up.

Clients (threads, each with its own random stream) pick operations at random: automatic charges
(approved, declined, answers lost by the processor), authorizations (manual capture, docs/api.md
§17) and their captures (partial or whole, final or not, some past what is capturable) and
cancels, refunds of a payment they were answered (partial or whole, some past what is left),
transfers between the user's accounts (some past the balance), and same-key retries of an
operation already answered, whose answer must come back the same. Every request is resent with its key until it is final, as a client would. Meanwhile
payd is killed -9 at random moments (at least --kills times). The processor is the builtin one
(on SQLite: a kill takes it down with payd, in the middle of its own writes) or, with --sim,
`payd processor-sim` failing a few per cent of calls before or after charging, itself killed now
and then (`payd ledger verify` then asks it for each charge, one request each: the longer run
stays on the builtin processor).

At the end: every key settled, `payd ledger verify` with the processor's side (0 violations:
each hold's captured + released + capturable = amount, each capture and release recorded once on
both sides), no double charge, no double capture and no orphaned charge at the processor, every payment a client was answered
is stored, every retry answered what the first answer said. One line of figures.

    python3 tests/chaos/case7_ledger_property.py                 (SQLite, 100,000 operations)
    python3 tests/chaos/case7_ledger_property.py --ops 20000 --pg --sim
                          (two nodes on PostgreSQL, charging through processor-sim: case8)
"""
import argparse
import http.client
import json
import os
import random
import threading
import time

import chaos

SOURCES = ["tok_visa"] * 17 + ["tok_mastercard", "tok_chargeDeclined", "tok_lostResponse"]
# answers kept under their key and replayed (docs/idempotency.md); others release it
STORED = (200, 201, 402, 409)
# how often each operation is picked, in twentieths
WEIGHTS = {"charge": 6, "authorize": 3, "capture": 2, "cancel": 1, "refund": 3, "transfer": 3,
           "retry": 2}
CANCEL_REASONS = ["requested_by_customer", "abandoned", "fraudulent", "duplicate"]


class Session:
    """One keep-alive connection to whichever node is up, reopened after any failure."""

    def __init__(self, urls, api_key):
        self.urls, self.api_key, self.conn, self.turn = urls, api_key, None, 0

    def once(self, method, path, body, idem):
        if self.conn is None:
            host, port = self.urls[self.turn % len(self.urls)].rsplit("/", 1)[-1].split(":")
            self.turn += 1
            self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers, data = chaos.request_parts(self.api_key, body, idem)
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            raw = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return r.status, {k.lower(): v for k, v in r.getheaders()}, raw
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise OSError("connection lost")

    def until_final(self, method, path, body=None, idem=None, counts=None, deadline_s=180):
        deadline, attempt = time.time() + deadline_s, 0
        while time.time() < deadline:
            attempt += 1
            try:
                status, headers, raw = self.once(method, path, body, idem)
            except OSError:
                time.sleep(0.02 + random.random() * 0.05)
                continue
            if chaos.is_final(status, raw):
                return status, headers, raw
            if counts is not None:
                counts["retried"] += 1
            time.sleep(min(0.5, 0.02 * attempt) * (0.7 + 0.6 * random.random()))
        raise RuntimeError(f"no final answer for {method} {path} key {idem}")


def client(n, urls, api_key, accounts, target, shared):
    rnd = random.Random(n)
    session = Session(urls, api_key)
    done = []  # (kind, path, body, idem, status, raw): answers this client can retry
    paid = []  # (payment id, amount) of this client's succeeded payments: refundable
    holds = []  # (payment id, amount) of this client's authorizations: capturable, cancelable
    counts = shared["counts"]
    while not shared["stop"].is_set():
        with shared["lock"]:
            if shared["ops"] >= target:
                return
            shared["ops"] += 1
        kind = rnd.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
        if kind == "retry" and not done or kind == "refund" and not paid or \
                kind in ("capture", "cancel") and not holds:
            kind = "charge"
        if kind == "retry":
            was_kind, path, body, idem, status, raw = rnd.choice(done)
            s, h, again = session.until_final("POST", path, body, idem, counts)
            if was_kind == "transfer":  # deduplicated by biz_seq: the same transfer again
                same = s in (200, 201) and json.loads(again)["id"] == json.loads(raw)["id"] \
                    if status in (200, 201) else s == status
            elif status in STORED:
                same = s == status and again == raw and h.get("idempotent-replayed") == "true"
            else:  # an answer that released the key: the same answer, not a replay
                same = s == status
            if not same:
                shared["changed"].append((idem, status, s))
            counts["retry"] += 1
            continue
        idem = chaos.new_key()
        if kind in ("charge", "authorize"):
            path = "/v1/payments"
            body = {"account_id": rnd.choice(accounts), "amount": rnd.randrange(100, 5000),
                    "currency": "USD", "source": rnd.choice(SOURCES)}
            if kind == "authorize":
                body["capture_method"] = "manual"
        elif kind == "capture":  # partial or whole, final or not; some past what is left
            pid, amount = rnd.choice(holds)
            path = f"/v1/payments/{pid}/capture"
            body = {"amount_to_capture": rnd.randrange(1, amount + 1),
                    "final_capture": rnd.random() < 0.5}
        elif kind == "cancel":
            pid, _ = rnd.choice(holds)
            path = f"/v1/payments/{pid}/cancel"
            body = {"cancellation_reason": rnd.choice(CANCEL_REASONS)}
        elif kind == "refund":
            pid, amount = rnd.choice(paid)
            path = f"/v1/payments/{pid}/refunds"
            body = {"amount": rnd.randrange(1, amount + amount // 2 + 1)}
        else:
            src, dst = rnd.sample(accounts, 2)
            path = "/v1/transfers"
            body = {"biz_seq": f"p{n}-{idem}", "from_account": src, "to_account": dst,
                    "amount": rnd.randrange(1, 8000), "currency": "USD"}
            idem = None
        status, _, raw = session.until_final("POST", path, body, idem, counts)
        counts[f"{kind}_{status}"] = counts.get(f"{kind}_{status}", 0) + 1
        if kind in ("charge", "authorize") and status == 201:
            (paid if kind == "charge" else holds).append((json.loads(raw)["id"], body["amount"]))
            with shared["lock"]:
                shared["acked_payments"].add(json.loads(raw)["id"])
        if kind == "capture" and status == 200:
            captured = json.loads(raw)
            paid.append((captured["id"], captured["amount_captured"]))
            if captured["status"] != "requires_capture":
                holds[:] = [h for h in holds if h[0] != captured["id"]]
        if kind == "cancel" and status == 200:
            holds[:] = [h for h in holds if h[0] != json.loads(raw)["id"]]
        if len(done) < 2000:
            done.append((kind, path, body, idem, status, raw))
        else:
            done[rnd.randrange(len(done))] = (kind, path, body, idem, status, raw)


def run(ops, kills, clients, pg, use_sim):
    wd = chaos.workdir()
    cluster = None
    if pg:
        import pg as pgmod
        cluster = pgmod.cluster()
        name = cluster.new_database()
        db = cluster.url(name)
    else:
        db = os.path.join(wd, "payd.db")
    api_key, accounts = chaos.setup_user(db, accounts=5)
    sim = sim_db = None
    args = list(chaos.FAST)
    if use_sim:
        sim_db = os.path.join(wd, "sim.db")
        sim = chaos.Node(wd, sim_db, ["--fail-before", "0.02", "--fail-after", "0.02",
                                      "--seed", "7"], command="processor-sim", name="sim").start()
        args += ["--live-test-tokens", "true", "--processor", sim.url]
    nodes = [chaos.Node(wd, db, args, name=f"payd{i}").start() for i in range(2 if pg else 1)]
    shared = {"lock": threading.Lock(), "stop": threading.Event(), "ops": 0,
              "counts": {"retried": 0, "retry": 0}, "changed": [], "acked_payments": set()}
    errors = []

    def guarded(i):
        try:
            client(i, [n.url for n in nodes], api_key, accounts, ops, shared)
        except Exception as e:  # noqa: BLE001 (reported as a failure below)
            errors.append(f"client {i}: {e}")

    threads = [threading.Thread(target=guarded, args=(i,), daemon=True) for i in range(clients)]
    started = time.time()
    for t in threads:
        t.start()
    node_kills = sim_kills = 0
    rnd = random.Random(99)
    # kills are spread over the run: one every ~1/(kills+2) of the operations
    while any(t.is_alive() for t in threads):
        time.sleep(0.1)
        due = shared["ops"] * (kills + 2) // max(ops, 1)
        if node_kills < min(due, kills) or (shared["ops"] >= ops and node_kills < kills):
            victim = rnd.choice(nodes)
            victim.kill9()
            victim.start(victim.port)
            node_kills += 1
            if sim and node_kills % 4 == 0:
                sim.kill9()
                sim.start(sim.port)
                sim_kills += 1
    elapsed = time.time() - started
    for t in threads:
        t.join(10)
    books = chaos.Books(db if not pg else None, pg_cluster=cluster,
                        pg_db=name if pg else None, processor_db=sim_db,
                        processor_url=sim.url if sim else None)
    failures = list(errors)
    if not chaos.wait_settled(books):
        failures.append("keys still open or charges waiting for a void after 60 s")
    ledger_failures, figures = chaos.ledger_verify(books)
    failures += ledger_failures
    payments = books.rows("SELECT id, processor_charge_id FROM payments WHERE status <> 'failed'")
    net, _ = books.net_charges()
    per_charge = {}
    for p in payments:
        per_charge[p[1]] = per_charge.get(p[1], 0) + 1
    double = sum(k - 1 for k in per_charge.values() if k > 1)
    orphans = len(net - set(per_charge))
    # a double capture: the processor took more of a hold than payd recorded as captured
    taken = {}
    for charge, amount in books.processor_rows(
            "SELECT charge_id, amount FROM processor_captures WHERE processor_key NOT LIKE '%:void'"):
        taken[charge] = taken.get(charge, 0) + int(amount)
    recorded = {r[0]: int(r[1]) for r in books.rows(
        "SELECT processor_charge_id, amount_captured FROM payments WHERE capture_method = 'manual'")}
    double_captures = sum(1 for charge, amount in taken.items() if amount > recorded.get(charge, 0))
    holds_open = books.value("SELECT count(*) FROM payments WHERE status = 'requires_capture'")
    stored = {chaos._payment_id(p[0]) for p in payments}
    lost = len(shared["acked_payments"] - stored)
    if double:
        failures.append(f"{double} double charges")
    if double_captures:
        failures.append(f"{double_captures} holds the processor captured past payd's record")
    if orphans:
        failures.append(f"{orphans} orphaned charges at the processor")
    if lost:
        failures.append(f"{lost} acknowledged payments not stored")
    if shared["changed"]:
        failures.append(f"{len(shared['changed'])} retries answered differently: "
                        f"{shared['changed'][:5]}")
    if node_kills < kills:
        failures.append(f"only {node_kills} kills")
    c = shared["counts"]
    line = {"ops": shared["ops"], "seconds": round(elapsed), "kills": node_kills,
            "processor_kills": sim_kills, "retried_answers": c["retried"],
            "same_key_retries": c["retry"], "double_charges": double, "orphans": orphans,
            "lost_acks": lost, "changed_answers": len(shared["changed"]),
            "double_captures": double_captures, "holds_open": holds_open}
    line.update(figures)
    line.update({k: v for k, v in sorted(c.items()) if k not in ("retried", "retry")})
    print(("case8" if pg else "case7") + ": " +
          " ".join(f"{k}={v}" for k, v in line.items()), flush=True)
    for n in nodes:
        n.stop()
    if sim:
        sim.stop()
    if cluster:
        cluster.stop()
    chaos.finish(failures)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=100000)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--pg", action="store_true", help="two nodes on a throwaway PostgreSQL")
    ap.add_argument("--sim", action="store_true", help="charge through payd processor-sim")
    a = ap.parse_args()
    run(a.ops, a.kills, a.clients, a.pg, a.sim)
