"""Case 6: a takeover that races the key it takes over (docs/idempotency.md, "Taking over a key").

A takeover reads the key, judges it (started past the lock timeout, or in doubt) and then writes
its own fence. On PostgreSQL the read takes no lock, so between the read and the write the key
can change: its holder finishes, or another retry takes it over. The write must then change
nothing, and the request answers what the key holds now.

Each run stops a process exactly inside that window (PAYD_FAULT=stop@claim-between-read-and-
write: the whole process, while its claim has read the row and not yet written it), lets the
other side finish, and continues it:

- holder_finishes (PostgreSQL): node A stops right after charging (stop@after-charge); past the
  lock timeout, a retry on node B reads the key and stops in the window; A continues and records
  its payment; then B continues. B must not reopen the completed key (it would charge again
  under the same processor key and record a second payment): it replays A's answer.
- second_taker (PostgreSQL): the same, but while B is stopped in the window a retry on node C
  takes the key over and finishes it; B continues and must lose to C, replaying C's answer.
- one_writer (SQLite, one node: a second `payd serve` of the same file is refused): the holder
  sleeps after its charge past the lock timeout, and the retry's takeover sleeps in the window.
  SQLite's one writer runs the claim's read and write in one transaction, so the holder's
  record waits behind it and is fenced off; the books must say the same.

Every run ends with one net charge at the processor, one payment for the key, every client told
the same payment, and a replay byte for byte the first 201."""
import json
import os
import threading
import time

import chaos
import pg

WINDOW = "claim-between-read-and-write"
# no recoverer pass while a run is under way: the takeovers are the clients' retries
ARGS = chaos.FAST + ["--recovery-interval", "1h"]


class Client(threading.Thread):
    """One client resending the same request with the same key until a final answer."""

    def __init__(self, urls, api_key, body, idem):
        super().__init__(daemon=True)
        self.args, self.answer, self.error = (urls, api_key, body, idem), None, None
        self.start()

    def run(self):
        urls, api_key, body, idem = self.args
        try:
            self.answer = chaos.until_final(urls, "POST", "/v1/payments", api_key, body, idem,
                                            deadline_s=60)
        except RuntimeError as e:
            self.error = str(e)

    def done(self):
        return not self.is_alive()


def verdict(label, books, clients, body, idem, url, api_key):
    """The checks of one run; returns its failures."""
    failures = [f"{label}: {c.error}" for c in clients if c.error]
    answers = [c.answer for c in clients if c.answer]
    if len(answers) != len(clients):
        failures.append(f"{label}: {len(clients) - len(answers)} clients got no final answer")
    if not answers:
        return failures
    if any(a[0] != 201 for a in answers):
        failures.append(f"{label}: answers {[(a[0], a[2][:120]) for a in answers]}")
    # every client was told the same payment, in the same bytes: the first 201 or its replay
    if len({a[2] for a in answers}) != 1:
        failures.append(f"{label}: clients were told different answers: "
                        f"{[a[2][:80] for a in answers]}")
    failures += chaos.check_payments(books, {idem: (answers[0][0], answers[0][2], body)}, [url],
                                     api_key, kills=0, name=label,
                                     extra={"clients": len(answers),
                                            "same_answer": int(len({a[2] for a in answers}) == 1)})
    payments = books.value("SELECT count(*) FROM payments")
    net, _ = books.net_charges()
    if payments != 1 or len(net) != 1:
        failures.append(f"{label}: {payments} payments and {len(net)} net charges, want 1 and 1")
    return failures


def run_pg(cluster, second_taker):
    label = f"case6 takeover race {'second_taker' if second_taker else 'holder_finishes'} pg"
    wd = chaos.workdir()
    name = cluster.new_database()
    url = cluster.url(name)
    a = chaos.Node(wd, url, ARGS, env={"PAYD_FAULT": "stop@after-charge"}, name="a").start()
    b = chaos.Node(wd, url, ARGS, env={"PAYD_FAULT": f"stop@{WINDOW}"}, name="b").start()
    c = chaos.Node(wd, url, ARGS, name="c").start() if second_taker else None
    api_key, (account,) = chaos.setup_user(url)
    idem = chaos.new_key()
    body = {"account_id": account, "amount": 4200, "currency": "USD", "source": "tok_visa"}
    state = lambda: cluster.psql("SELECT state FROM idempotency_keys", name)  # noqa: E731
    failures = []

    first = Client([a.url], api_key, body, idem)  # sticks to A, as behind a sticky balancer
    if not chaos.wait_until(lambda: chaos.stopped(a)):
        failures.append(f"{label}: node A never stopped after its charge")
    time.sleep(2.5)  # past the lock timeout (2 s): the key may be taken over
    retry = Client([b.url], api_key, body, idem)
    if not chaos.wait_until(lambda: chaos.stopped(b)):
        failures.append(f"{label}: node B never stopped between its claim's read and write")
    clients = [first, retry]
    if second_taker:
        # C takes the key over from under B's read and finishes it (the same charge again,
        # deduplicated by the processor key), while A stays stopped
        third = Client([c.url], api_key, body, idem)
        clients.append(third)
        if not chaos.wait_until(third.done, 30) or state() != "completed":
            failures.append(f"{label}: C did not finish the key while B was in the window")
        b.proc.send_signal(chaos.signal.SIGCONT)
        chaos.wait_until(retry.done, 30)
        a.proc.send_signal(chaos.signal.SIGCONT)
    else:
        a.proc.send_signal(chaos.signal.SIGCONT)
        # A records its payment while B is in the window (the race this case is about)
        if not chaos.wait_until(first.done, 30) or state() != "completed":
            failures.append(f"{label}: A did not finish the key while B was in the window")
        b.proc.send_signal(chaos.signal.SIGCONT)
    for client in clients:
        client.join(60)
    # a node with a recoverer settles what the race left (a fenced holder's charge to check)
    settler = chaos.Node(wd, url, chaos.FAST, name="settler").start()
    books = chaos.Books(None, pg_cluster=cluster, pg_db=name)
    failures += verdict(label, books, clients, body, idem, settler.url, api_key)
    for n in (a, b, c, settler):
        if n:
            n.stop()
    return failures


def run_sqlite():
    label = "case6 takeover race one_writer sqlite"
    wd = chaos.workdir()
    db = os.path.join(wd, "payd.db")
    api_key, (account,) = chaos.setup_user(db)
    node = chaos.Node(wd, db, ARGS, name="node",
                      env={"PAYD_FAULT": f"sleep@after-charge=3000,sleep@{WINDOW}=1500"}).start()
    idem = chaos.new_key()
    body = {"account_id": account, "amount": 4200, "currency": "USD", "source": "tok_visa"}
    # the first client sends once: a retry of its own would take the key back from the retry
    # below (every holder sleeps past the lock timeout here), and so on
    first = {}
    once = threading.Thread(target=lambda: first.update(answer=chaos.request(
        node.url, "POST", "/v1/payments", api_key, body, idem, timeout=60)), daemon=True)
    once.start()
    time.sleep(2.2)  # the holder sleeps after its charge, past the lock timeout (2 s)
    retry = Client([node.url], api_key, body, idem)
    once.join(60)
    retry.join(60)
    failures = []
    log = open(node.log_path).read()
    if f'"at":"{WINDOW}"' not in log.replace(" ", ""):
        failures.append(f"{label}: no takeover reached the window")
    # the holder that lost the key answers what it holds: 409 while the retry runs
    status = first.get("answer", (0,))[0]
    if status not in (201, 409):
        failures.append(f"{label}: the first request answered {status}")
    again = Client([node.url], api_key, body, idem)  # its client's retry
    again.join(60)
    node.stop()
    # a node with a recoverer settles what the race left (a fenced holder's charge to check)
    settler = chaos.Node(wd, db, chaos.FAST, name="settler").start()
    books = chaos.Books(db)
    failures += verdict(label, books, [retry, again], body, idem, settler.url, api_key)
    settler.stop()
    return failures


if __name__ == "__main__":
    started = time.time()
    failures = run_sqlite()
    cluster = pg.cluster()
    for second_taker in (False, True):
        failures += run_pg(cluster, second_taker)
    print(f"case6 takeover race: {time.time() - started:.1f}s", flush=True)
    chaos.finish(failures)
