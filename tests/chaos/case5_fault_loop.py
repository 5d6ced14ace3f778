"""Case 5: a fault loop over every write job of a payment, a refund, a transfer and a reservation.

For each operation and each N, a payd started with PAYD_FAULT=fail-write=N (the Nth write job
fails as a database error would) and, separately, crash-after-commit=N (the process dies right
after its Nth commit, then restarts clean) serves one such operation; its client resends the
same key (the same biz_seq for a transfer) until a final answer. Then the books must balance:
one record per operation, balances equal to their rows, refunds equal to what their payments
say, stock equal to what reservations took, no key left open, no charge unrecorded."""
import json
import os

import chaos

ALLOWED_RETRIES = {(503, "database_unavailable"), (503, "processor_unavailable"),
                   (409, "request_in_progress")}
JOBS = 8  # write jobs are counted from the process start (lease, secret, sweep included)
STOCK = 1000


def account_errors(books):
    return books.rows(
        "SELECT a.id FROM accounts a WHERE a.balance <> "
        "COALESCE((SELECT SUM(p.amount - p.refunded_amount) FROM payments p "
        "  WHERE p.account_id = a.id AND p.status <> 'failed'), 0)"
        " + COALESCE((SELECT SUM(t.amount) FROM transfers t WHERE t.to_account = a.id "
        "  AND t.status = 'succeeded'), 0)"
        " - COALESCE((SELECT SUM(t.amount) FROM transfers t WHERE t.from_account = a.id "
        "  AND t.status = 'succeeded'), 0)")


def main():
    wd = chaos.workdir()
    db = os.path.join(wd, "payd.db")
    api_key, (acct_a, acct_b) = chaos.setup_user(db, accounts=2)
    args = chaos.FAST + ["--recovery-interval", "1h"]  # the clients resume their own keys
    clean = chaos.Node(wd, db, args, name="clean").start()
    post = lambda path, body, idem=None: chaos.until_final(  # noqa: E731
        [clean.url], "POST", path, api_key, body, idem)
    # what the refunds will refund, and what the reservations take from
    runs = [(fault, n) for fault in ("fail-write", "crash-after-commit") for n in range(1, JOBS + 1)]
    to_refund = []
    for _ in runs:
        s, _, raw = post("/v1/payments", {"account_id": acct_a, "amount": 5000, "currency": "USD",
                                          "source": "tok_visa"}, chaos.new_key())
        to_refund.append(json.loads(raw)["id"])
    post("/v1/products", {"sku": "chaos", "name": "chaos", "stock": STOCK}, chaos.new_key())
    clean.stop()

    ops = {
        "payment": lambda i: ("/v1/payments", {"account_id": acct_b, "amount": 300 + i,
                                                "currency": "USD", "source": "tok_visa"}, True),
        "refund": lambda i: (f"/v1/payments/{to_refund[i]}/refunds", {"amount": 1200}, True),
        "transfer": lambda i: ("/v1/transfers", {"biz_seq": f"chaos-{i}", "from_account": acct_a,
                                                 "to_account": acct_b, "amount": 50,
                                                 "currency": "USD"}, False),
        "reservation": lambda i: ("/v1/products/chaos/reservations", {"quantity": 2}, True),
    }
    failures, acks, kills, faults_hit, retried = [], {}, 0, 0, []
    for op, make in ops.items():
        for i, (fault, n) in enumerate(runs):
            path, body, keyed = make(i)
            idem = chaos.new_key() if keyed else None
            node = chaos.Node(wd, db, args, env={"PAYD_FAULT": f"{fault}={n}"},
                              name=f"{op}-{fault}-{n}")
            node.spawn()  # not waited for: the fault may strike its first background job
            restarted = []

            def url():
                # a crashed node is restarted clean on the same port, as a supervisor would
                if node.proc.poll() is not None:
                    again = chaos.Node(wd, db, args, name=f"{op}-restart").start(node.port)
                    restarted.append(again)
                    node.proc = again.proc
                return node.url

            seen = []
            status, _, raw = chaos.until_final(url, "POST", path, api_key, body, idem, seen=seen)
            # a failed write is in doubt and resumable: never a 500, never a 404
            odd = [x for x in seen if x not in ALLOWED_RETRIES]
            if odd:
                failures.append(f"{op} {fault}={n}: answers {odd}")
            retried.extend(seen)
            kills += len(restarted)
            faults_hit += open(node.log_path).read().count("fault injected")
            if status != 201:
                failures.append(f"{op} {fault}={n}: ended {status} {raw[:200]!r}")
            acks[(op, i)] = (status, raw, path, body, idem)
            if keyed:
                s2, h2, again = chaos.until_final(url, "POST", path, api_key, body, idem)
                if again != raw or h2.get("idempotent-replayed") != "true":
                    failures.append(f"{op} {fault}={n}: the replay differs from the first 201")
            node.stop()

    clean = chaos.Node(wd, db, chaos.FAST, name="final").start()
    books = chaos.Books(db)
    if not chaos.wait_settled(books):
        failures.append("keys still open after the loop")
    count = lambda sql: books.value(sql)  # noqa: E731
    want = len(runs)
    payments = count(f"SELECT count(*) FROM payments WHERE account_id = "
                     f"{_num(acct_b)} AND status = 'succeeded'")
    refunds = count("SELECT count(*) FROM refunds WHERE status = 'succeeded'")
    pending = count("SELECT count(*) FROM refunds WHERE status <> 'succeeded'")
    transfers = count("SELECT count(*) FROM transfers WHERE status = 'succeeded'")
    reserved = count("SELECT COALESCE(SUM(quantity), 0) FROM reservations")
    stock = count("SELECT stock FROM products WHERE sku = 'chaos'")
    refund_mismatch = count("SELECT count(*) FROM payments p WHERE p.refunded_amount <> "
                            "COALESCE((SELECT SUM(r.amount) FROM refunds r "
                            "WHERE r.payment_id = p.id), 0)")
    net, voided = books.net_charges()
    carried = {r[0] for r in books.rows("SELECT processor_charge_id FROM payments")}
    orphans = len(net - carried)
    double = max(0, len(net) - len(carried))
    processor_refunds = count("SELECT count(*) FROM processor_refunds "
                              "WHERE processor_key NOT LIKE '%:void'")
    bad_accounts = account_errors(books)
    lost = sum(1 for a in acks.values() if a[0] != 201)
    checks = [(payments, want, "payments"), (refunds, want, "refunds"), (pending, 0, "pending"),
              (transfers, want, "transfers"), (reserved, 2 * want, "reserved units"),
              (stock, STOCK - 2 * want, "stock"), (refund_mismatch, 0, "refund sums"),
              (processor_refunds, want, "processor refunds"), (len(bad_accounts), 0, "balances"),
              (orphans, 0, "orphans"), (double, 0, "double charges")]
    for got, expected, what in checks:
        if got != expected:
            failures.append(f"{what}: {got}, want {expected}")
    ledger_failures, ledger = chaos.ledger_verify(books)
    failures += ledger_failures
    clean.stop()
    print(f"case5 fault loop: keys={len(acks)} acks={sum(1 for a in acks.values() if a[0] == 201)} "
          f"kills={kills} faults={faults_hit} double_charges={double} lost_acks={lost} "
          f"orphans={orphans} voided={len(voided)} payments={payments} refunds={refunds} "
          f"transfers={transfers} reserved={reserved} "
          f"database_unavailable={retried.count((503, 'database_unavailable'))} "
          f"ledger_entries={ledger.get('ledger_entries')} "
          f"ledger_violations={ledger.get('ledger_violations')}", flush=True)
    chaos.finish(failures)


def _num(text_id):
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    n = 0
    for ch in text_id.split("_", 1)[1]:
        n = n * 32 + alphabet.index(ch)
    return n


if __name__ == "__main__":
    main()
