"""Case 3: PostgreSQL, two nodes, the pause scenario of docs/idempotency.md.

Node A stops itself (SIGSTOP) in the middle of a payment, past the lock timeout; node B (a
client's retry, or B's recoverer) takes the key over; then A continues (SIGCONT). Run twice:
A stopped right after charging (B records the same charge, A's late result is fenced off and A
answers B's payment), and A stopped right before charging while nobody retries (B's recoverer
releases the key; A's late charge is either recorded by A's client's retry or voided). Each on
the builtin processor and on processor-sim. Every run must end with one net charge, one
payment, and every client told the same payment id."""
import json
import os
import threading
import time

import chaos
import pg


def run(cluster, step, use_sim):
    wd = chaos.workdir()
    name = cluster.new_database()
    url = cluster.url(name)
    args = list(chaos.FAST)
    sim, processor_db = None, None
    if use_sim:
        processor_db = os.path.join(wd, "sim.db")
        sim = chaos.Node(wd, processor_db, command="processor-sim", name="sim").start()
        args += ["--live-test-tokens", "true", "--processor", sim.url]
    a = chaos.Node(wd, url, args, env={"PAYD_FAULT": f"stop@{step}"}, name="a").start()
    b = chaos.Node(wd, url, args, name="b").start()
    api_key, (account,) = chaos.setup_user(url)
    idem = chaos.new_key()
    body = {"account_id": account, "amount": 4200, "currency": "USD", "source": "tok_visa"}
    answers = {}

    def client_a():
        # A's client keeps to A while A lives, as a client behind a sticky balancer would
        answers["a"] = chaos.until_final([a.url, a.url, b.url], "POST", "/v1/payments", api_key,
                                         body, idem)

    t = threading.Thread(target=client_a, daemon=True)
    t.start()
    failures = []
    if not chaos.wait_until(lambda: chaos.stopped(a)):
        failures.append(f"node A never reached {step}")
    time.sleep(2.5)  # past the lock timeout (2 s)
    if step == "after-charge":
        answers["b"] = chaos.until_final([b.url], "POST", "/v1/payments", api_key, body, idem)
    else:
        # nobody retries: B's recoverer takes the key over, finds no charge and releases it
        if not chaos.wait_until(lambda: cluster.psql(
                f"SELECT state FROM idempotency_keys", name) == "released", 30):
            failures.append("B's recoverer did not release the abandoned key")
    a.proc.send_signal(chaos.signal.SIGCONT)
    t.join(60)
    if "a" not in answers:
        failures.append("A's client got no final answer")
    books = chaos.Books(None, pg_cluster=cluster, pg_db=name, processor_db=processor_db,
                        processor_url=sim.url if sim else None)
    acks = {idem: (answers["a"][0], answers["a"][2], body)} if "a" in answers else {}
    ids = {json.loads(v[2]).get("id") for v in answers.values()}
    if len(ids) != 1 or any(v[0] != 201 for v in answers.values()):
        failures.append(f"clients were told different answers: "
                        f"{[(v[0], v[2][:80]) for v in answers.values()]}")
    label = f"case3 pg pause {step} {'processor-sim' if use_sim else 'builtin'}"
    failures += chaos.check_payments(books, acks, [b.url], api_key, kills=0, name=label,
                                     extra={"clients_same_id": int(len(ids) == 1)})
    payments = books.value("SELECT count(*) FROM payments")
    net, _ = books.net_charges()
    if payments != 1 or len(net) != 1:
        failures.append(f"{label}: {payments} payments and {len(net)} net charges, want 1 and 1")
    for n in (a, b, sim):
        if n:
            n.stop()
    return failures


def run_abandoned(cluster):
    """A stopped before charging, its client gone when A continues: A's late charge is carried
    by no payment, so the recoverer voids it; the client's retry much later pays once anew."""
    wd = chaos.workdir()
    name = cluster.new_database()
    url = cluster.url(name)
    a = chaos.Node(wd, url, chaos.FAST, env={"PAYD_FAULT": "stop@before-charge"}, name="a").start()
    b = chaos.Node(wd, url, chaos.FAST, name="b").start()
    api_key, (account,) = chaos.setup_user(url)
    idem = chaos.new_key()
    body = {"account_id": account, "amount": 700, "currency": "USD", "source": "tok_visa"}
    first = {}
    t = threading.Thread(target=lambda: first.update(r=chaos.request(
        a.url, "POST", "/v1/payments", api_key, body, idem, timeout=60)), daemon=True)
    t.start()
    failures = []
    chaos.wait_until(lambda: chaos.stopped(a))
    if not chaos.wait_until(lambda: cluster.psql("SELECT state FROM idempotency_keys", name)
                      == "released", 30):
        failures.append("B's recoverer did not release the abandoned key")
    a.proc.send_signal(chaos.signal.SIGCONT)
    t.join(60)
    books = chaos.Books(None, pg_cluster=cluster, pg_db=name)
    chaos.wait_settled(books)
    net, voided = books.net_charges()
    payments = books.value("SELECT count(*) FROM payments")
    answered = first.get("r", (0,))[0]
    # Either A charged late and was fenced (409, its charge voided), or A's first write after
    # SIGCONT failed and it never charged (503 database_unavailable, about 1 run in 5): the stop
    # can catch one of A's threads opening a PostgreSQL connection, and libpq's connect_timeout
    # counts the pause, so on SIGCONT that connect fails ("timeout expired") and the store is
    # briefly marked down. Both leave no money moved without a payment; the retry below must
    # then pay once.
    fenced = answered == 409 and len(voided) == 1
    refused = answered == 503 and not voided
    if not (fenced or refused) or payments != 0 or net:
        failures.append(f"abandoned: A answered {answered}, {payments} payments, "
                        f"{len(net)} net charges, {len(voided)} voided; want 409, 0, 0, 1 "
                        "(or 503, 0, 0, 0)")
    print(f"case3 pg pause abandoned: A {'fenced (409, voided)' if fenced else 'refused (503)'}")
    again = chaos.until_final([b.url], "POST", "/v1/payments", api_key, body, idem)
    failures += chaos.check_payments(books, {idem: (again[0], again[2], body)}, [b.url], api_key,
                                     kills=0, name="case3 pg pause abandoned builtin")
    for n in (a, b):
        n.stop()
    return failures


if __name__ == "__main__":
    cluster = pg.cluster()
    failures = []
    for use_sim in (False, True):
        for step in ("after-charge", "before-charge"):
            failures += run(cluster, step, use_sim)
    failures += run_abandoned(cluster)
    chaos.finish(failures)
