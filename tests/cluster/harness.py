"""A payd cluster on loopback for the cluster tests: a PostgreSQL the harness starts itself
(tests/api/pg.py), Redis, N payd nodes and haproxy configured from deploy/haproxy.cfg, all on
free ports, all stopped at the end."""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "../.."))
sys.path.insert(0, os.path.join(ROOT, "tests/api"))
import pg  # noqa: E402  (the API tests' PostgreSQL cluster code)

PAYD = os.environ.get("PAYD_BIN", os.path.join(ROOT, "build/payd"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, key=None, body=None, headers=None, timeout=10):
    """One request on a new connection: (status, headers with lower-case names, parsed body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = dict(headers or {})
    if key:
        h["Authorization"] = "Bearer " + key
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw
        return r.status, hdrs, parsed
    finally:
        conn.close()


class Postgres:
    """A private PostgreSQL: stopped, started and restarted by the tests. A backend notices
    within 200 ms that its client went away, so a test can free connection slots by killing
    the clients that hold them."""

    def __init__(self, max_connections=200):
        self.c = pg.Cluster()
        self.max_connections = max_connections
        self.restart()

    def _ctl(self, *args):
        subprocess.run(pg._as_postgres([f"{self.c.bindir}/pg_ctl", "-D", self.c.data, *args]),
                       check=True, capture_output=True)

    def _options(self):
        return (f"-p {self.c.port} -k {self.c.dir} -c listen_addresses=127.0.0.1 "
                f"-c max_connections={self.max_connections} -c fsync=off "
                "-c shared_buffers=64MB -c client_connection_check_interval=200ms")

    def start(self):
        self._ctl("-l", os.path.join(self.c.dir, "log"), "-w", "start", "-o", self._options())

    def stop(self):
        self._ctl("-m", "fast", "-w", "stop")

    def restart(self):
        self._ctl("-m", "fast", "-l", os.path.join(self.c.dir, "log"), "-w", "restart", "-o",
                  self._options())

    def url(self, db):
        return self.c.url(db)

    def psql(self, sql, db="postgres"):
        return self.c.psql(sql, db)

    def close(self):
        self.c.stop()


class Redis:
    def __init__(self, tmp):
        self.port = free_port()
        self.tmp = tmp
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"


class Node:
    def __init__(self, tmp, node_id, db_url, args=()):
        self.node_id = node_id
        self.db_url = db_url
        self.args = list(args)
        self.port = free_port()
        self.log_path = os.path.join(tmp, f"node{node_id}.log")
        self.proc = None

    def start(self, wait_ready=True):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PAYD, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db_url,
             "--node-id", str(self.node_id), "--access-log", "false"] + self.args,
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.node_id} exited: {self.read_log()[-2000:]}")
            try:
                if request(self.port, "GET", "/healthz", timeout=2)[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        if wait_ready and not self.wait_ready(15):
            raise RuntimeError(f"node {self.node_id} not ready: {self.read_log()[-2000:]}")
        return self

    def ready(self):
        try:
            return request(self.port, "GET", "/readyz", timeout=2)[0] == 200
        except OSError:
            return False

    def wait_ready(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if self.ready():
                return True
            time.sleep(0.1)
        return False

    def metric(self, name):
        status, _, body = request(self.port, "GET", "/metrics")
        text = body.decode() if isinstance(body, bytes) else str(body)
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def log_lines(self):
        out = []
        for line in self.read_log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"unparsed": line})
        return out


class Haproxy:
    """haproxy run from deploy/haproxy.cfg as shipped, with only its addresses and the error
    file directory rewritten to this run's."""

    def __init__(self, tmp, nodes):
        self.port = free_port()
        with open(os.path.join(ROOT, "deploy/haproxy.cfg")) as f:
            cfg = f.read()
        cfg = cfg.replace("127.0.0.1:8080", f"127.0.0.1:{self.port}")
        for i, node in enumerate(nodes, start=1):
            cfg = cfg.replace(f"127.0.0.1:{8080 + i}", f"127.0.0.1:{node.port}")
        cfg = cfg.replace("/etc/haproxy/payd-errors", os.path.join(ROOT, "deploy/payd-errors"))
        self.cfg_path = os.path.join(tmp, "haproxy.cfg")
        with open(self.cfg_path, "w") as f:
            f.write(cfg)
        self.log = open(os.path.join(tmp, "haproxy.log"), "ab")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", self.cfg_path],
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if request(self.port, "GET", "/healthz", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("haproxy did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def verify_ledger(db_url, settle_s=30):
    """`payd ledger verify` on the database (docs/ledger.md): exit 0, or an AssertionError with
    its violations. A charge or refund still in flight when the load stopped is seen as a
    violation until its key settles, so a dirty answer is asked again for up to settle_s."""
    deadline = time.time() + settle_s
    while True:
        out = subprocess.run([PAYD, "ledger", "verify", "--db", db_url], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode in (0, 1), f"ledger verify failed to run: {out.stderr[-500:]}"
        summary = json.loads(out.stdout)
        if out.returncode == 0:
            print(f"ledger verify: {summary['entries']} entries, 0 violations")
            return summary
        if time.time() > deadline:
            raise AssertionError(f"ledger verify: {summary['violations'][:10]}")
        time.sleep(0.5)


class Cluster:
    def __init__(self, nodes=3, node_args=(), with_redis=True, max_connections=200):
        self.tmp = tempfile.mkdtemp(prefix="payd-cluster-")
        self.pg, self.redis, self.nodes, self.haproxy = None, None, [], None
        try:
            self._start(nodes, node_args, with_redis, max_connections)
        except BaseException:
            self.close()
            raise

    def _start(self, nodes, node_args, with_redis, max_connections):
        self.pg = Postgres(max_connections=max_connections)
        self.db = "payd"
        self.pg.psql(f"CREATE DATABASE {self.db}")
        self.db_url = self.pg.url(self.db)
        self.redis = Redis(self.tmp) if with_redis else None
        args = list(node_args)
        if self.redis:
            args += ["--rate-limit-store", self.redis.url]
        self.nodes = [Node(self.tmp, i + 1, self.db_url, args) for i in range(nodes)]
        for n in self.nodes:
            n.start()
        self.haproxy = Haproxy(self.tmp, self.nodes)

    def cli(self, *args):
        out = subprocess.run([PAYD, *args, "--db", self.db_url], capture_output=True, text=True,
                             check=True)
        return json.loads(out.stdout)

    def verify_ledger(self):
        return verify_ledger(self.db_url)

    def new_user(self, rate_limit="100000/s"):
        u = self.cli("user", "create", "u" + uuid.uuid4().hex[:8], "--rate-limit", rate_limit)
        return u["api_key"]

    def close(self):
        if self.haproxy:
            self.haproxy.stop()
        for n in self.nodes:
            n.stop()
        if self.redis:
            self.redis.kill()
        if self.pg:
            self.pg.close()
        if os.environ.get("PAYD_KEEP_LOGS"):  # for a post-mortem: the nodes' and haproxy's logs
            print(f"logs kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
