"""Shared harness for the API tests: start the real payd binary on a free port with a fresh
database, create users and accounts through its command line, and talk HTTP with the standard
library only. Each test module gets its own server unless it asks for a custom one."""

import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

PAYD = os.environ.get("PAYD_BIN", os.path.join(os.path.dirname(__file__), "../../build/payd"))
PAYCTL = os.environ.get("PAYCTL_BIN", os.path.join(os.path.dirname(__file__), "../../build/payctl"))
# PAYD_TEST_BACKEND=postgres runs the same suites against a PostgreSQL the harness starts itself.
BACKEND = os.environ.get("PAYD_TEST_BACKEND", "sqlite")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Response:
    def __init__(self, status, headers, raw):
        self.status = status
        self.headers = headers  # dict with lower-case names
        self.raw = raw

    @property
    def json(self):
        return json.loads(self.raw) if self.raw else None

    def header(self, name):
        return self.headers.get(name.lower())

    def __repr__(self):
        return f"<Response {self.status} {self.raw[:300]!r}>"


def check_log_lines(path):
    """Every line payd wrote is one JSON object with `time` and `level` (§12: every value
    escaped, no line cut), a refusal to start included."""
    with open(path, "rb") as f:
        data = f.read()
    assert not data or data.endswith(b"\n"), f"{path}: the last log line is cut: {data[-200:]!r}"
    for number, line in enumerate(data.splitlines(), 1):
        try:
            entry = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError(f"{path}:{number}: not a JSON line ({e}): {line[:300]!r}")
        assert isinstance(entry, dict) and "time" in entry and "level" in entry, \
            f"{path}:{number}: a log line without time or level: {line[:300]!r}"


def verify_ledger(db, settle_s=30, processor="builtin"):
    """`payd ledger verify` (docs/ledger.md) on a database a real run made: its summary, or an
    AssertionError listing the violations. A charge still in flight when the load stopped shows
    as a violation until its key settles, so a dirty answer is asked again for up to settle_s."""
    deadline = time.time() + settle_s
    while True:
        out = subprocess.run([PAYD, "ledger", "verify", "--db", db, "--processor", processor],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode in (0, 1), f"ledger verify failed to run: {out.stderr[-500:]}"
        summary = json.loads(out.stdout)
        if out.returncode == 0:
            return summary
        if time.time() > deadline:
            raise AssertionError(f"ledger verify: {summary['violations'][:10]}")
        time.sleep(0.5)


class Payd:
    """One payd process. `args` are extra `payd serve` flags."""

    def __init__(self, tmpdir, args=(), env=None, db=None):
        self.tmpdir = tmpdir
        self.pg_database = None
        if db is None and BACKEND == "postgres":
            import pg
            self.pg_database = pg.cluster().new_database()
            db = pg.cluster().url(self.pg_database)
        self.db = db or os.path.join(tmpdir, "payd.db")
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        self.port = None
        self.proc = None
        self.log_path = os.path.join(tmpdir, "payd.log")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, port=None):
        self.port = port or free_port()
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PAYD, "serve", "--listen", f"127.0.0.1:{self.port}", "--db", self.db] + self.args,
            stdout=self.log, stderr=self.log, env=self.env)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"payd exited {self.proc.returncode}: {self.read_log()[-2000:]}")
            try:
                if self.request("GET", "/healthz").status == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("payd did not become healthy")

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
            check_log_lines(self.log_path)
        return self.proc.returncode if self.proc else None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        check_log_lines(self.log_path)

    def sql(self, query):
        """The first column of the first row of query, on whichever backend this server uses."""
        if self.pg_database:
            import pg
            out = pg.cluster().psql(query, self.pg_database)
            return int(out) if out.lstrip("-").isdigit() else out
        import sqlite3
        with sqlite3.connect(self.db) as c:
            return c.execute(query).fetchone()[0]

    def execute(self, *statements):
        """Runs statements on the server's database from this process, as another program would."""
        if self.pg_database:
            import pg
            for statement in statements:
                pg.cluster().psql(statement, self.pg_database)
            return
        import sqlite3
        with sqlite3.connect(self.db, timeout=10) as c:
            for statement in statements:
                c.execute(statement)

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def cli(self, *args, check=True):
        out = subprocess.run([PAYD, *args, "--db", self.db], capture_output=True, text=True,
                             env=self.env, timeout=60)
        if check and out.returncode != 0:
            raise RuntimeError(f"payd {args}: {out.returncode} {out.stderr}")
        return out

    def create_user(self, name="alice", rate_limit=None, email=None):
        args = ["user", "create", name]
        if rate_limit:
            args += ["--rate-limit", rate_limit]
        if email:
            args += ["--email", email]
        data = json.loads(self.cli(*args).stdout)
        user = User(self, data["user_id"], data["api_key"])
        user.test_key = data["test_api_key"]  # the same user's test mode (docs/modes.md)
        return user

    def request(self, method, path, key=None, body=None, headers=None, raw_body=None, timeout=30):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            h = dict(headers or {})
            if key:
                h["Authorization"] = f"Bearer {key}"
            data = raw_body
            if body is not None:
                data = json.dumps(body).encode()
                h.setdefault("Content-Type", "application/json")
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            raw = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, raw)
        finally:
            conn.close()


class User:
    def __init__(self, server, user_id, api_key):
        self.server = server
        self.id = user_id
        self.key = api_key
        self.test_key = None

    def in_test_mode(self):
        """The same user through its test key (docs/modes.md)."""
        assert self.test_key, "made without a test key"
        return User(self.server, self.id, self.test_key)

    def request(self, method, path, body=None, headers=None, **kw):
        return self.server.request(method, path, key=self.key, body=body, headers=headers, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, idem=None, headers=None, **kw):
        h = dict(headers or {})
        if idem is not None:
            h["Idempotency-Key"] = idem
        return self.request("POST", path, body=body, headers=h, **kw)

    def create_account(self, currency="USD", name=None):
        body = {"currency": currency}
        if name:
            body["name"] = name
        r = self.post("/v1/accounts", body)
        assert r.status == 201, r
        return r.json

    def pay(self, account, amount=1000, source="tok_visa", idem=None, **extra):
        body = {"account_id": account["id"] if isinstance(account, dict) else account,
                "amount": amount, "currency": "USD", "source": source, **extra}
        return self.post("/v1/payments", body, idem=idem or os.urandom(8).hex())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Payd(str(tmp_path_factory.mktemp("payd"))).start()
    yield s
    s.stop()


@pytest.fixture
def fresh_server(tmp_path):
    """A server of its own, for tests that change flags, restart or kill it."""
    servers = []

    def make(args=(), env=None, start=True):
        s = Payd(str(tmp_path), args=args, env=env)
        servers.append(s)
        return s.start() if start else s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(scope="module")
def alice(server):
    return server.create_user("alice")


@pytest.fixture(scope="module")
def bob(server):
    return server.create_user("bob")
