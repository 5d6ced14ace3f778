"""payctl and the C client library against the real payd (docs/api.md §13 and §14): retries that reuse
one Idempotency-Key, exit codes, JSON Lines lists, exports in JSON Lines and CSV, and the example
program in examples/."""

import csv
import io
import json
import os
import pty
import re
import select
import subprocess

import pytest

from conftest import PAYCTL

BUILD = os.environ.get("PAYD_BUILD", os.path.join(os.path.dirname(__file__), "../../build"))
EXAMPLE = os.path.join(BUILD, "example_create_and_list")

# Every command §13 names.
COMMANDS = [
    "payments create", "payments get", "payments capture", "payments cancel", "payments list",
    "payments export", "payments count",
    "refunds create", "refunds list",
    "orders create", "orders get", "orders list", "orders set-status",
    "transfers create", "transfers get",
    "accounts create", "accounts get", "accounts list",
    "balance", "balance-transactions list", "balance-transactions get",
    "users me", "users update",
    "products create", "products get", "products reserve",
    "keys list", "keys create", "keys revoke",
    "events list", "events get", "events resend",
    "webhooks create", "webhooks list", "webhooks get", "webhooks delete", "webhooks deliveries",
    "webhooks rotate-secret",
    "webhooks recover",
    "trigger",
]

CSV_COLUMNS = ["id", "created_at", "account_id", "amount", "currency", "status", "source",
               "order_id", "description", "refunded_amount", "processor_charge_id",
               "capture_method", "amount_captured", "amount_released", "canceled_at", "metadata"]


def payctl_env(user=None, url=None):
    env = dict(os.environ)
    env["PAYD_URL"] = url or (user.server.url if user else "http://127.0.0.1:9")
    env["PAYD_API_KEY"] = user.key if user else "sk_unused"
    return env


def payctl(user, *args, url=None, timeout=120, **kw):
    return subprocess.run([PAYCTL, *args], capture_output=True, text=True,
                          env=payctl_env(user, url), timeout=timeout, **kw)


def ok(user, *args):
    """Runs payctl, insists on exit 0, and returns stdout parsed as one JSON value."""
    out = payctl(user, *args)
    assert out.returncode == 0, (args, out.returncode, out.stdout, out.stderr)
    return json.loads(out.stdout)


def lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def attempt_lines(stderr):
    """The lines --verbose prints, one per HTTP attempt."""
    return [line for line in stderr.splitlines() if re.match(r"payctl: attempt \d+:", line)]


def create_payment(user, account, amount=1000, source="tok_visa", *extra):
    return ok(user, "payments", "create", "--account", account["id"], "--amount", str(amount),
              "--currency", "USD", "--source", source, *extra)


@pytest.fixture
def account(alice):
    """A fresh account per test, so balances and lists start empty."""
    return alice.create_account()


def fill(user, account, n):
    """n payments created over plain HTTP (quicker than n payctl processes)."""
    for i in range(n):
        r = user.pay(account, amount=100 + i)
        assert r.status == 201, r


# ---- the command line itself (no server needed) ----

def test_every_command_has_help():
    top = payctl(None, "--help")
    assert top.returncode == 0 and "usage: payctl" in top.stdout
    for name in COMMANDS:
        assert name in top.stdout, name
        out = payctl(None, *name.split(), "--help")
        assert out.returncode == 0, (name, out.stderr)
        assert out.stdout.startswith(f"usage: payctl {name}"), (name, out.stdout)
        assert "--verbose" in out.stdout
    for group in {c.split()[0] for c in COMMANDS if " " in c}:  # a command of its own: balance
        out = payctl(None, group, "--help")
        assert out.returncode == 0 and f"usage: payctl {group} COMMAND" in out.stdout


@pytest.mark.parametrize("args", [
    [],
    ["nosuch", "thing"],
    ["payments", "explode"],
    ["payments", "create", "--account", "acct_x"],
    ["payments", "create", "--account", "acct_x", "--amount", "12.5", "--currency", "USD",
     "--source", "tok_visa"],
    ["payments", "get"],
    ["payments", "get", "pay_a", "pay_b"],
    ["payments", "list", "--account", "acct_x", "--bogus", "1"],
    ["payments", "export", "--account", "acct_x", "--format", "xml"],
    ["payments", "create", "--account", "a", "--amount", "1", "--currency", "USD", "--source",
     "tok_visa", "--metadata", "novalue"],
    ["accounts", "list", "--deadline", "30"],
    ["accounts", "list", "--max-retries", "-1"],
])
def test_usage_errors_exit_2(args):
    out = payctl(None, *args)
    assert out.returncode == 2, (args, out.stdout, out.stderr)
    assert out.stdout == ""


def test_no_api_key_is_a_usage_error():
    env = dict(os.environ)
    env.pop("PAYD_API_KEY", None)
    out = subprocess.run([PAYCTL, "accounts", "list"], capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "PAYD_API_KEY" in out.stderr


# ---- payments and the retry policy ----

def test_create_prints_the_payment_and_credits_the_account(alice, account):
    payment = create_payment(alice, account, 4200, "tok_visa", "--description", "first",
                             "--metadata", "cart=c-1", "--metadata", "channel=cli")
    assert payment["object"] == "payment"
    assert payment["status"] == "succeeded"
    assert payment["amount"] == 4200 and payment["currency"] == "USD"
    assert payment["metadata"] == {"cart": "c-1", "channel": "cli"}
    assert ok(alice, "payments", "get", payment["id"])["id"] == payment["id"]
    assert ok(alice, "accounts", "get", account["id"])["balance"] == 4200


def test_lost_response_is_retried_with_one_key_and_credits_once(alice, account):
    out = payctl(alice, "--verbose", "payments", "create", "--account", account["id"],
                 "--amount", "4200", "--currency", "USD", "--source", "tok_lostResponse")
    assert out.returncode == 0, (out.stdout, out.stderr)
    payment = json.loads(out.stdout)
    assert payment["status"] == "succeeded"

    attempts = attempt_lines(out.stderr)
    assert len(attempts) == 2, out.stderr
    assert "503 processor_unavailable" in attempts[0] and "retrying in" in attempts[0]
    assert "201" in attempts[1] and "done" in attempts[1]
    keys = {re.search(r"Idempotency-Key (\S+)\]", line).group(1) for line in attempts}
    assert len(keys) == 1, attempts

    assert ok(alice, "accounts", "get", account["id"])["balance"] == 4200
    assert ok(alice, "payments", "count", "--account", account["id"])["count"] == 1
    listed = lines(payctl(alice, "payments", "list", "--account", account["id"]).stdout)
    assert [p["id"] for p in listed] == [payment["id"]]


def test_the_same_key_twice_is_one_payment(alice, account):
    args = ("--idempotency-key", "payctl-test-" + os.urandom(6).hex())
    first = create_payment(alice, account, 700, "tok_visa", *args)
    second = create_payment(alice, account, 700, "tok_visa", *args)
    assert first == second
    assert ok(alice, "accounts", "get", account["id"])["balance"] == 700


def test_a_decline_exits_1_at_once(alice, account):
    out = payctl(alice, "--verbose", "payments", "create", "--account", account["id"],
                 "--amount", "500", "--currency", "USD", "--source", "tok_chargeDeclined")
    assert out.returncode == 1, (out.stdout, out.stderr)
    problem = json.loads(out.stdout)
    assert problem["code"] == "card_declined"
    assert problem["payment"]["status"] == "failed"
    assert len(attempt_lines(out.stderr)) == 1
    assert "402 card_declined" in out.stderr


def test_a_missing_payment_exits_1(alice):
    out = payctl(alice, "payments", "get", "pay_0000000000000")
    assert out.returncode == 1
    assert json.loads(out.stdout)["code"] == "resource_missing"


def test_a_stopped_server_exits_3_after_its_retries(fresh_server):
    server = fresh_server()
    user = server.create_user("carol")
    server.stop()
    out = payctl(user, "--verbose", "--max-retries", "2", "--retry-base", "50ms",
                 "accounts", "list")
    assert out.returncode == 3, (out.stdout, out.stderr)
    assert out.stdout == ""
    attempts = attempt_lines(out.stderr)
    assert len(attempts) == 3, out.stderr
    assert "no answer" in attempts[0] and "retrying in" in attempts[0]
    assert "giving up (max_retries)" in attempts[2]
    assert "gave up after 3 attempts" in out.stderr


# ---- lists and export ----

def walk_pages(user, account, limit):
    """payctl payments list, one page at a time, following next_cursor by hand."""
    pages, cursor = [], None
    while True:
        args = ["payments", "list", "--account", account["id"], "--limit", str(limit)]
        page = ok(user, *args, "--format", "page", *(["--cursor", cursor] if cursor else []))
        as_lines = lines(payctl(user, *args, *(["--cursor", cursor] if cursor else [])).stdout)
        assert as_lines == page["data"]
        pages.append(page["data"])
        if not page["has_more"]:
            assert page["next_cursor"] is None
            return pages
        cursor = page["next_cursor"]


def test_export_of_45_payments_matches_list_page_by_page(alice, account, tmp_path):
    fill(alice, account, 45)
    target = tmp_path / "payments.jsonl"
    out = payctl(alice, "payments", "export", "--account", account["id"], "--output", str(target))
    assert out.returncode == 0, out.stderr
    # No progress line when stderr is not a tty; the summary only, with the right count.
    assert out.stdout == ""
    assert re.fullmatch(r"payctl: exported 45 items \(1 page\) in [0-9.]+ s to " +
                        re.escape(str(target)) + "\n", out.stderr), out.stderr
    exported = lines(target.read_text())
    assert len(target.read_text().splitlines()) == 45
    assert len({p["id"] for p in exported}) == 45

    pages = walk_pages(alice, account, 10)
    assert [len(p) for p in pages] == [10, 10, 10, 10, 5]
    assert [p for page in pages for p in page] == exported

    to_stdout = payctl(alice, "payments", "export", "--account", account["id"])
    assert lines(to_stdout.stdout) == exported
    assert to_stdout.stderr.startswith("payctl: exported 45 items (1 page) in ")
    every = payctl(alice, "payments", "list", "--account", account["id"], "--all", "--limit", "7")
    assert lines(every.stdout) == exported
    assert ok(alice, "payments", "count", "--account", account["id"])["count"] == 45


def test_export_filters_by_status(alice, account):
    create_payment(alice, account, 300)
    out = payctl(alice, "payments", "create", "--account", account["id"], "--amount", "400",
                 "--currency", "USD", "--source", "tok_chargeDeclined")
    assert out.returncode == 1
    failed = lines(payctl(alice, "payments", "export", "--account", account["id"],
                          "--status", "failed").stdout)
    assert [p["amount"] for p in failed] == [400]


def test_csv_export_has_a_header_and_escapes(alice, account, tmp_path):
    tricky = ['plain', 'comma, inside', 'say "hi"', 'two\nlines', '  padded ', 'caf\u00e9 \u20ac']
    for i, text in enumerate(tricky):
        r = alice.pay(account, amount=10 + i, description=text, metadata={"k": f"v,{i}"})
        assert r.status == 201, r
    target = tmp_path / "payments.csv"
    out = payctl(alice, "payments", "export", "--account", account["id"], "--format", "csv",
                 "--output", str(target))
    assert out.returncode == 0, out.stderr
    raw = target.read_bytes().decode()
    assert raw.startswith(",".join(CSV_COLUMNS) + "\r\n")
    assert '"say ""hi"""' in raw and '"comma, inside"' in raw

    rows = list(csv.reader(io.StringIO(raw, newline="")))
    assert rows[0] == CSV_COLUMNS
    exported = lines(payctl(alice, "payments", "export", "--account", account["id"]).stdout)
    assert len(rows) == 1 + len(tricky)
    for row, payment in zip(rows[1:], exported):
        record = dict(zip(CSV_COLUMNS, row))
        assert record["id"] == payment["id"]
        assert record["amount"] == str(payment["amount"])
        assert record["description"] == payment["description"]
        assert json.loads(record["metadata"]) == payment["metadata"]
        assert record["order_id"] == ""  # null is an empty field
    assert sorted(r[CSV_COLUMNS.index("description")] for r in rows[1:]) == sorted(tricky)


def test_csv_export_shows_a_holds_course(alice, tmp_path):
    """A manual payment captured in part, then canceled: its row says how it was captured, what
    was captured and released, and when it was canceled (docs/api.md §17)."""
    account = alice.create_account()
    held = alice.pay(account, amount=900, capture_method="manual").json
    assert alice.post(f"/v1/payments/{held['id']}/capture", {"amount_to_capture": 300, "final_capture": False},
                      idem=os.urandom(8).hex()).status == 200
    canceled = alice.post(f"/v1/payments/{held['id']}/cancel", {}, idem=os.urandom(8).hex())
    assert canceled.status == 200, canceled
    alice.pay(account, amount=50)
    target = tmp_path / "holds.csv"
    out = payctl(alice, "payments", "export", "--account", account["id"], "--format", "csv",
                 "--output", str(target))
    assert out.returncode == 0, out.stderr
    rows = [dict(zip(CSV_COLUMNS, r))
            for r in list(csv.reader(io.StringIO(target.read_bytes().decode(), newline="")))[1:]]
    by_id = {r["id"]: r for r in rows}
    row = by_id[held["id"]]
    assert (row["capture_method"], row["amount_captured"], row["amount_released"]) == (
        "manual", "300", "600")
    assert row["canceled_at"] == canceled.json["canceled_at"] and row["canceled_at"]
    auto = next(r for r in rows if r["id"] != held["id"])
    assert (auto["capture_method"], auto["amount_captured"], auto["canceled_at"]) == (
        "automatic", "50", "")


def test_export_draws_progress_only_on_a_terminal(alice, account, tmp_path):
    fill(alice, account, 3)
    target = tmp_path / "out.jsonl"
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([PAYCTL, "payments", "export", "--account", account["id"],
                                 "--output", str(target), "--limit", "1"],
                                stdout=subprocess.DEVNULL, stderr=follower,
                                env=payctl_env(alice))
        os.close(follower)
        follower = None
        seen = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 30)
            if not ready:
                break
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closes when payctl exits
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(30) == 0
    finally:
        os.close(leader)
        if follower is not None:
            os.close(follower)
    text = seen.decode()
    assert "exporting: 3 items, 3 pages" in text, text
    assert "exporting: 4 items" not in text  # the count is what was written, never ahead
    assert "items/s" in text
    # The line is cleared at the end and the summary follows.
    assert re.search(r"\r\x1b\[Kpayctl: exported 3 items \([34] pages\) in [0-9.]+ s to ",
                     text), repr(text)
    assert len(lines(target.read_text())) == 3


def test_single_page_listing_and_cursor(alice, account):
    fill(alice, account, 5)
    first = payctl(alice, "payments", "list", "--account", account["id"], "--limit", "2")
    assert first.returncode == 0 and len(lines(first.stdout)) == 2
    page = ok(alice, "payments", "list", "--account", account["id"], "--limit", "2",
              "--format", "page")
    assert page["has_more"] is True and page["data"] == lines(first.stdout)
    second = lines(payctl(alice, "payments", "list", "--account", account["id"], "--limit", "2",
                          "--cursor", page["next_cursor"]).stdout)
    assert len(second) == 2 and not {p["id"] for p in second} & {p["id"] for p in page["data"]}
    bad = payctl(alice, "payments", "list", "--account", account["id"], "--cursor", "garbage")
    assert bad.returncode == 1 and "invalid_cursor" in bad.stderr


# ---- a tour of the other commands ----

def test_accounts_commands(alice):
    created = ok(alice, "accounts", "create", "--currency", "eur", "--name", "Savings")
    assert created["currency"] == "EUR" and created["name"] == "Savings"
    assert ok(alice, "accounts", "get", created["id"])["balance"] == 0
    listed = lines(payctl(alice, "accounts", "list", "--all").stdout)
    assert created["id"] in {a["id"] for a in listed}


def test_orders_and_refunds_commands(alice, account):
    external = "ext-" + os.urandom(4).hex()
    order = ok(alice, "orders", "create", "--external-id", external, "--amount", "2500",
               "--currency", "USD", "--description", "two books")
    assert order["status"] == "created"
    again = payctl(alice, "orders", "create", "--external-id", external, "--amount", "2500",
                   "--currency", "USD")
    assert again.returncode == 1 and json.loads(again.stdout)["code"] == "duplicate_order"

    payment = create_payment(alice, account, 2500, "tok_visa", "--order", order["id"])
    assert ok(alice, "orders", "get", order["id"])["status"] == "paid"
    assert order["id"] in {o["id"] for o in lines(
        payctl(alice, "orders", "list", "--status", "paid", "--all").stdout)}

    shipped = ok(alice, "orders", "set-status", order["id"], "--status", "shipped")
    assert shipped["status"] == "shipped"
    stale = payctl(alice, "orders", "set-status", order["id"], "--status", "completed",
                   "--if-match", '"v1"')
    assert stale.returncode == 1 and json.loads(stale.stdout)["code"] == "version_conflict"

    refund = ok(alice, "refunds", "create", payment["id"], "--amount", "1000",
                "--reason", "requested_by_customer")
    assert refund["amount"] == 1000
    rest = ok(alice, "refunds", "create", "--payment", payment["id"])
    assert rest["amount"] == 1500
    refunds = lines(payctl(alice, "refunds", "list", payment["id"]).stdout)
    assert sorted(r["amount"] for r in refunds) == [1000, 1500]
    assert ok(alice, "payments", "get", payment["id"])["status"] == "refunded"
    assert ok(alice, "accounts", "get", account["id"])["balance"] == 0


def test_transfers_commands(alice, account):
    create_payment(alice, account, 1000)
    other = alice.create_account()
    seq = "seq-" + os.urandom(4).hex()
    args = ("transfers", "create", "--biz-seq", seq, "--from", account["id"], "--to",
            other["id"], "--amount", "300", "--currency", "USD")
    transfer = ok(alice, *args)
    assert transfer["status"] == "succeeded"
    assert ok(alice, *args) == transfer  # biz_seq replays
    assert ok(alice, "transfers", "get", transfer["id"])["id"] == transfer["id"]
    assert ok(alice, "transfers", "get", "--biz-seq", seq)["id"] == transfer["id"]
    assert ok(alice, "accounts", "get", other["id"])["balance"] == 300
    assert payctl(alice, "transfers", "get").returncode == 2


def test_ledger_commands(alice):
    a, b = alice.create_account(), alice.create_account()
    payment = create_payment(alice, a, 1200)
    assert ok(alice, "transfers", "create", "--biz-seq", "seq-" + os.urandom(4).hex(), "--from",
              a["id"], "--to", b["id"], "--amount", "200", "--currency", "USD")
    assert ok(alice, "balance", a["id"]) == {"object": "balance", "livemode": True,
                                             "available": 1000, "pending": 0, "currency": "USD"}
    assert ok(alice, "balance", "--account", b["id"])["available"] == 200
    mine = lines(payctl(alice, "balance-transactions", "list", "--account", a["id"],
                        "--all").stdout)
    assert sorted((t["type"], t["amount"]) for t in mine) == [("charge", 1200),
                                                               ("transfer", -200)]
    charge = lines(payctl(alice, "balance-transactions", "list", "--source", payment["id"],
                          "--type", "charge").stdout)
    assert [t["account_id"] for t in charge] == [a["id"]]
    assert ok(alice, "balance-transactions", "get", charge[0]["id"]) == charge[0]
    bad = payctl(alice, "balance-transactions", "list", "--type", "bonus")
    assert bad.returncode == 1 and json.loads(bad.stdout)["code"] == "invalid_parameter"
    assert payctl(alice, "balance").returncode == 2


def test_users_commands(alice):
    me = ok(alice, "users", "me")
    assert me["id"] == alice.id
    updated = ok(alice, "users", "update", "--name", "Alice Liddell", "--version",
                 str(me["version"]))
    assert updated["name"] == "Alice Liddell" and updated["version"] == me["version"] + 1
    stale = payctl(alice, "users", "update", "--name", "x", "--version", str(me["version"]))
    assert stale.returncode == 1 and json.loads(stale.stdout)["code"] == "version_conflict"


def test_products_commands(alice):
    sku = "sku-" + os.urandom(4).hex()
    product = ok(alice, "products", "create", "--sku", sku, "--name", "Widget", "--stock", "5")
    assert product["stock"] == 5
    reservation = ok(alice, "products", "reserve", sku, "--quantity", "3")
    assert reservation["quantity"] == 3
    assert ok(alice, "products", "get", sku)["stock"] == 2
    short = payctl(alice, "products", "reserve", sku, "--quantity", "3")
    assert short.returncode == 1 and json.loads(short.stdout)["code"] == "out_of_stock"


# ---- the library's example program ----

def test_the_example_program_creates_and_lists(alice):
    env = payctl_env(alice)
    out = subprocess.run([EXAMPLE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, (out.stdout, out.stderr)
    account = re.search(r"^account (acct_\w+)$", out.stdout, re.M).group(1)
    payment = re.search(r"^payment (pay_\w+) succeeded after 1 attempt\(s\), "
                        r"Idempotency-Key [0-9a-f-]{36}$", out.stdout, re.M).group(1)
    listed = [json.loads(line[len("listed "):]) for line in out.stdout.splitlines()
              if line.startswith("listed ")]
    assert [p["id"] for p in listed] == [payment]
    assert listed[0]["account_id"] == account
    assert "1 payment(s) in 1 page(s)" in out.stdout


# ---- the operator's kit: version, unreachable servers, refusals, request, keys ----
# (completion and profiles: test_payctl_completion_profiles.py)

def test_version_names_the_revision():
    from conftest import PAYD
    out = payctl(None, "--version")
    assert out.returncode == 0 and out.stderr == ""
    m = re.fullmatch(r"payctl (\d+\.\d+\.\d+) \(git (\S+)\)\n", out.stdout)
    assert m, out.stdout
    server = subprocess.run([PAYD, "--version"], capture_output=True, text=True).stdout
    assert server == f"payd {m.group(1)} (git {m.group(2)})\n"


@pytest.mark.parametrize("url", ["ftp://x", "http://", "localhost:8080", "http:// spaced"])
def test_a_bad_url_is_a_usage_error(url):
    out = payctl(None, "accounts", "list", url=url)
    assert out.returncode == 2, (url, out.stderr)
    assert "--url" in out.stderr and out.stdout == ""


def test_an_unreachable_server_is_reported_at_once(fresh_server):
    """With the default policy payctl retries for seconds; it says so on its first failure
    instead of staying silent until it gives up."""
    server = fresh_server()
    user = server.create_user("dora")
    server.stop()
    proc = subprocess.Popen([PAYCTL, "accounts", "list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=payctl_env(user))
    try:
        first = proc.stderr.readline()
        still_retrying = proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert first.startswith(f"payctl: cannot reach {server.url} ("), first
    assert "retrying" in first and "--verbose" in first
    assert still_retrying  # the line came while it retried, not after it gave up

    out = payctl(user, "--max-retries", "0", "accounts", "list")
    assert out.returncode == 3 and out.stdout == ""
    assert f"cannot reach {server.url}" in out.stderr and "gave up after 1 attempt" in out.stderr


def test_every_refusal_prints_the_problem_on_stdout(alice, tmp_path):
    missing = "acct_0000000000000"
    target = tmp_path / "never.jsonl"
    for args in (["payments", "list", "--account", missing],
                 ["payments", "list", "--account", missing, "--all"],
                 ["payments", "export", "--account", missing],
                 ["payments", "export", "--account", missing, "--output", str(target)],
                 ["payments", "get", "pay_0000000000000"],
                 ["request", "GET", "/v1/nothing/here"]):
        out = payctl(alice, *args)
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        problem = json.loads(out.stdout)
        assert problem["status"] == 404 and problem["code"] in ("resource_missing",
                                                                "route_not_found"), args
    assert not target.exists()


def test_request_sends_anything_with_the_same_rules(alice, fresh_server):
    me = ok(alice, "request", "GET", "/v1/users/me")
    assert me["id"] == alice.id
    made = ok(alice, "request", "post", "/v1/accounts", "-d", '{"currency": "eur"}')
    assert made["object"] == "account" and made["currency"] == "EUR"
    page = ok(alice, "request", "GET", "/v1/accounts?limit=1")
    assert len(page["data"]) == 1 and page["has_more"] is True

    key = "request-" + os.urandom(6).hex()
    first = ok(alice, "request", "POST", "/v1/accounts", "-d", '{"currency":"USD"}',
               "--idempotency-key", key)
    again = ok(alice, "request", "POST", "/v1/accounts", "--data", '{"currency":"USD"}',
               "--idempotency-key", key)
    assert first["id"] == again["id"]

    refused = payctl(alice, "request", "POST", "/v1/accounts", "-d", '{"currency": "US"}')
    assert refused.returncode == 1 and json.loads(refused.stdout)["code"] == "invalid_parameter"
    for bad in (["request", "GET"], ["request", "FETCH", "/v1/accounts"],
                ["request", "GET", "v1/accounts"], ["request", "GET", "/v1/accounts", "-d", "{}"],
                ["request", "POST", "/v1/accounts", "-d", "{not json"],
                ["request", "POST", "/v1/accounts", "--bogus", "1"]):
        out = payctl(alice, *bad)
        assert out.returncode == 2 and out.stdout == "", (bad, out.stderr)
    assert payctl(None, "request", "--help").stdout.startswith("usage: payctl request METHOD")

    # Retries: every attempt of a POST carries the same generated key.
    server = fresh_server()
    user = server.create_user("erin")
    server.stop()
    out = payctl(user, "--verbose", "--max-retries", "2", "--retry-base", "50ms",
                 "request", "POST", "/v1/accounts", "-d", '{"currency":"USD"}')
    assert out.returncode == 3, out.stderr
    attempts = attempt_lines(out.stderr)
    keys = {re.search(r"\[Idempotency-Key (\S+)\]", a).group(1) for a in attempts}
    assert len(attempts) == 3 and len(keys) == 1, out.stderr
    assert f"--idempotency-key {keys.pop()}" in out.stderr


def test_keys_commands_rotate_a_key(fresh_server):
    server = fresh_server()
    user = server.create_user("frank")
    listed = lines(payctl(user, "keys", "list").stdout)
    assert len(listed) == 1 and "api_key" not in listed[0]
    made = ok(user, "keys", "create", "--name", "next")
    assert made["api_key"].startswith(made["prefix"])
    from conftest import User
    rotated = User(server, user.id, made["api_key"])
    revoked = ok(rotated, "keys", "revoke", listed[0]["id"])
    assert revoked["status"] == "revoked"
    gone = payctl(user, "users", "me")
    assert gone.returncode == 1 and json.loads(gone.stdout)["code"] == "unauthorized"
    self_revoke = payctl(rotated, "keys", "revoke", made["id"])
    assert self_revoke.returncode == 1
    assert json.loads(self_revoke.stdout)["code"] == "api_key_in_use"
    assert [k["id"] for k in lines(payctl(rotated, "keys", "list", "--status", "active").stdout)] \
        == [made["id"]]
