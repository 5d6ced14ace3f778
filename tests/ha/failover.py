"""The failover suite (label ha; docs/operations.md, "Failover").

The arrangement of deploy/ha (one etcd, three PostgreSQL 15 members under Patroni with
synchronous_mode_strict, haproxy on Patroni's /primary check) started on loopback by
deploy/ha/ha-local.sh; two payd nodes on it, one through haproxy and one through a libpq
multi-host URL with target_session_attrs=read-write, charging a `payd processor-sim`; retrying
clients (the same Idempotency-Key until a final answer) paying through five failovers:

  kill9       kill -9 of the primary's postmaster
  pause       SIGSTOP of the whole primary member (its Patroni and every PostgreSQL process) until
              another member has been promoted and at least 1.5 TTL has passed, then SIGCONT
  switchover  a planned `patronictl switchover`

After each failover, with the clients held back until no key is open: every payment a client was
told 201 is present with the same id, the processor's net charges are exactly the payments'
charges, and the newest acknowledgements replay byte for byte; at the end the chaos suite's full
checks (tests/chaos/chaos.py: every acknowledgement replayed, no double or orphaned charge,
balances). The clients must be served again within 30 s of each fault. One line of figures.

  python3 tests/ha/failover.py            synchronous replication (the profile of deploy/ha)
  python3 tests/ha/failover.py --async    synchronous_mode off: shows what it buys
  python3 tests/ha/failover.py --dcs etcd3  Patroni's etcd3 section instead of the v2 API
"""
import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "chaos"))
import chaos  # noqa: E402

HA_LOCAL = os.path.join(HERE, "..", "..", "deploy", "ha", "ha-local.sh")
PSQL = "/usr/lib/postgresql/15/bin/psql"
MAX_GAP_S = 30


class Cluster:
    """The three members, etcd and haproxy of ha-local.sh, in a directory of their own."""

    def __init__(self, sync, dcs):
        self.dir = tempfile.mkdtemp(prefix="payd-ha-")
        chaos._workdirs.append(self.dir)
        self.sync, self.dcs = sync, dcs
        self.started = False
        self.paused = []  # pids stopped by a pause, woken after it or by stop()

    def start(self):
        env = dict(os.environ, HA_SYNC="true" if self.sync else "false", HA_DCS=self.dcs)
        self.started = True  # from here on, stop() stops whatever the script got to start
        out = subprocess.run([HA_LOCAL, "start", self.dir], env=env, capture_output=True,
                             text=True, timeout=240)
        if out.returncode != 0:
            raise RuntimeError(f"ha-local.sh start: {out.stderr.strip()}")
        self.env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
        self.rest_ports = [int(p) for p in self.env["REST_PORTS"].split(",")]
        self.ttl = int(self.env["HA_TTL"])
        return self

    def stop(self):
        for pid in self.paused:
            _signal(pid, signal.SIGCONT)
        if self.started:
            subprocess.run([HA_LOCAL, "stop", self.dir], capture_output=True, timeout=120)

    def url(self, db, multihost=False):
        key = "MULTIHOST_URL" if multihost else "HAPROXY_URL"
        base, _, query = self.env[key].partition("?")
        return base.rsplit("/", 1)[0] + f"/{db}" + (f"?{query}" if query else "")

    def psql(self, sql, db="postgres", timeout=60):
        """A statement on the primary (through haproxy), retried while a failover settles."""
        deadline = time.time() + timeout
        while True:
            out = subprocess.run([PSQL, "-At", "-X", "-v", "ON_ERROR_STOP=1", "-c", sql,
                                  self.url(db)], capture_output=True, text=True)
            if out.returncode == 0:
                return out.stdout.strip()
            if time.time() > deadline:
                raise RuntimeError(f"psql: {out.stderr.strip()}")
            time.sleep(0.5)

    def members(self, skip=()):
        """Patroni's view of the cluster from the first member that answers."""
        for i, port in enumerate(self.rest_ports):
            if f"pg{i + 1}" in skip:
                continue
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1.5)
                c.request("GET", "/cluster")
                r = c.getresponse()
                if r.status == 200:
                    return json.loads(r.read()).get("members", [])
            except (OSError, ValueError):
                pass
        return []

    def role(self, role, skip=()):
        names = [m["name"] for m in self.members(skip) if m.get("role") == role]
        return names[0] if len(names) == 1 else None

    def healthy(self):
        """A leader, and both others replicating on its timeline (one of them synchronous)."""
        ms = self.members()
        roles = [m.get("role") for m in ms]
        if len(ms) != 3 or roles.count("leader") != 1:
            return False
        timeline = next(m.get("timeline") for m in ms if m.get("role") == "leader")
        return (all(m.get("state") in ("running", "streaming") for m in ms)
                and all(m.get("timeline") == timeline and isinstance(m.get("lag"), int)
                        for m in ms if m.get("role") != "leader")
                and (not self.sync or roles.count("sync_standby") == 1))

    def wait_healthy(self, timeout=90):
        # twice, a second apart: a woken former primary shows "running" once before its rewind
        if not wait_until(lambda: self.healthy() and time.sleep(1) is None and self.healthy(),
                          timeout):
            raise RuntimeError(f"cluster not healthy after {timeout}s: {self.members()}")

    def member_pids(self, name):
        """The member's Patroni, its postmaster and the postmaster's children."""
        with open(os.path.join(self.dir, "pids", f"patroni-{name}")) as f:
            pids = [int(f.read())]
        postmaster = self.postmaster(name)
        if postmaster:
            pids.append(postmaster)
            pids += children(postmaster)
        return pids

    def postmaster(self, name):
        try:
            with open(os.path.join(self.dir, name, "postmaster.pid")) as f:
                pid = int(f.readline())
            with open(f"/proc/{pid}/cmdline", "rb") as f:  # ours, not a reused pid
                return pid if os.path.join(self.dir, name).encode() in f.read() else None
        except (OSError, ValueError):
            return None


def children(ppid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == ppid:
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def wait_until(cond, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.3)
    return False


class Load:
    """Retrying clients over both payd nodes; hold() lets the payments in flight finish and
    starts no new one until release()."""

    def __init__(self, urls, api_key, accounts, clients, think):
        self.urls, self.api_key, self.accounts, self.think = urls, api_key, accounts, think
        self.acks, self.lock = {}, threading.Lock()
        self.stop, self.go = threading.Event(), threading.Event()
        self.go.set()
        self.busy = 0
        self.errors = []
        self.last_ok = time.time()
        self.gap = 0.0
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                        for i in range(clients)]
        for t in self.threads:
            t.start()

    def client(self, n):
        rnd = random.Random(n)
        while not self.stop.is_set():
            self.go.wait()
            if self.stop.is_set():
                return
            with self.lock:
                self.busy += 1
            idem = chaos.new_key()
            body = {"account_id": rnd.choice(self.accounts), "amount": rnd.randrange(100, 10000),
                    "currency": "USD", "source": "tok_visa"}
            # each client starts on its own node and moves to the other on every retry
            urls = self.urls[n % 2:] + self.urls[:n % 2]
            try:
                # a client gives up on an answer after 8 s and resends: a node whose database
                # connection hangs on a paused primary must not hold every client
                status, _, raw = chaos.until_final(urls, "POST", "/v1/payments", self.api_key,
                                                   body, idem, deadline_s=150, timeout=8)
            except RuntimeError as e:
                self.errors.append(str(e))
                status = None
            with self.lock:
                self.busy -= 1
                if status is not None:
                    self.acks[idem] = (status, raw, body)
                    now = time.time()
                    self.gap = max(self.gap, now - self.last_ok)
                    self.last_ok = now
            if status is None:
                return
            time.sleep(self.think)

    def hold(self):
        self.go.clear()
        wait_until(lambda: self.busy == 0, 170)

    def release(self):
        with self.lock:
            self.last_ok = time.time()  # the checks' time is no gap in service
        self.go.set()

    def take_gap(self):
        with self.lock:
            g, self.gap = self.gap, 0.0
        return g

    def end(self):
        self.stop.set()
        self.go.set()
        for t in self.threads:
            t.join(170)


def check_after(books, load, cluster, api_key, urls, replayed):
    """The checks after one failover, with the clients held back. Returns failures."""
    failures = []
    if not chaos.wait_settled(books):
        failures.append("keys still open or charges waiting for a void after 60 s")
    acked = {json.loads(raw)["id"]: idem for idem, (s, raw, _) in load.acks.items() if s == 201}
    present = {chaos._payment_id(r[0]) for r in books.rows("SELECT id FROM payments")}
    missing = sorted(set(acked) - present)
    if missing:
        failures.append(f"{len(missing)} acknowledged payments missing, e.g. {missing[:3]}")
    payments = books.rows("SELECT processor_charge_id FROM payments WHERE status <> 'failed'")
    carried = [p[0] for p in payments]
    net, _ = books.net_charges()
    if sorted(carried) != sorted(net):
        failures.append(f"processor charges differ from payments: {len(net)} net charges, "
                        f"{len(carried)} payments ({len(set(net) - set(carried))} orphaned, "
                        f"{len(set(carried) - set(net))} without a charge)")
    # the acknowledgements since the last check, replayed (at most 150: the end replays all)
    fresh = [idem for idem in load.acks if idem not in replayed and load.acks[idem][0] == 201]
    changed = 0
    for idem in fresh[-150:]:
        status, raw, body = load.acks[idem]
        s, h, again = chaos.until_final(urls, "POST", "/v1/payments", api_key, body, idem)
        if s != 201 or again != raw or h.get("idempotent-replayed") != "true":
            changed += 1
    replayed.update(fresh)
    if changed:
        failures.append(f"{changed} acknowledgements replay differently")
    return failures


def fail_over(cluster, kind, hold_s=0.0):
    """One fault on the current primary; returns (old leader, new leader, seconds paused)."""
    leader = cluster.role("leader")
    if kind == "kill9":
        pm = cluster.postmaster(leader)
        _signal(pm, signal.SIGKILL)
        paused = 0.0
    elif kind == "switchover":
        # with synchronous_mode only the synchronous standby may take over
        wanted = ("sync_standby",) if cluster.sync else ("sync_standby", "replica")
        target = next(m["name"] for m in cluster.members() if m.get("role") in wanted)
        out = subprocess.run(["patronictl", "-c", os.path.join(cluster.dir, "patroni-pg1.yml"),
                              "switchover", "--leader", leader, "--candidate", target,
                              "--force"], capture_output=True, text=True, timeout=120)
        if out.returncode != 0 or "Successfully" not in out.stdout:
            raise RuntimeError(f"patronictl switchover: {out.stdout} {out.stderr}")
        paused = 0.0
    else:  # pause: Patroni first, so it cannot act on its PostgreSQL's stop; then PostgreSQL
        t0 = time.time()
        pids = cluster.member_pids(leader)
        for pid in pids:
            _signal(pid, signal.SIGSTOP)
        if len(pids) > 1:  # a backend forked while the others were being stopped
            pids += [p for p in children(pids[1]) if p not in pids]
            for pid in pids:
                _signal(pid, signal.SIGSTOP)
        cluster.paused = pids
        promoted = wait_until(lambda: cluster.role("leader", skip=(leader,)) not in (None, leader),
                              60)
        # well past the TTL, and long enough for the new primary to acknowledge writes
        while time.time() - t0 < max(1.5 * cluster.ttl, hold_s):
            time.sleep(0.2)
        time.sleep(2)
        for pid in cluster.paused:
            _signal(pid, signal.SIGCONT)
        cluster.paused = []
        paused = time.time() - t0
        if not promoted:
            raise RuntimeError("no member was promoted while the primary was paused")
    cluster.wait_healthy()
    return leader, cluster.role("leader"), paused


def run(args):
    failures, figures = [], {}
    cluster, load, nodes = None, None, []
    t_start = time.time()
    try:
        cluster = Cluster(sync=not args.async_, dcs=args.dcs)
        cluster.start()
        t_cluster = time.time() - t_start
        cluster.psql("CREATE DATABASE payd")
        wd = chaos.workdir()
        sim_db = os.path.join(wd, "sim.db")
        sim = chaos.Node(wd, sim_db, command="processor-sim", name="sim").start()
        nodes.append(sim)
        node_args = list(chaos.FAST) + ["--live-test-tokens", "true", "--processor", sim.url]
        a = chaos.Node(wd, cluster.url("payd"), node_args, name="a").start()  # through haproxy
        nodes.append(a)
        b = chaos.Node(wd, cluster.url("payd", multihost=True), node_args, name="b").start()
        nodes.append(b)
        api_key, accounts = chaos.setup_user(cluster.url("payd"), accounts=4)
        urls = [a.url, b.url]
        books = chaos.Books(None, pg_cluster=cluster, pg_db="payd", processor_db=sim_db)
        load = Load(urls, api_key, accounts, args.clients, args.think)
        replayed, gaps, pauses, leaders = set(), [], [], []
        for kind in args.faults.split(","):
            time.sleep(args.between)
            old, new, paused = fail_over(cluster, kind, args.pause)
            if kind != "kill9" and new == old:
                failures.append(f"{kind}: {old} is still the primary")
            # served again: some client's payment finishes after the fault
            before = len(load.acks)
            if not wait_until(lambda: len(load.acks) > before + 2 * args.clients, MAX_GAP_S + 30):
                failures.append(f"{kind}: the clients were not served again")
            gap = load.take_gap()
            gaps.append(gap)
            if paused:
                pauses.append(paused)
            leaders.append(f"{old}>{new}")
            load.hold()
            found = check_after(books, load, cluster, api_key, urls, replayed)
            failures += [f"after {kind} ({old}>{new}): {f}" for f in found]
            print(f"ha: {kind} {old}>{new} gap={gap:.1f}s acks={len(load.acks)}"
                  + (f" paused={paused:.1f}s" if paused else "")
                  + (f" FAILED: {'; '.join(found)}" if found else ""), flush=True)
            load.release()
        time.sleep(args.between)
        load.end()
        failures += load.errors
        figures = {"sync": "on" if cluster.sync else "off", "dcs": args.dcs,
                   "failovers": len(gaps), "leaders": ",".join(leaders),
                   "longest_gap_s": f"{max(gaps):.1f}",
                   "longest_pause_s": f"{max(pauses):.1f}" if pauses else "0",
                   "cluster_start_s": f"{t_cluster:.0f}"}
        if max(gaps) > MAX_GAP_S:
            failures.append(f"clients waited {max(gaps):.1f}s for an answer, more than "
                            f"{MAX_GAP_S}s")
        figures["wall_s"] = f"{time.time() - t_start:.0f}"
        failures += chaos.check_payments(books, load.acks, urls, api_key, kills=len(gaps),
                                         extra=figures, name="ha failover")
    except Exception as e:  # noqa: BLE001: reported as a failure, then everything is stopped
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if load:
            load.end()
        for n in nodes:
            n.stop()
        if cluster:
            cluster.stop()
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--async", dest="async_", action="store_true",
                   default=os.environ.get("HA_SYNC") == "false",
                   help="synchronous replication off (also HA_SYNC=false)")
    p.add_argument("--dcs", default=os.environ.get("HA_DCS", "etcd"), choices=["etcd", "etcd3"])
    p.add_argument("--faults", default="kill9,pause,switchover,kill9,pause")
    p.add_argument("--clients", type=int, default=6)
    p.add_argument("--pause", type=float, default=0.0,
                   help="seconds a paused primary stays stopped at least (default 1.5 TTL)")
    # keeps the acknowledgements (each replayed at the end) to a couple of thousand
    p.add_argument("--think", type=float, default=0.15,
                   help="seconds between a client's payments")
    p.add_argument("--between", type=float, default=3.0, help="seconds of load between faults")
    args = p.parse_args()
    # ctest's timeout sends SIGTERM: stop what was started, as on any other failure
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    chaos.finish(run(args))


if __name__ == "__main__":
    main()
