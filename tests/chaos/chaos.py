"""Shared harness of the chaos cases: real payd (and processor-sim) processes, retrying clients
that resend the same Idempotency-Key until a final answer (payctl, and a plain HTTP loop), and
the checks every case ends with.

Every case prints one line: keys, acks, kills, double_charges, lost_acks, orphans (and its own
extra figures) and exits 1 when any check fails. Standard library only; PostgreSQL cases reuse
tests/api/pg.py's throwaway cluster."""

import http.client
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "api"))
PAYD = os.environ.get("PAYD_BIN", os.path.join(HERE, "../../build/payd"))
PAYCTL = os.environ.get("PAYCTL_BIN", os.path.join(os.path.dirname(PAYD), "payctl"))

# short timeouts, so a pause or a crash is settled in seconds (the processor timeout must stay
# below the lock timeout)
FAST = ["--idempotency-lock-timeout", "2s", "--processor-timeout", "1s",
        "--recovery-interval", "300ms", "--rate-limiting", "false", "--access-log", "false"]

FINAL_RETRYABLE = {409: "request_in_progress"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One `payd serve` (or `payd processor-sim`) process."""

    def __init__(self, workdir, db, args=(), env=None, command="serve", name="payd"):
        self.workdir, self.db, self.args, self.command = workdir, db, list(args), command
        self.env = dict(os.environ, **(env or {}))
        self.env.pop("PAYD_FAULT", None)
        if env and "PAYD_FAULT" in env:
            self.env["PAYD_FAULT"] = env["PAYD_FAULT"]
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.port, self.proc = None, None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def spawn(self, port=None):
        self.port = port or self.port or free_port()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PAYD, self.command, "--listen", f"127.0.0.1:{self.port}", "--db", self.db] + self.args,
            stdout=log, stderr=log, env=self.env)
        log.close()
        return self

    def start(self, port=None):
        self.spawn(port)
        health = "/stats" if self.command == "processor-sim" else "/healthz"
        deadline = time.time() + 20
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.command} exited {self.proc.returncode}: "
                                   f"{self.tail()}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                c.request("GET", health)
                if c.getresponse().status == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.command} did not become healthy: {self.tail()}")

    def tail(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-1500:]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def stopped(node):
    """Whether the node's process is stopped (SIGSTOP): its state in /proc is T."""
    with open(f"/proc/{node.proc.pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def wait_until(cond, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def cli(db, *args):
    out = subprocess.run([PAYD, *args, "--db", db], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"payd {args}: {out.returncode} {out.stderr}")
    return json.loads(out.stdout)


def setup_user(db, accounts=1, currency="USD"):
    user = cli(db, "user", "create", f"chaos{random.randrange(1 << 30)}")
    accts = [cli(db, "account", "create", "--user", user["user_id"], "--currency", currency)["id"]
             for _ in range(accounts)]
    return user["api_key"], accts


def request_parts(key, body=None, idem=None):
    """The headers and encoded body of an API request."""
    headers = {"Authorization": f"Bearer {key}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if idem:
        headers["Idempotency-Key"] = idem
    return headers, data


def request(url, method, path, key, body=None, idem=None, timeout=30):
    """One HTTP request; returns (status, headers, raw body) or raises OSError."""
    host, port = url.rsplit("/", 1)[-1].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=timeout)
    headers, data = request_parts(key, body, idem)
    try:
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def is_final(status, raw):
    if status >= 500 or status == 429:
        return False
    if status == 409:
        try:
            return json.loads(raw).get("code") != "request_in_progress"
        except ValueError:
            return False
    return True


def until_final(urls, method, path, key, body, idem, deadline_s=120, stop=None, seen=None,
                timeout=30):
    """Resends the same request (same key) until a final answer: connection failures, 5xx, 429
    and 409 request_in_progress are retried, across the given server URLs in turn. `seen`, if
    given, collects the status and code of every answer that was retried; `timeout` bounds the
    wait for each answer (a request given up on is resent, as a client would)."""
    deadline = time.time() + deadline_s
    attempt = 0
    while time.time() < deadline and not (stop and stop.is_set() and attempt > 200):
        url = urls[attempt % len(urls)] if isinstance(urls, list) else urls()
        attempt += 1
        try:
            status, headers, raw = request(url, method, path, key, body, idem, timeout)
        except OSError:
            time.sleep(0.05 + random.random() * 0.1)
            continue
        if is_final(status, raw):
            return status, headers, raw
        if seen is not None:
            try:
                seen.append((status, json.loads(raw).get("code")))
            except (ValueError, AttributeError):
                seen.append((status, None))
        time.sleep(min(1.0, 0.05 * attempt) * (0.7 + 0.6 * random.random()))
    raise RuntimeError(f"no final answer for key {idem} within {deadline_s}s")


class Books:
    """Reads the database (SQLite file or PostgreSQL) and the processor's records."""

    def __init__(self, db, pg_cluster=None, pg_db=None, processor_db=None, processor_url=None):
        """processor_url: the `payd processor-sim` the node charged through (its books are
        read by `payd ledger verify --processor URL`); none: the builtin processor."""
        self.db, self.pg, self.pg_db, self.processor_db = db, pg_cluster, pg_db, processor_db
        self.processor_url = processor_url

    def rows(self, sql):
        if self.pg:
            out = self.pg.psql(sql.replace("\n", " "), self.pg_db)
            return [tuple(line.split("|")) for line in out.splitlines() if line]
        with sqlite3.connect(self.db, timeout=30) as c:
            return [tuple(str(v) if v is not None else "" for v in row)
                    for row in c.execute(sql).fetchall()]

    def value(self, sql):
        r = self.rows(sql)
        return int(r[0][0]) if r and r[0][0] != "" else 0

    def processor_rows(self, sql):
        if self.processor_db:
            with sqlite3.connect(self.processor_db, timeout=30) as c:
                return [tuple(str(v) if v is not None else "" for v in row)
                        for row in c.execute(sql).fetchall()]
        return self.rows(sql)

    def net_charges(self):
        """Charges the processor made and did not void, by charge id."""
        charged = {r[0] for r in self.processor_rows(
            "SELECT charge_id FROM processor_charges WHERE status = 'succeeded'")}
        voided = {r[0] for r in self.processor_rows(
            "SELECT charge_id FROM processor_refunds WHERE processor_key LIKE '%:void'")}
        return charged - voided, charged & voided


def ledger_verify(books):
    """`payd ledger verify` on the books (docs/ledger.md): (failures, figures). The processor's
    side is the builtin processor's tables, or the processor-sim's answers."""
    db = books.pg.url(books.pg_db) if books.pg else books.db
    processor = books.processor_url or ("none" if books.processor_db else "builtin")
    out = subprocess.run([PAYD, "ledger", "verify", "--db", db, "--processor", processor],
                         capture_output=True, text=True, timeout=120)
    if out.returncode not in (0, 1):
        return [f"ledger verify failed to run ({out.returncode}): {out.stderr.strip()[-300:]}"], {}
    summary = json.loads(out.stdout)
    figures = {"ledger_entries": summary["entries"],
               "ledger_violations": summary["violation_count"]}
    if out.returncode == 0:
        return [], figures
    shown = "; ".join(json.dumps(v, sort_keys=True) for v in summary["violations"][:10])
    return [f"ledger verify: {summary['violation_count']} violations: {shown}"], figures


def wait_settled(books, timeout=60):
    """Until no key is open and no unrecorded charge waits for its void."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        open_keys = books.value("SELECT count(*) FROM idempotency_keys "
                                "WHERE state IN ('started', 'in_doubt')")
        voids = books.value("SELECT count(*) FROM charge_voids")
        if open_keys == 0 and voids == 0:
            return True
        time.sleep(0.3)
    return False


def check_payments(books, acks, base_urls, api_key, kills, extra=None, name="chaos"):
    """The checks of every payment case. acks: {idem: (status, raw, body)} as clients saw them.
    Prints the figures line; returns the list of failures."""
    failures = []
    settled = wait_settled(books)
    if not settled:
        failures.append("keys still open or charges waiting for a void after 60 s")
    payments = books.rows("SELECT id, processor_charge_id, status FROM payments")
    succeeded = [p for p in payments if p[2] != "failed"]
    net, voided = books.net_charges()
    carried = {p[1] for p in succeeded}
    per_charge = {}
    for p in succeeded:
        per_charge[p[1]] = per_charge.get(p[1], 0) + 1
    double = sum(n - 1 for n in per_charge.values() if n > 1)
    double += max(0, len(net) - len(succeeded))
    orphans = len(net - carried)
    if carried - net:
        failures.append(f"{len(carried - net)} payments carry a charge the processor does not hold")
    # one payment per key: every payment is some key's stored answer
    stored = books.rows("SELECT response_location FROM idempotency_keys "
                        "WHERE response_status = 201 AND path = '/v1/payments'")
    stored_ids = {r[0].rsplit("/", 1)[-1] for r in stored}
    ids = {_payment_id(p[0]) for p in succeeded}
    stray = ids - stored_ids
    if stray:
        failures.append(f"{len(stray)} payments that no key's answer names")
    # every 201 a client saw exists with the same id and replays byte for byte
    lost = 0
    for idem, (status, raw, body) in acks.items():
        if status != 201:
            continue
        pid = json.loads(raw)["id"]
        url = base_urls[0]
        s, _, got = until_final([url], "GET", f"/v1/payments/{pid}", api_key, None, None)
        s2, h2, again = until_final([url], "POST", "/v1/payments", api_key, body, idem)
        # what payctl printed is the server's JSON re-encoded: compared as JSON, not bytes
        same = again == raw if isinstance(raw, bytes) else json.loads(again) == json.loads(raw)
        if s != 200 or s2 != 201 or not same or h2.get("idempotent-replayed") != "true":
            lost += 1
    # balances equal the sum of their rows
    bad_balances = books.rows(
        "SELECT a.id FROM accounts a WHERE a.balance <> COALESCE((SELECT SUM(p.amount - "
        "p.refunded_amount) FROM payments p WHERE p.account_id = a.id AND p.status <> 'failed'), 0)")
    if bad_balances:
        failures.append(f"{len(bad_balances)} balances differ from their payments")
    if double:
        failures.append(f"{double} double charges")
    if lost:
        failures.append(f"{lost} acknowledgements lost or changed")
    if orphans:
        failures.append(f"{orphans} orphaned charges")
    ledger_failures, ledger_figures = ledger_verify(books)
    failures += ledger_failures
    figures = {"keys": len(acks), "acks": sum(1 for a in acks.values() if a[0] == 201),
               "kills": kills, "double_charges": double, "lost_acks": lost, "orphans": orphans,
               "payments": len(succeeded), "voided": len(voided)}
    figures.update(ledger_figures)
    figures.update(extra or {})
    print(f"{name}: " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    return failures


def _payment_id(numeric):
    """The text id of a payment row's integer id (the same Crockford base32 as payd)."""
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    n = int(numeric)
    digits = []
    for _ in range(13):
        digits.append(alphabet[n & 31])
        n >>= 5
    return "pay_" + "".join(reversed(digits))


_workdirs = []


def finish(failures):
    """Exits 1 with the failures listed, else 0; work directories (logs, databases) are kept
    for a failed run and removed after a passing one."""
    for f in failures:
        print("FAIL:", f, flush=True)
    if failures:
        print("logs and databases kept in:", " ".join(_workdirs), flush=True)
    else:
        for d in _workdirs:
            shutil.rmtree(d, ignore_errors=True)
    sys.exit(1 if failures else 0)


def workdir():
    d = tempfile.mkdtemp(prefix="payd-chaos-")
    _workdirs.append(d)
    return d


def new_key():
    return str(uuid.uuid4())


def pay_with_payctl(url, api_key, body, idem, deadline_s=120):
    """A payment through payctl, the project's own retrying client (§14: backoff, jitter, the
    same key). payctl gives up after its retries (exit 3) while a node is down for a while; it is
    then run again with the same key until it answers finally. Returns (status, the JSON it
    printed)."""
    env = dict(os.environ, PAYD_URL=url, PAYD_API_KEY=api_key)
    cmd = [PAYCTL, "payments", "create", "--account", body["account_id"],
           "--amount", str(body["amount"]), "--currency", body["currency"],
           "--source", body["source"], "--idempotency-key", idem,
           "--retry-base", "100ms", "--max-delay", "2s", "--max-retries", "8"]
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        if out.returncode == 0:
            return 201, out.stdout
        if out.returncode == 1:  # refused (4xx): its problem JSON says which
            return json.loads(out.stdout)["status"], out.stdout
        if out.returncode != 3:
            raise RuntimeError(f"payctl exited {out.returncode}: {out.stderr.strip()}")
    raise RuntimeError(f"payctl: no final answer for key {idem} within {deadline_s}s")


def kill_loop_case(name, kills, clients=8, sim_args=None, pause=(0.5, 2.0), think=0.02):
    """SQLite, one payd node killed -9 `kills` times at random moments while `clients` retrying
    clients pay; with sim_args, the processor is a `payd processor-sim` with those faults."""
    wd = workdir()
    db = os.path.join(wd, "payd.db")
    api_key, accounts = setup_user(db, accounts=4)
    args = list(FAST)
    sim, processor_db = None, None
    if sim_args is not None:
        processor_db = os.path.join(wd, "sim.db")
        sim = Node(wd, processor_db, sim_args, command="processor-sim", name="sim").start()
        args += ["--live-test-tokens", "true", "--processor", sim.url]
    node = Node(wd, db, args).start()
    url = node.url
    acks, lock, stop = {}, threading.Lock(), threading.Event()
    errors = []

    def client(n):
        rnd = random.Random(n)
        while not stop.is_set():
            idem = new_key()
            body = {"account_id": rnd.choice(accounts), "amount": rnd.randrange(100, 10000),
                    "currency": "USD", "source": "tok_visa"}
            try:
                if n % 2:  # half the clients are payctl, half a plain HTTP retry loop
                    status, raw = pay_with_payctl(url, api_key, body, idem)
                else:
                    status, _, raw = until_final([url], "POST", "/v1/payments", api_key, body,
                                                 idem)
            except RuntimeError as e:
                errors.append(str(e))
                return
            with lock:
                acks[idem] = (status, raw, body)
            time.sleep(think)  # keeps the key count (and the checks' time) to a few thousand

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    sim_kills = 0
    for i in range(kills):
        time.sleep(random.uniform(*pause))
        node.kill9()
        node.start(node.port)
        if sim and i % 4 == 3:  # the processor dies too, now and then, answers in flight
            sim.kill9()
            sim.start(sim.port)
            sim_kills += 1
    stop.set()
    for t in threads:
        t.join(180)
    books = Books(db, processor_db=processor_db, processor_url=sim.url if sim else None)
    failures = check_payments(books, acks, [url], api_key, kills, name=name,
                              extra={"processor_kills": sim_kills} if sim else None)
    failures += errors
    non_final = [a[0] for a in acks.values() if a[0] not in (201,)]
    if non_final:
        failures.append(f"{len(non_final)} payments ended other than 201: {sorted(set(non_final))}")
    node.stop()
    if sim:
        sim.stop()
    finish(failures)
