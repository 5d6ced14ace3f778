#!/usr/bin/env bash
# PostgreSQL against SQLite on this machine in one run: fresh-key payments, a GET and a list
# page on each backend, then one PostgreSQL node against two (wrk on each node at once).
# Starts its own PostgreSQL (initdb in a temp dir, as the postgres user when run as root).
#
#   bench/pg_vs_sqlite.sh          (BENCH_DURATION=5s, BENCH_ROUNDS=3 by default)
#
# Prints a Markdown table; append it to bench/RESULTS.md by hand with the date. PostgreSQL runs
# with its default settings (fsync and synchronous_commit on), like SQLite with synchronous=FULL.
# The backends take turns, round after round, so drift on a shared machine hits both alike;
# each figure is the median of its rounds, and the payment ratio is the median of the rounds'
# own ratios.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DUR=${BENCH_DURATION:-5s}
ROUNDS=${BENCH_ROUNDS:-3}
CONNS=${BENCH_CONNS:-64}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-pgbench.XXXXXX")
chmod 755 "$WORK"
cp "${PAYD_BIN:-$ROOT/build/payd}" "$WORK/payd"
PAYD=$WORK/payd
# shellcheck source=bench/pg_cluster.sh
. "$ROOT/bench/pg_cluster.sh"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  pg_cluster_stop "$WORK/pg" immediate
  rm -rf "$WORK"
}
trap cleanup EXIT

pg_cluster_start "$WORK/pg" "$WORK"

start() { # db → sets PORT; more ports with start again
  PORT=$(free_port)
  "$PAYD" serve --listen "127.0.0.1:$PORT" --db "$1" --access-log false --node-id "${2:-1}" \
    2>>"$WORK/payd.log" &
  PIDS+=($!)
  for _ in $(seq 150); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "payd did not become ready" >&2; exit 1
}
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  PIDS=()
}
rate() { awk '/Requests\/sec/ {print int($2)}' "$1"; }
wrk_run() { # name url script [env...]
  local name=$1 url=$2 script=$3
  shift 3
  env "$@" wrk -t2 -c"$CONNS" -d"$DUR" -s "$ROOT/bench/wrk/$script" "$url" >"$WORK/$name.wrk"
  rate "$WORK/$name.wrk"
}
setup_user() { # db
  local out
  out=$("$PAYD" user create bench --rate-limit 100000000/s --db "$1")
  export BENCH_API_KEY=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["api_key"])' "$out")
  local uid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["user_id"])' "$out")
  out=$("$PAYD" account create --user "$uid" --currency USD --db "$1")
  export BENCH_ACCOUNT=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$out")
  export BENCH_NONCE=$RANDOM$RANDOM
}
declare -A R
for round in $(seq "$ROUNDS"); do
for backend in sqlite postgres; do
  if [ $backend = sqlite ]; then DB=$WORK/payd.db; else DB=$PG_URL; fi
  setup_user "$DB"
  start "$DB"
  R[$backend.pay]+=" $(wrk_run $backend.pay "http://127.0.0.1:$PORT" post_payments.lua)"
  # the payments above updated one account row thousands of times; reading it through its dead
  # versions measures the vacuum backlog, not the read path, so vacuum as autovacuum soon would
  if [ $backend = postgres ]; then
    pg_psql payd -c "VACUUM ANALYZE"
  fi
  R[$backend.get]+=" $(wrk_run $backend.get "http://127.0.0.1:$PORT" get.lua \
    BENCH_PATH="/v1/accounts/$BENCH_ACCOUNT")"
  R[$backend.list]+=" $(wrk_run $backend.list "http://127.0.0.1:$PORT" get.lua \
    BENCH_PATH="/v1/accounts/$BENCH_ACCOUNT/payments?limit=20")"
  stop_all
done
done

# two PostgreSQL nodes, each driven by its own wrk with half the connections
DB=$PG_URL
setup_user "$DB"
start "$DB" 1; P1=$PORT
start "$DB" 2; P2=$PORT
CONNS=$((CONNS / 2))
wrk_run two.a "http://127.0.0.1:$P1" post_payments.lua >"$WORK/two.a" &
A=$!
BENCH_NONCE=${BENCH_NONCE}b wrk_run two.b "http://127.0.0.1:$P2" post_payments.lua >"$WORK/two.b"
wait $A
R[two.pay]=$(( $(cat "$WORK/two.a") + $(cat "$WORK/two.b") ))
stop_all
commits=$(pg_psql postgres -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'payd'")

ratio() { python3 -c "print(f'{$1/$2:.2f}')"; }
median() { python3 -c "import statistics,sys; print(int(statistics.median(map(int, sys.argv[1:]))))" $1; }
# median of the rounds' own PostgreSQL/SQLite ratios
paired() { python3 -c "import statistics,sys; a,b=sys.argv[1].split(),sys.argv[2].split(); print(f'{statistics.median(int(y)/int(x) for x,y in zip(a,b)):.2f}')" "$1" "$2"; }
row() { # label metric
  local s p
  s=$(median "${R[sqlite.$2]}")
  p=$(median "${R[postgres.$2]}")
  echo "| $1 | $s (${R[sqlite.$2]# }) | $p (${R[postgres.$2]# }) | $(paired "${R[sqlite.$2]}" "${R[postgres.$2]}") |"
}
echo "| request ($((CONNS * 2)) connections, $DUR, median of $ROUNDS rounds) | SQLite req/s (rounds) | PostgreSQL req/s (rounds) | PostgreSQL / SQLite (median of round ratios) |"
echo "|---|---|---|---|"
row "POST /v1/payments, fresh key" pay
row "GET /v1/accounts/{id}" get
row "GET /v1/accounts/{id}/payments?limit=20" list
R[postgres.pay]=$(median "${R[postgres.pay]}")
echo
echo "| PostgreSQL, POST /v1/payments fresh key | req/s | vs one node |"
echo "|---|---|---|"
echo "| one node | ${R[postgres.pay]} | 1.00 |"
echo "| two nodes (one wrk each, $CONNS connections each) | ${R[two.pay]} | $(ratio ${R[two.pay]} ${R[postgres.pay]}) |"
echo
echo "PostgreSQL transactions committed in the whole run (pg_stat_database.xact_commit): $commits"
echo "Load average at the end (1, 5, 15 min): $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores"
