#!/usr/bin/env python3
"""Helpers for bench/run.sh (standard library only).

  free-port                          print a free TCP port on 127.0.0.1
  wait-ready PORT SECONDS            wait until GET /healthz answers 200
  wait-quiet SECONDS PCT             wait until the machine's CPUs are less than PCT % busy
  proc PID...                        print the server's CPU seconds, thread switches and VmHWM/VmRSS
                                     (summed over PIDs: nginx is a master and its workers) and the
                                     machine's busy time
  wrk-parse FILE                     parse wrk --latency output into JSON
  wrk-record RESULTS NAME WRK BEFORE AFTER [TIMES]   record one wrk run (see measure in run.sh)
  keep-median RESULTS NAME           keep the median run of NAME (by req/s)
  batches PORT / batch-delta ...     write jobs and commits from /metrics
  fsync-probe DIR N                  time N fdatasync calls after overwriting 4 KiB
  post PORT PATH BODY [KEY]          one authenticated POST; print {"status", "body"}
  mkkeys PORT ACCOUNT NONCE N        create N payments with keys replay-NONCE-0..N-1
  latency PORT PATH N                N sequential keep-alive GETs: print p50/p99/mean in ms
  walk PORT ACCOUNT ROWS LIMIT       follow next_cursor until ROWS rows are behind: print the cursor
  sql-timing DB ACCOUNT DEPTH N      time OFFSET vs keyset queries at DEPTH with Python's sqlite3
  json-get FIELD [JSON]              print one field of a JSON object
  record FILE NAME JSON              append {"name": NAME, ...JSON} to the results file
  render RESULTS_JSONL OUT_MD        write the generated section of bench/RESULTS.md

The API key is read from BENCH_API_KEY.
"""
import http.client
import json
import os
import re
import socket
import sqlite3
import statistics
import sys
import time
import urllib.parse


def api_key():
    return os.environ["BENCH_API_KEY"]


def conn(port):
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)


def get_json(c, path):
    c.request("GET", path, headers={"Authorization": "Bearer " + api_key()})
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"GET {path}: {r.status} {body[:300]!r}")
    return json.loads(body)


def cmd_free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()


def cmd_wait_ready(port, seconds):
    deadline = time.time() + float(seconds)
    while time.time() < deadline:
        try:
            c = conn(port)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit(f"nothing answered GET /healthz on port {port} within {seconds}s")


def cmd_proc(*pids):
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime (fields 14, 15)
    out = {"cpu_s": cpu}
    with open("/proc/stat") as f:
        cols = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal: everything but idle and iowait is busy
    out["machine_busy_s"] = (sum(cols[:8]) - cols[3] - cols[4]) / ticks
    out["t"] = time.time()
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key = line.split(":")[0].lower() + "_kb"
                    out[key] = out.get(key, 0) + int(line.split()[1])
    out["switches"] = sum(thread_switches(pid) for pid in pids)
    print(json.dumps(out))


def thread_switches(pid):
    """voluntary + involuntary context switches of all the process's threads so far (a process's
    own status counts only its main thread). A thread that ends takes its count along: payd's and
    nginx's threads live as long as their process."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches:",
                                        "nonvoluntary_ctxt_switches:")):
                        total += int(line.split()[1])
        except FileNotFoundError:  # the thread ended since the listing
            pass
    return total


def machine_busy():
    with open("/proc/stat") as f:
        cols = [int(x) for x in f.readline().split()[1:]]
    return (sum(cols[:8]) - cols[3] - cols[4]) / os.sysconf("SC_CLK_TCK")


def cmd_wait_quiet(max_seconds, threshold_pct):
    """Wait (up to max_seconds) until the machine has been nearly idle for half a second: other
    work running beside a measurement skews it. Prints the seconds waited and the last load."""
    start = time.time()
    load = 100.0
    while True:
        b = machine_busy()
        time.sleep(0.5)
        load = (machine_busy() - b) / (0.5 * os.cpu_count()) * 100
        if load < float(threshold_pct) or time.time() - start > float(max_seconds):
            break
    print(json.dumps({"waited_s": round(time.time() - start, 1), "load_pct": round(load, 1)}))


def cmd_keep_median(results, name):
    """Keep one record of `name`: its median run by req/s (of an even count, the slower middle
    one). All runs' req/s stay listed in `runs`."""
    rows = [json.loads(l) for l in open(results)]
    mine = sorted((r for r in rows if r.get("name") == name), key=lambda r: r.get("rps") or 0)
    if not mine:
        return
    median = dict(mine[(len(mine) - 1) // 2])
    median["runs"] = [r.get("rps") for r in rows if r.get("name") == name]
    rows = [r for r in rows if r.get("name") != name] + [median]
    with open(results, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


def to_ms(text):
    m = re.fullmatch(r"([0-9.]+)(us|ms|s|m)", text)
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def cmd_wrk_parse(path):
    text = open(path).read()
    out = {}
    m = re.search(r"Requests/sec:\s+([0-9.]+)", text)
    out["rps"] = float(m.group(1)) if m else None
    m = re.search(r"(\d+) requests in ([0-9.]+)(\w+)", text)
    out["requests"] = int(m.group(1)) if m else None
    for pct in ("50", "75", "90", "99"):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", text, re.M)
        out[f"p{pct}_ms"] = to_ms(m.group(1)) if m else None
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    out["non2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: (.*)", text)
    out["socket_errors"] = m.group(1).strip() if m else None
    print(json.dumps(out))


def cmd_post(port, path, body, key=None):
    c = conn(port)
    h = {"Authorization": "Bearer " + api_key(), "Content-Type": "application/json"}
    if key:
        h["Idempotency-Key"] = key
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    print(json.dumps({"status": r.status, "body": json.loads(r.read() or b"null")}))


def payment_body(account):
    # byte-identical to the body in wrk/replay_payments.lua (the fingerprint would agree anyway)
    return ('{"account_id":"%s","amount":4200,"currency":"USD","source":"tok_visa"}' % account)


def cmd_mkkeys(port, account, nonce, n):
    c = conn(port)
    ids = []
    for k in range(int(n)):
        c.request("POST", "/v1/payments", body=payment_body(account),
                  headers={"Authorization": "Bearer " + api_key(),
                           "Content-Type": "application/json",
                           "Idempotency-Key": f"replay-{nonce}-{k}"})
        r = c.getresponse()
        body = json.loads(r.read())
        if r.status != 201:
            raise SystemExit(f"creating replay key {k}: {r.status} {body}")
        ids.append(body["id"])
    print(ids[0])


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[i]


def summarize(samples_ms):
    s = sorted(samples_ms)
    return {"n": len(s), "p50_ms": percentile(s, 50), "p99_ms": percentile(s, 99),
            "mean_ms": statistics.fmean(s), "min_ms": s[0]}


def cmd_latency(port, path, n):
    c = conn(port)
    get_json(c, path)  # warm the connection and the statement cache
    samples = []
    for _ in range(int(n)):
        t = time.perf_counter()
        get_json(c, path)
        samples.append((time.perf_counter() - t) * 1e3)
    print(json.dumps(summarize(samples)))


def cmd_walk(port, account, rows, limit):
    rows, limit = int(rows), int(limit)
    c = conn(port)
    base = f"/v1/accounts/{account}/payments?limit={limit}"
    cursor, seen, calls = None, 0, 0
    t = time.perf_counter()
    while seen < rows:
        page = get_json(c, base + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else ""))
        calls += 1
        seen += len(page["data"])
        if not page["has_more"]:
            raise SystemExit(f"the list ended after {seen} rows")
        cursor = page["next_cursor"]
    elapsed = time.perf_counter() - t
    print(json.dumps({"cursor": cursor, "rows_behind": seen, "calls": calls,
                      "seconds": elapsed, "ms_per_call": elapsed / calls * 1e3}))


COLUMNS = ("id, account_id, amount, currency, status, source, order_id, description, metadata, "
           "refunded_amount, processor_charge_id, created_at")


def time_query(db, sql, args, n):
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        rows = db.execute(sql, args).fetchall()
        samples.append((time.perf_counter() - t) * 1e3)
    return summarize(samples), len(rows)


CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def decode_id(text):
    """acct_0a1b2c3d4e5f6 -> the 64-bit integer stored in the database."""
    v = 0
    for ch in text.split("_", 1)[1]:
        v = v << 5 | CROCKFORD.index(ch)
    return v


def cmd_sql_timing(path, account, depth, n):
    depth, n = int(depth), int(n)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    acct = decode_id(account)
    # the (created_at, id) of the last row before the deep page: found the slow way, once
    t_at, from_id = db.execute(
        "SELECT created_at, id FROM payments WHERE account_id = ? "
        "ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?", (acct, depth - 1)).fetchone()
    offset_sql = (f"SELECT {COLUMNS} FROM payments WHERE account_id = ? "
                  "ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET ?")
    keyset_sql = (f"SELECT {COLUMNS} FROM payments WHERE account_id = ? "
                  "AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 21")
    first_sql = (f"SELECT {COLUMNS} FROM payments WHERE account_id = ? "
                 "ORDER BY created_at DESC, id DESC LIMIT 21")
    offset, n_off = time_query(db, offset_sql, (acct, depth), max(3, n // 50))
    keyset, n_key = time_query(db, keyset_sql, (acct, t_at, from_id), n)
    first, _ = time_query(db, first_sql, (acct,), n)
    same = [r[0] for r in db.execute(offset_sql, (acct, depth)).fetchall()] == \
           [r[0] for r in db.execute(keyset_sql, (acct, t_at, from_id)).fetchall()][:20]
    plan = " | ".join(r[-1] for r in db.execute("EXPLAIN QUERY PLAN " + keyset_sql,
                                                 (acct, t_at, from_id)))
    print(json.dumps({"offset": offset, "keyset": keyset, "first": first,
                      "same_rows": same, "keyset_plan": plan, "depth": depth}))


def bash_times_children(path):
    """the children's user+system seconds from bash's `times` (its second line)"""
    try:
        lines = open(path).read().split("\n")
        total = 0.0
        for part in lines[1].split():
            m = re.fullmatch(r"(\d+)m([0-9.]+)s", part)
            total += int(m.group(1)) * 60 + float(m.group(2))
        return total
    except (OSError, IndexError, AttributeError):
        return None


def cmd_wrk_record(results, name, wrk_file, before, after, times_file=None):
    """One wrk run: its figures plus the server's CPU and thread switches per request and peak
    RSS around it, and how much CPU something other than the server and wrk used meanwhile (other
    work skews the figures)."""
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cmd_wrk_parse(wrk_file)
    d = json.loads(buf.getvalue())
    b, a = json.loads(before), json.loads(after)
    if d.get("requests"):
        d["cpu_us_per_req"] = (a["cpu_s"] - b["cpu_s"]) * 1e6 / d["requests"]
        d["switches_per_req"] = (a["switches"] - b["switches"]) / d["requests"]
    wrk_cpu = bash_times_children(times_file) if times_file else None
    wall = a["t"] - b["t"]
    if wrk_cpu is not None and wall > 0:
        other = (a["machine_busy_s"] - b["machine_busy_s"]) - (a["cpu_s"] - b["cpu_s"]) - wrk_cpu
        d["other_cpu_pct"] = max(0.0, other / (wall * os.cpu_count()) * 100)
    d["vmhwm_kb"] = a.get("vmhwm_kb")
    d["vmrss_kb"] = a.get("vmrss_kb")
    cmd_record(results, name, json.dumps(d))
    print(f"  {name}: {d.get('rps')} req/s, p50 {d.get('p50_ms')} ms, p99 {d.get('p99_ms')} ms, "
          f"non-2xx {d.get('non2xx')}, CPU {d.get('cpu_us_per_req', 0):.1f} us/req, "
          f"{d.get('switches_per_req', 0):.2f} switches/req, "
          f"other load {d.get('other_cpu_pct', -1):.0f}%, "
          f"VmHWM {d.get('vmhwm_kb')} kB", file=sys.stderr)


def cmd_batches(port):
    """jobs and commits so far, from /metrics"""
    c = conn(port)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    jobs = re.search(r"^payd_store_commit_batch_size_sum (\d+)", text, re.M)
    batches = re.search(r"^payd_store_commit_batch_size_count (\d+)", text, re.M)
    print(json.dumps({"jobs": int(jobs.group(1)) if jobs else None,
                      "batches": int(batches.group(1)) if batches else None}))


def cmd_batch_delta(results, name, before, after):
    b, a = json.loads(before), json.loads(after)
    jobs, batches = a["jobs"] - b["jobs"], a["batches"] - b["batches"]
    cmd_record(results, name, json.dumps({"jobs": jobs, "batches": batches,
                                          "mean_batch": jobs / batches if batches else None}))


def cmd_json_get(field, payload=None):
    """print one field of a JSON object given as an argument or on stdin"""
    d = json.loads(payload if payload is not None else sys.stdin.read())
    for part in field.split("."):
        d = d[part]
    print(d)


def cmd_fsync_probe(directory, n):
    """what one durable commit costs this disk: overwrite 4 KiB of an existing file and
    fdatasync, N times (SQLite's WAL is rewritten in place after each checkpoint, so its commits
    need no new blocks)"""
    path = os.path.join(directory, "fsync-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    block = b"x" * 4096
    samples = []
    try:
        os.write(fd, block * 64)
        os.fsync(fd)
        for i in range(int(n)):
            os.pwrite(fd, block, (i % 64) * 4096)
            t = time.perf_counter()
            os.fdatasync(fd)
            samples.append((time.perf_counter() - t) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    print(json.dumps(summarize(samples)))


def cmd_record(path, name, payload):
    d = json.loads(payload)
    d["name"] = name
    with open(path, "a") as f:
        f.write(json.dumps(d) + "\n")


# ---------------------------------------------------------------- rendering

def fmt(v, digits=2):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        if v >= 1000:
            return f"{v:,.0f}"
        return f"{v:.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def verdict(ok):
    if ok is None:  # nothing to judge by (e.g. no nginx figure in this run)
        return "n/a"
    return "met" if ok else "**missed**"


def cmd_render(results_path, out_path):
    rs = {}
    meta = {}
    for line in open(results_path):
        d = json.loads(line)
        if d["name"] == "meta":
            meta = d
        else:
            rs[d["name"]] = d
    L = []
    w = L.append
    w("<!-- BEGIN GENERATED by bench/run.sh: everything down to END GENERATED is overwritten -->")
    w("## Latest run")
    w("")
    w(f"- date: {meta.get('date')}")
    w(f"- machine: {meta.get('nproc')} CPUs ({meta.get('cpu')}), {meta.get('mem')}, "
      f"kernel {meta.get('kernel')}")
    w(f"- payd: `{meta.get('payd')}` (git {meta.get('git')}), SQLite in a temp dir on "
      f"`{meta.get('tmpfs')}`; wrk {meta.get('wrk')}, one thread, pinned to CPU 0; the server "
      f"under test (payd, or nginx with one worker) pinned to CPU 1")
    w(f"- whole run: {meta.get('total_s', 'n/a')} s; load average when it started: "
      f"{meta.get('load', 'n/a')} (other work on the machine skews every figure)")
    w("")
    w("Latencies are wrk's (`--latency`, corrected for coordinated omission) unless marked "
      "*sequential*, which are single keep-alive requests one after another from Python. "
      "payd runs with its access log on (`--access-log=true`, one JSON line per request to a "
      "file in the temp dir). "
      "*CPU/req* is payd's user+system CPU time during the run divided by the requests served. "
      "*switches/req* is the number of times payd's threads were switched out (voluntary plus "
      "involuntary context switches, summed over /proc/PID/task/*/status) during the run "
      "divided by the requests served. "
      "Each wrk measurement runs three times and the table shows the median run, with every "
      "run's req/s beside it. "
      "*Peak RSS* is payd's VmHWM read from /proc after the run (a high-water mark over the "
      "process lifetime so far). *Other load* is the CPU that neither payd nor wrk used during the "
      "run, as a share of all CPUs (time the hypervisor gave to other guests, steal, counts "
      "too): anything above a few per cent means other work took time from the measurement.")
    w("")

    # The project's yardstick: each row's req/s over nginx's static 200, measured in this run:
    # over the nginx run paired with the row's own runs (NAME_nginx), and, for comparison, over
    # nginx measured alone at the start.
    nginx_rps = (rs.get("nginx_static") or {}).get("rps")

    def paired_nginx_rps(r):
        pair = rs.get(r["name"] + "_nginx") if r.get("name") else None
        return (pair or {}).get("rps")

    def vs_nginx(r):
        base = paired_nginx_rps(r)
        return r["rps"] / base if r.get("rps") and base else None

    def vs_nginx_at_least(ratio, p99_ms=None):
        """a target as a ratio to the paired nginx's req/s, optionally with a p99 bound"""
        text = f"≥ {ratio:.2f}× nginx" + (f", p99 ≤ {p99_ms} ms" if p99_ms else "")
        def ok(r):
            if vs_nginx(r) is None:
                return None
            return vs_nginx(r) >= ratio and \
                (p99_ms is None or (r.get("p99_ms") or float("inf")) <= p99_ms)
        return text, ok

    def runs_text(r):
        text = ", ".join(fmt(x) for x in r.get("runs", []))
        pair = rs.get(r["name"] + "_nginx") if r.get("name") else None
        if pair and pair.get("runs"):
            text += "; nginx beside: " + ", ".join(fmt(x) for x in pair["runs"])
        return text

    def row(label, key, *targets):
        r = rs.get(key)
        if not r:
            w(f"| {label} | not run | | | | | | | | | | | |")
            return
        t = "; ".join(f"{text}: {verdict(ok(r))}" for text, ok in targets)
        if key == "nginx_static":
            paired = "1.00"
        else:
            paired = f"{vs_nginx(r):.2f} (of {fmt(paired_nginx_rps(r))})" \
                if vs_nginx(r) is not None else "n/a"
        at_start = f"{r['rps'] / nginx_rps:.2f}" if r.get("rps") and nginx_rps else "n/a"
        w(f"| {label} | {fmt(r.get('rps'))} | {paired} | {at_start} | {fmt(r.get('p50_ms'))} | "
          f"{fmt(r.get('p99_ms'))} | "
          f"{fmt(r.get('non2xx'))} | {fmt(r.get('cpu_us_per_req'), 1)} | "
          f"{fmt(r.get('switches_per_req'))} | "
          f"{fmt(r.get('vmhwm_kb', 0) / 1024 if r.get('vmhwm_kb') else None, 1)} | "
          f"{fmt(r.get('other_cpu_pct'), 0)} | "
          f"{runs_text(r)} | {t} |")

    w("### Throughput (wrk)")
    w("")
    w("*× nginx beside* is the row's req/s divided by the req/s of nginx answering a static 200 "
      "(`return 200`, 1 worker on the server's CPU, keep-alive, no access log) under the same wrk "
      "load and duration, run right before each of the row's own runs and judged the same way "
      "(its median run, its req/s in parentheses, every one listed after the row's own runs); "
      "the targets are judged on it (issue 31's pinned targets: payments ≥ 0.10×, the list page "
      "≥ 0.16×, healthz, GET and replays no lower than the pinned figures measured before: "
      "0.80, 0.40, 0.44). *× nginx "
      "at start* divides by the first row instead, nginx measured alone at the start of the run "
      "(10 s): the same yardstick minutes away from the row, shown for comparison. For nginx, "
      "*CPU/req*, *switches/req* and *peak RSS* are summed over its master and worker.")
    w("")
    w("| run | req/s | × nginx beside (its req/s) | × nginx at start | p50 ms | p99 ms | non-2xx | "
      "CPU/req µs | switches/req | peak RSS MiB | other load % | all runs, req/s | target |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    row("nginx static 200, keep-alive (reference)", "nginx_static")
    row("GET /healthz, keep-alive", "healthz", vs_nginx_at_least(0.80))
    row("POST /v1/accounts, group commit on", "accounts_gc")
    row("POST /v1/accounts, group commit off", "accounts_nogc")
    row("POST /v1/payments fresh keys, group commit on", "payments_gc",
        vs_nginx_at_least(0.10, p99_ms=25))
    row("POST /v1/payments fresh keys, group commit off", "payments_nogc")
    row("POST /v1/payments replays (100 keys)", "replays",
        vs_nginx_at_least(0.44))
    row("GET /v1/payments/{id}", "get_payment", vs_nginx_at_least(0.40))
    pgm = rs.get("pagination") or {}
    row(f"GET list page 1 (limit 20, {pgm.get('seed', 1000000):,} rows)", "list_first",
        vs_nginx_at_least(0.16))
    row(f"GET list page after row {pgm.get('depth', 500000):,} by cursor", "list_deep")
    w("")

    a, b = rs.get("accounts_gc"), rs.get("accounts_nogc")
    if a and b and a.get("rps") and b.get("rps"):
        ratio = a["rps"] / b["rps"]
        w(f"**Group commit:** {fmt(a['rps'])} vs {fmt(b['rps'])} durable account writes/s = "
          f"**{ratio:.1f}×** (target ≥ 10×: {verdict(ratio >= 10)}). "
          f"p99 {fmt(a.get('p99_ms'))} ms vs {fmt(b.get('p99_ms'))} ms.")
        fs = rs.get("fsync")
        if fs:
            w(f"One `fdatasync` after overwriting 4 KiB on this disk: p50 "
              f"{fmt(fs.get('p50_ms'), 3)} ms, p99 {fmt(fs.get('p99_ms'), 3)} ms: one commit per "
              f"job allows about {fmt(1 / fs['p50_ms'] * 1000)} commits/s before any SQL runs.")
        gc = rs.get("batches_gc")
        if gc:
            w(f"Mean batch during the batched runs: {fmt(gc.get('mean_batch'))} jobs per commit "
              f"({fmt(gc.get('jobs'))} jobs in {fmt(gc.get('batches'))} commits).")
    p, q = rs.get("payments_gc"), rs.get("payments_nogc")
    if p and q and p.get("rps") and q.get("rps"):
        w(f"**Payments:** {p['rps'] / q['rps']:.1f}× faster batched. A payment is one write job "
          "(the key's claim, the builtin processor's charge and the payment with its stored "
          "answer: docs/architecture.md, \"One commit for a local charge\") plus reads.")
    w("")

    pg = rs.get("pagination")
    if pg:
        seed, depth = pg.get("seed", 1000000), pg.get("depth", 500000)
        w(f"### Pagination on {seed:,} payments of one account")
        w("")
        w(f"Seeded with `payd dev seed` in {fmt(pg.get('seed_s'))} s. The deep cursor was reached "
          f"by walking {fmt(pg.get('walk_calls'))} pages of 100 through the API in "
          f"{fmt(pg.get('walk_s'))} s ({fmt(pg.get('walk_ms_per_call'))} ms per page).")
        w("")
        w("| what | p50 ms | p99 ms | mean ms | n |")
        w("|---|---:|---:|---:|---:|")
        for label, key in (("API page 1 (limit 20), *sequential*", "api_first"),
                           (f"API page after row {depth:,} via cursor, *sequential*", "api_deep"),
                           ("SQL keyset, page 1", "sql_first"),
                           (f"SQL keyset after row {depth:,}", "sql_keyset"),
                           (f"SQL `OFFSET {depth}`", "sql_offset"),
                           (f"API `/payments/count` ({seed:,} rows), *sequential*", "api_count")):
            s = pg.get(key) or {}
            w(f"| {label} | {fmt(s.get('p50_ms'), 3)} | {fmt(s.get('p99_ms'), 3)} | "
              f"{fmt(s.get('mean_ms'), 3)} | {fmt(s.get('n'))} |")
        w("")
        af, ad = pg.get("api_first", {}), pg.get("api_deep", {})
        so, sk = pg.get("sql_offset", {}), pg.get("sql_keyset", {})
        if af.get("p50_ms") and ad.get("p50_ms"):
            r1 = ad["p50_ms"] / af["p50_ms"]
            w(f"- deep keyset page / page 1 through the API (p50): **{r1:.2f}×** "
              f"(target ≤ 1.5×: {verdict(r1 <= 1.5)})")
        lf, ld = rs.get("list_first"), rs.get("list_deep")
        if lf and ld and lf.get("rps") and ld.get("rps"):
            w(f"- the same under wrk load: deep {fmt(ld['rps'])}/s vs page 1 {fmt(lf['rps'])}/s")
        if so.get("p50_ms") and sk.get("p50_ms"):
            w(f"- `OFFSET {depth}` / keyset at the same depth (SQL, p50): "
              f"**{so['p50_ms'] / sk['p50_ms']:,.0f}×**")
        if so.get("p50_ms") and ad.get("p50_ms"):
            w(f"- `OFFSET {depth}` in SQL alone / the whole deep API request (p50): "
              f"**{so['p50_ms'] / ad['p50_ms']:,.0f}×**")
        w(f"- OFFSET and keyset returned the same rows: {pg.get('same_rows')}; "
          f"keyset plan: `{pg.get('keyset_plan')}`")
        w("")

    w("### Rate limiter on vs off")
    w("")
    on = [rs[k] for k in ("get_payment", "get_payment_limit2") if k in rs]
    off = [rs[k] for k in ("get_payment_nolimit1", "get_payment_nolimit2") if k in rs]
    if on and off:
        w("`GET /v1/payments/{id}` with the limiter on (the bench user's limit, 100000000/s, is "
          "far above the load: nothing is refused, every response carries the six rate-limit "
          "headers) and off (`--rate-limiting=false`), alternating on, off, on, off:")
        w("")
        w("| limiter | req/s | p50 ms | p99 ms | CPU/req µs | switches/req | other load % |")
        w("|---|---:|---:|---:|---:|---:|---:|")
        for label, group in (("on", on), ("off", off)):
            for r in group:
                w(f"| {label} | {fmt(r.get('rps'))} | {fmt(r.get('p50_ms'))} | "
                  f"{fmt(r.get('p99_ms'))} | {fmt(r.get('cpu_us_per_req'), 1)} | "
                  f"{fmt(r.get('switches_per_req'))} | {fmt(r.get('other_cpu_pct'), 0)} |")
        mean = lambda g, k: statistics.fmean(r[k] for r in g if r.get(k))
        rps_cost = (1 - mean(on, "rps") / mean(off, "rps")) * 100
        cpu_cost = (mean(on, "cpu_us_per_req") / mean(off, "cpu_us_per_req") - 1) * 100
        w("")
        w(f"- throughput cost (mean of runs): **{rps_cost:.1f} %**; CPU per request: "
          f"**{cpu_cost:+.1f} %** (target < 5 %: {verdict(max(rps_cost, cpu_cost) < 5)}). "
          "Run-to-run noise on a small shared machine is as large as the effect, hence the "
          "isolated measurement below.")
    lim = rs.get("limiter")
    if lim:
        w(f"- isolated (`bench/limiter_bench.c`): `gcra_check` {fmt(lim.get('ns_1t'), 1)} ns on "
          f"one thread, {fmt(lim.get('ns_2t_same'), 1)} ns with two threads on one key "
          f"(contended stripe lock), {fmt(lim.get('ns_2t_distinct'), 1)} ns on two keys; payd's "
          f"whole `rate_limit_or_reply` (check plus formatting the six headers) "
          f"{fmt(lim.get('ns_middleware'), 1)} ns per request.")
        g = off[0] if off else rs.get("get_payment")
        if g and g.get("cpu_us_per_req") and lim.get("ns_middleware"):
            share = (lim["ns_middleware"] + lim["ns_2t_same"] - lim["ns_1t"]) / 1000 / \
                g["cpu_us_per_req"] * 100
            w(f"- that is **{share:.1f} %** of the {fmt(g['cpu_us_per_req'], 1)} µs of CPU payd "
              "spends per `GET /v1/payments/{id}` without the limiter (counting the contended "
              "lock), before the cost of sending the extra header bytes.")
    w("")
    w("### Commands")
    w("")
    w("```")
    for c in meta.get("commands", []):
        w(c)
    w("```")
    w("<!-- END GENERATED -->")
    generated = "\n".join(L) + "\n"

    old = open(out_path).read() if os.path.exists(out_path) else ""
    begin = old.find("<!-- BEGIN GENERATED")
    end = old.find("<!-- END GENERATED -->")
    if begin >= 0 and end >= 0:
        new = old[:begin] + generated + old[end + len("<!-- END GENERATED -->") + 1:]
    else:
        new = (old or "# payd benchmarks\n\n(summary: see the generated section below)\n\n") + \
            "\n" + generated
    with open(out_path, "w") as f:
        f.write(new)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    fn = globals().get("cmd_" + cmd.replace("-", "_"))
    if not fn:
        raise SystemExit(__doc__)
    fn(*args)


if __name__ == "__main__":
    main()
