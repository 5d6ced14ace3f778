#!/usr/bin/env bash
# Compares payd binaries (or settings) on fresh-key payments, in alternating rounds.
#
#   bench/compare.sh BIN_A BIN_B ...        each round runs every binary once, in this order
#   ENVS="PAYD_THREADS=0|PAYD_THREADS=1" bench/compare.sh BIN   one binary under each setting
#
# Each run: a fresh database, `payd serve` with its access log on, then wrk (2 threads, 64
# connections, DURATION) running bench/wrk/post_payments.lua. One line per run: req/s, its ratio
# to the round's first run, p99, payd's CPU per payment and the CPU stolen by the host meanwhile.
# This machine's speed moves by tens of per cent within minutes, so compare within a round (the
# ratio) and over several rounds, never one run against another taken minutes apart.
# ROUNDS (default 4) and DURATION (default 4s) set the size. Needs wrk, python3.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
H=(python3 bench/helper.py)
IFS='|' read -ra SETTINGS <<<"${ENVS:-}"
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=("")

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# the machine's stolen and total CPU ticks
steal_ticks() { awk '/^cpu / {print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }

# one_run BIN SETTING: prints "req/s p99 µs-per-payment steal%"
one_run() {
  local bin=$1 setting=$2 work port out uid acct pid cpu0 cpu1 steal0 total0 steal1 total1
  local wrk_out rps p99 paid
  work=$(mktemp -d)
  port=$("${H[@]}" free-port)
  out=$("$bin" user create bench --rate-limit 100000000/s --db "$work/db.sqlite")
  BENCH_API_KEY=$("${H[@]}" json-get api_key "$out")
  export BENCH_API_KEY
  uid=$("${H[@]}" json-get user_id "$out")
  out=$("$bin" account create --user "$uid" --currency USD --name bench --db "$work/db.sqlite")
  acct=$("${H[@]}" json-get id "$out")
  env ${setting:+"$setting"} "$bin" serve --listen "127.0.0.1:$port" --db "$work/db.sqlite" \
    --access-log=true 2>"$work/log" &
  pid=$!
  "${H[@]}" wait-ready "$port" 15
  read -r steal0 total0 <<<"$(steal_ticks)"
  cpu0=$(cpu_ticks "$pid")
  wrk_out=$(BENCH_ACCOUNT=$acct BENCH_NONCE=$RANDOM$RANDOM wrk -t2 -c64 -d"${DURATION:-4s}" \
    --latency -s bench/wrk/post_payments.lua "http://127.0.0.1:$port/")
  cpu1=$(cpu_ticks "$pid")
  read -r steal1 total1 <<<"$(steal_ticks)"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$wrk_out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$wrk_out")
  paid=$(grep -c '"status":201' "$work/log" || true)
  rm -rf "$work"
  awk -v r="$rps" -v p="$p99" -v c=$((cpu1 - cpu0)) -v n="$paid" -v s=$((steal1 - steal0)) \
    -v t=$((total1 - total0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%s %s %.1f %d\n", r, p, n ? c * 1e6 / hz / n : 0, t ? 100 * s / t : 0 }'
}

for round in $(seq 1 "${ROUNDS:-4}"); do
  first=""
  for bin in "$@"; do
    for setting in "${SETTINGS[@]}"; do
      read -r rps p99 cpu steal <<<"$(one_run "$bin" "$setting")"
      [ -n "$first" ] || first=$rps
      printf 'round %d  %-28s %-18s %9s req/s  %5.3fx  p99 %-8s %6s us/payment  steal %s%%\n' \
        "$round" "$(basename "$bin")" "$setting" "$rps" \
        "$(awk -v a="$rps" -v b="$first" 'BEGIN { print b ? a / b : 0 }')" "$p99" "$cpu" "$steal"
    done
  done
done
