#!/usr/bin/env bash
# Retention under load: full-speed fresh-key payments with and without the pruner working off a
# backlog of expired rows, and what its work does to the payments' p99.
#
# One SQLite database is planted (bench/plant) with PLANT payments' worth of rows spread from 29
# days to 2 days ago: a finished idempotency key and a payment.succeeded event each (with the
# payment and the builtin processor's charge). Then, ROUNDS times, on fresh copies of it:
#   with:    --idempotency-ttl 24h --event-retention 24h: every planted key and event is expired,
#            and the pruner deletes them (in chunks, store/prune.c) while wrk pays at full speed
#   without: --idempotency-ttl 720h --event-retention 720h: none is, nothing to delete
# Pinned as bench/sustain is: wrk on CPU 0, payd on CPU 1. Each row is judged on the median of
# its rounds. Prints a Markdown table.
#
#   bench/sweep_under_load.sh            (PLANT=1000000 DURATION=20 ROUNDS=3; PAYD_BIN=build/payd)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PLANT=${PLANT:-1000000}
DUR=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-sweep.XXXXXX")
cp "${PAYD_BIN:-$ROOT/build/payd}" "$WORK/payd"
PAYD=$WORK/payd
PAYD_PID=""
cleanup() {
  if [ -n "$PAYD_PID" ]; then kill "$PAYD_PID" 2>/dev/null || true; wait "$PAYD_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json_get() { python3 -c 'import json,sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$1" "$2"; }
note() { echo "sweep_under_load: $*" >&2; }

PLANTED=$WORK/planted.db
"$PAYD" migrate --db "$PLANTED" >/dev/null
out=$("$PAYD" user create sweep --rate-limit 100000000/s --db "$PLANTED")
BENCH_API_KEY=$(json_get api_key "$out")
export BENCH_API_KEY
out=$("$PAYD" account create --user "$(json_get user_id "$out")" --currency USD --db "$PLANTED")
BENCH_ACCOUNT=$(json_get id "$out")
export BENCH_ACCOUNT
note "planting $PLANT payments' rows, 29 to 2 days old"
t0=$(date +%s)
"$ROOT/bench/plant" "$PLANTED" "$PLANT" $((29 * 86400)) $((2 * 86400))
note "planted in $(($(date +%s) - t0)) s, $(($(stat -c %s "$PLANTED") / 1000000)) MB"
# rows older than a day: what the pruner has left to delete
OLD_US=$((($(date +%s) - 86400) * 1000000))
left() { # db → "keys events" older than a day
  sqlite3 -readonly "$1" "SELECT (SELECT count(*) FROM idempotency_keys WHERE claimed_at < $OLD_US)
    || ' ' || (SELECT count(*) FROM events WHERE created_at < $OLD_US)"
}

one() { # name db flags... → one line: name rps p50 p99 keys_left events_left
  local name=$1 db=$2
  shift 2
  local port
  port=$(free_port)
  taskset -c 1 "$PAYD" serve --listen "127.0.0.1:$port" --db "$db" --access-log false "$@" \
    2>>"$WORK/$name.log" &
  PAYD_PID=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.05; done
  BENCH_NONCE="$name-$RANDOM$RANDOM" taskset -c 0 wrk -t1 -c64 -d"${DUR}s" --latency \
    -s "$ROOT/bench/wrk/post_payments.lua" "http://127.0.0.1:$port/" >"$WORK/$name.wrk"
  kill "$PAYD_PID"
  wait "$PAYD_PID" || true
  PAYD_PID=""
  python3 - "$WORK/$name.wrk" "$name" "$(left "$db")" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
units = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
def pct(p):
    m = re.search(rf"^\s+{p}%\s+([0-9.]+)(us|ms|s|m)\s*$", text, re.M)
    return float(m.group(1)) * units[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", text).group(1))
m = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
print(sys.argv[2], f"{rps:.0f}", f"{pct(50):.2f}", f"{pct(99):.2f}", sys.argv[3],
      m.group(1) if m else 0)
EOF
}

RESULTS=$WORK/results.txt
: >"$RESULTS"
for round in $(seq "$ROUNDS"); do
  for mode in with without; do
    cp "$PLANTED" "$WORK/$mode.db"
    # on disk before payd starts: the kernel writing 1.3 GB of copy back during the run stalled
    # payd's own fsyncs (p99 ~500 ms on both sides)
    sync "$WORK/$mode.db"
    if [ $mode = with ]; then flags=(--idempotency-ttl 24h --event-retention 24h)
    else flags=(--idempotency-ttl 720h --event-retention 720h); fi
    line=$(one "$mode" "$WORK/$mode.db" "${flags[@]}")
    note "round $round: $line"
    echo "$line" >>"$RESULTS"
    rm -f "$WORK/$mode.db" "$WORK/$mode.db-wal" "$WORK/$mode.db-shm"
  done
done
grep -h '"pruned"' "$WORK/with.log" | tail -4 >&2 || true

python3 - "$RESULTS" "$PLANT" "$DUR" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
plant, dur = int(sys.argv[2]), sys.argv[3]
by = {}
for name, rps, p50, p99, keys, events, non2xx in rows:
    by.setdefault(name, []).append((float(rps), float(p50), float(p99), int(keys), int(events), int(non2xx)))
print(f"| {dur} s of fresh-key payments, 64 connections, beside {plant:,} expired keys and events | "
      "req/s median (rounds) | p50 ms median | p99 ms median (rounds) | keys / events left at the end (rounds) | non-2xx |")
print("|---|---|---|---|---|---|")
label = {"with": "pruner deleting the backlog (TTL and retention 24h)",
         "without": "nothing expired (TTL and retention 720h)"}
for name in ("without", "with"):
    r = by[name]
    med = lambda i: statistics.median(x[i] for x in r)
    print(f"| {label[name]} | {med(0):.0f} ({', '.join(f'{x[0]:.0f}' for x in r)}) | {med(1):.2f} | "
          f"{med(2):.1f} ({', '.join(f'{x[2]:.1f}' for x in r)}) | "
          f"{', '.join(f'{x[3]:,} / {x[4]:,}' for x in r)} | {sum(x[5] for x in r)} |")
w, wo = statistics.median(x[2] for x in by["with"]), statistics.median(x[2] for x in by["without"])
print(f"\np99 with the pruner at work / without: {w / wo:.2f}")
EOF
