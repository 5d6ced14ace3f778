#!/usr/bin/env bash
# payd benchmarks: starts payd itself (fresh SQLite databases in a temp dir, free ports), drives
# it with wrk and a few Python helpers, and rewrites the generated section of bench/RESULTS.md.
# payd runs with its access log on, as in production (its JSON lines go to a file in the temp dir).
# It also starts a throwaway nginx answering a static 200 and measures it the same way: every
# throughput figure is reported as a ratio to that nginx figure from the same run.
# Pinned: wrk runs on one CPU (BENCH_WRK_CPU, default 0) with one thread, the server under test
# (payd, or nginx with one worker) on the other (BENCH_SERVER_CPU, default 1), so the two never
# take each other's CPU; each row runs three times (BENCH_REPEAT) and is judged on its median.
#
#   bench/run.sh                    (make bench: builds first)
#   PAYD_BIN=path/to/payd bench/run.sh
#   BENCH_DURATION=5s BENCH_SEED=1000000 BENCH_DEPTH=500000 BENCH_REPEAT=2 bench/run.sh
#   BENCH_RESULTS=/tmp/try.md bench/run.sh    (write somewhere else than bench/RESULTS.md)
#
# Needs wrk, nginx (nginx-light), python3 and a C compiler (for the rate-limiter microbenchmark).
# Takes ~10 minutes. BENCH_QUIET_WAIT (default 15) caps the seconds each run waits for a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
SRC_BIN=${PAYD_BIN:-$ROOT/build/payd}
DUR=${BENCH_DURATION:-5s}
SEED=${BENCH_SEED:-1000000}
DEPTH=${BENCH_DEPTH:-500000}
OUT=${BENCH_RESULTS:-$BENCH/RESULTS.md}
CONNS=64
THREADS=1
WRK_CPU=${BENCH_WRK_CPU:-0}
SERVER_CPU=${BENCH_SERVER_CPU:-1}

command -v wrk >/dev/null || { echo "bench: wrk is not installed (make bench installs it)" >&2; exit 2; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "bench: nginx is not installed (make bench installs it)" >&2; exit 2; }
[ -x "$SRC_BIN" ] || { echo "bench: $SRC_BIN not found; run make first" >&2; exit 2; }

STARTED=$(date +%s)
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-bench.XXXXXX")
PAYD_PID=""
NGINX_PID=""
cleanup() {
  local pid
  for pid in "$PAYD_PID" "$NGINX_PID"; do
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# A private copy, so a rebuild during the run cannot change the binary under test.
cp "$SRC_BIN" "$WORK/payd"
PAYD=$WORK/payd
H=(python3 "$BENCH/helper.py")
# shellcheck source=bench/nginx_static.sh
. "$BENCH/nginx_static.sh"
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
BENCH_NONCE=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
export BENCH_NONCE
COMMANDS=$WORK/commands.txt
echo "# run from the repository root; every command sees BENCH_API_KEY (the bench user's key," \
  "never written down) and BENCH_NONCE (a random per-run prefix for Idempotency-Keys)" >"$COMMANDS"

# A command as one shell line for RESULTS.md, with the temp dir written as $WORK.
quoted() {
  local shown
  shown=$(printf '%q ' "$@")
  shown=${shown% }
  shown=${shown//$WORK/\$WORK}
  echo "${shown//$ROOT\//}"
}
# Remembers a command for RESULTS.md. A file, not an array: commands also run inside $(...)
# subshells. The API key is never part of a command line.
remember() { quoted "$@" >>"$COMMANDS"; }
# Runs a command (environment assignments in front are allowed) and remembers it.
run() {
  remember "$@"
  env "$@"
}

note() { echo "bench: $*" >&2; }

# ---- payd lifecycle ----

PORT=""
PAYD_PIDS="" # the process whose CPU and memory `measure` records for payd's rows
start_payd() { # db name [serve flags...]
  local db=$1 name=$2
  shift 2
  PORT=$("${H[@]}" free-port)
  # the access log on, as in production: its JSON lines go to stderr, here a file
  local cmd=(taskset -c "$SERVER_CPU" "$PAYD" serve --listen "127.0.0.1:$PORT" --db "$db"
    --access-log=true "$@")
  echo "$(quoted "${cmd[@]}") 2>$(quoted "$WORK/$name.log")" >>"$COMMANDS"
  "${cmd[@]}" 2>"$WORK/$name.log" &
  PAYD_PID=$!
  PAYD_PIDS=$PAYD_PID
  "${H[@]}" wait-ready "$PORT" 15
}

stop_payd() {
  kill -TERM "$PAYD_PID"
  wait "$PAYD_PID" || true
  PAYD_PID=""
}

# ---- nginx, the yardstick: a throwaway instance whose files all live in $WORK/nginx ----

start_nginx() {
  local dir=$WORK/nginx
  NGINX_PORT=$("${H[@]}" free-port)
  write_nginx_static_conf "$dir" "$NGINX_PORT" 1
  echo "# \$WORK/nginx/nginx.conf is the one write_nginx_static_conf in bench/nginx_static.sh writes" \
    >>"$COMMANDS"
  remember taskset -c "$SERVER_CPU" "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log"
  # shellcheck disable=SC2094 # nginx only writes the file -e names
  taskset -c "$SERVER_CPU" "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
    2>>"$dir/error.log" &
  NGINX_PID=$!
  "${H[@]}" wait-ready "$NGINX_PORT" 15 || { cat "$dir/error.log" >&2; exit 1; }
  # the master and its workers (found by parent pid): their CPU is nginx's cost per request
  NGINX_PIDS="$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')"
}

new_user() { # db → exports BENCH_API_KEY, sets USER_ID and ACCOUNT
  local db=$1 out
  out=$(run "$PAYD" user create bench --rate-limit 100000000/s --db "$db")
  BENCH_API_KEY=$("${H[@]}" json-get api_key "$out")
  export BENCH_API_KEY
  USER_ID=$("${H[@]}" json-get user_id "$out")
  out=$(run "$PAYD" account create --user "$USER_ID" --currency USD --name bench --db "$db")
  ACCOUNT=$("${H[@]}" json-get id "$out")
}

# One wrk run against a running server, recorded under NAME with the CPU and peak RSS of PIDS
# around it.
wrk_once() { # name duration pids [BENCH_VAR=value...] -- wrk-args...
  local name=$1 duration=$2 pids=$3
  shift 3
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local before after
  # shellcheck disable=SC2086 # a list of pids
  before=$("${H[@]}" proc $pids)
  # in a subshell, so that `times` reports wrk's own CPU as the children's
  (
    run "${envs[@]}" taskset -c "$WRK_CPU" wrk -t"$THREADS" -c"$CONNS" -d"$duration" --latency "$@" \
      >"$WORK/$name.wrk" 2>&1 || { cat "$WORK/$name.wrk" >&2; exit 1; }
    times >"$WORK/$name.times"
  )
  # shellcheck disable=SC2086
  after=$("${H[@]}" proc $pids)
  "${H[@]}" wrk-record "$RESULTS" "$name" "$WORK/$name.wrk" "$before" "$after" \
    "$WORK/$name.times"
}

# One measurement of payd (or, for the yardstick's own row, of nginx), run REPEAT times (default
# three) and judged on its median run; every run's req/s is listed in RESULTS.md. Each run starts
# when the machine is quiet (waiting up to BENCH_QUIET_WAIT s). Pinning keeps wrk and the server
# off each other's CPU, which made ratios repeat within a few per cent where best-of-two on shared
# CPUs moved by a third. Each payd run is paired with a run of nginx (a static 200, the same wrk
# load and duration, the same CPU) right before it, recorded as NAME_nginx and judged the same
# way: a row's ratio to nginx compares two figures taken seconds apart.
QUIET_WAIT=${BENCH_QUIET_WAIT:-15}
REPEAT=${BENCH_REPEAT:-3}
measure() { # name duration [BENCH_VAR=value...] -- wrk-args...
  local name=$1 duration=$2 attempt
  shift 2
  for attempt in $(seq 1 "$REPEAT"); do
    "${H[@]}" wait-quiet "$QUIET_WAIT" 10 >/dev/null
    if [ "$name" = nginx_static ]; then
      wrk_once "$name" "$duration" "$NGINX_PIDS" "$@"
    else
      [ -n "${UNPAIRED:-}" ] ||
        wrk_once "${name}_nginx" "$duration" "$NGINX_PIDS" -- "http://127.0.0.1:$NGINX_PORT/"
      wrk_once "$name" "$duration" "$PAYD_PIDS" "$@"
    fi
  done
  "${H[@]}" keep-median "$RESULTS" "$name"
  [ "$name" = nginx_static ] || [ -n "${UNPAIRED:-}" ] || "${H[@]}" keep-median "$RESULTS" "${name}_nginx"
}

URL() { echo "http://127.0.0.1:$PORT$1"; }

# ---- 0. what one fsync costs here: the price group commit saves ----

"${H[@]}" record "$RESULTS" fsync "$(run "${H[@]}" fsync-probe "$WORK" 500)"

# ---- the yardstick: nginx answering a static 200, under the same wrk load as /healthz ----

note "nginx static 200"
start_nginx # and left running: every payd measurement below is paired with one of nginx
measure nginx_static 10s -- "http://127.0.0.1:$NGINX_PORT/"

# ---- 1. group commit on: health, accounts, payments, replays, reads ----

note "group commit on ($WORK)"
new_user "$WORK/gc.db"
start_payd "$WORK/gc.db" gc --group-commit=true
measure healthz 10s -- "$(URL /healthz)"
b0=$("${H[@]}" batches "$PORT")
measure accounts_gc "$DUR" -- -s "$BENCH/wrk/post_accounts.lua" "$(URL /)"
b1=$("${H[@]}" batches "$PORT")
"${H[@]}" batch-delta "$RESULTS" batches_gc "$b0" "$b1"
measure payments_gc "$DUR" BENCH_ACCOUNT="$ACCOUNT" -- \
  -s "$BENCH/wrk/post_payments.lua" "$(URL /)"
PAYMENT=$(run "${H[@]}" mkkeys "$PORT" "$ACCOUNT" "$BENCH_NONCE" 100)
measure replays "$DUR" BENCH_ACCOUNT="$ACCOUNT" BENCH_KEYS=100 -- \
  -s "$BENCH/wrk/replay_payments.lua" "$(URL /)"
measure get_payment "$DUR" BENCH_PATH="/v1/payments/$PAYMENT" -- \
  -s "$BENCH/wrk/get.lua" "$(URL /)"
stop_payd

# ---- 2. the rate limiter on vs off: the same GET, alternating, limit far above the load ----

note "rate limiter on vs off"
for round in 1 2; do
  start_payd "$WORK/gc.db" nolimit$round --rate-limiting=false
  UNPAIRED=1 measure get_payment_nolimit$round "$DUR" BENCH_PATH="/v1/payments/$PAYMENT" -- \
    -s "$BENCH/wrk/get.lua" "$(URL /)"
  stop_payd
  if [ $round = 2 ]; then break; fi
  start_payd "$WORK/gc.db" limit2
  UNPAIRED=1 measure get_payment_limit2 "$DUR" BENCH_PATH="/v1/payments/$PAYMENT" -- \
    -s "$BENCH/wrk/get.lua" "$(URL /)"
  stop_payd
done

# ---- 3. group commit off: one transaction (one fsync) per write job ----

note "group commit off"
new_user "$WORK/nogc.db"
start_payd "$WORK/nogc.db" nogc --group-commit=false
measure accounts_nogc "$DUR" -- -s "$BENCH/wrk/post_accounts.lua" "$(URL /)"
measure payments_nogc "$DUR" BENCH_ACCOUNT="$ACCOUNT" -- \
  -s "$BENCH/wrk/post_payments.lua" "$(URL /)"
stop_payd

# ---- 4. pagination over SEED payments of one account ----

note "pagination: seeding $SEED payments"
PG=$WORK/pages.db
new_user "$PG"
t0=$(date +%s%N)
run "$PAYD" dev seed --account "$ACCOUNT" --count "$SEED" --db "$PG" >/dev/null
seed_s=$(python3 -c "print(($(date +%s%N) - $t0) / 1e9)")
start_payd "$PG" pages
LIST=/v1/accounts/$ACCOUNT/payments
"${H[@]}" wait-quiet "$QUIET_WAIT" 10 >/dev/null
api_first=$(run "${H[@]}" latency "$PORT" "$LIST?limit=20" 500)
walk=$(run "${H[@]}" walk "$PORT" "$ACCOUNT" "$DEPTH" 100)
CURSOR=$("${H[@]}" json-get cursor "$walk")
"${H[@]}" wait-quiet "$QUIET_WAIT" 10 >/dev/null
api_deep=$(run "${H[@]}" latency "$PORT" "$LIST?limit=20&cursor=$CURSOR" 500)
api_count=$(run "${H[@]}" latency "$PORT" "$LIST/count" 5)
measure list_first "$DUR" BENCH_PATH="$LIST?limit=20" -- -s "$BENCH/wrk/get.lua" "$(URL /)"
measure list_deep "$DUR" BENCH_PATH="$LIST?limit=20&cursor=$CURSOR" -- \
  -s "$BENCH/wrk/get.lua" "$(URL /)"
stop_payd
"${H[@]}" wait-quiet "$QUIET_WAIT" 10 >/dev/null
sql=$(run "${H[@]}" sql-timing "$PG" "$ACCOUNT" "$DEPTH" 500)
SEED=$SEED DEPTH=$DEPTH python3 - "$RESULTS" "$seed_s" "$walk" "$api_first" "$api_deep" "$api_count" "$sql" <<'EOF'
import json, os, sys
results, seed_s, walk, first, deep, count, sql = sys.argv[1:]
walk, sql = json.loads(walk), json.loads(sql)
d = {"name": "pagination", "seed": int(os.environ["SEED"]), "depth": int(os.environ["DEPTH"]),
     "seed_s": float(seed_s), "walk_calls": walk["calls"],
     "walk_s": walk["seconds"], "walk_ms_per_call": walk["ms_per_call"],
     "api_first": json.loads(first), "api_deep": json.loads(deep), "api_count": json.loads(count),
     "sql_first": sql["first"], "sql_keyset": sql["keyset"], "sql_offset": sql["offset"],
     "same_rows": sql["same_rows"], "keyset_plan": sql["keyset_plan"]}
open(results, "a").write(json.dumps(d) + "\n")
print(f"  pagination: page 1 p50 {d['api_first']['p50_ms']:.3f} ms, deep p50 "
      f"{d['api_deep']['p50_ms']:.3f} ms, OFFSET p50 {d['sql_offset']['p50_ms']:.1f} ms",
      file=sys.stderr)
EOF

# ---- 5. the limiter's own cost, in isolation (microbenchmark against libpaydserver.a) ----

note "rate limiter microbenchmark"
if run cc -O2 -I"$ROOT/src" "$BENCH/limiter_bench.c" "$ROOT/build/libpaydserver.a" \
  "$ROOT/build/libpaydcore.a" -lmicrohttpd -ljansson -lsqlite3 -lpq -lhiredis -lcurl -lgnutls -lssl -lcrypto \
  -lpthread -o "$WORK/limiter_bench" 2>"$WORK/limiter_bench.log"; then
  "${H[@]}" record "$RESULTS" limiter "$(run "$WORK/limiter_bench")"
else
  note "could not build the limiter microbenchmark: $(head -3 "$WORK/limiter_bench.log")"
fi

# ---- results ----

total=$(($(date +%s) - STARTED))
python3 - "$RESULTS" "$total" "$SRC_BIN" "$ROOT" "$COMMANDS" "$LOAD_AT_START" <<'EOF'
import json, os, platform, subprocess, sys, time
results, total, binary, root, commands_file, load = sys.argv[1:]
commands = open(commands_file).read().splitlines()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
mem = next((l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal")), "0")
def sh(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, cwd=root).stdout.strip()
    except OSError:
        return "?"
wrk = (sh("wrk", "-v") or "").splitlines()
tmpfs = sh("df", "-T", os.environ.get("TMPDIR", "/tmp")).splitlines()[-1].split()[1]
meta = {"name": "meta", "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "nproc": os.cpu_count(), "cpu": cpu, "mem": f"{int(mem) / 1048576:.0f} GiB RAM",
        "kernel": platform.release(), "payd": os.path.relpath(binary, root),
        "git": sh("git", "rev-parse", "--short", "HEAD") + (" + uncommitted changes" if sh("git", "status", "--porcelain", "--", ".", ":!bench/RESULTS.md") else ""),
        "wrk": wrk[0].split()[1] if wrk else "?", "tmpfs": tmpfs, "total_s": int(total),
        "load": load,
        "commands": commands}
open(results, "a").write(json.dumps(meta) + "\n")
EOF
"${H[@]}" render "$RESULTS" "$OUT"
note "done in ${total}s; results in $OUT"
