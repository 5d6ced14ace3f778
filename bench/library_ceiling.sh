#!/usr/bin/env bash
# The HTTP library's ceiling: the fastest a payd answer could be with each library on this
# machine. Builds bench/proto/http_ceiling.c, a static 200 ("ok\n") with nothing behind it, once
# on libmicrohttpd (configured as payd configures it) and once on libh2o-evloop, and measures
# both beside the nginx that bench/run.sh uses as its yardstick, in alternating rounds (the
# machine is shared: a slow spell then costs every server one round, not one server its figure).
#
#   bench/library_ceiling.sh
#   ROUNDS=5 DUR=10s bench/library_ceiling.sh
#
# Needs wrk, nginx (nginx-light), a C compiler, libmicrohttpd-dev and libh2o-evloop-dev
# (scripts/install-deps.sh bench installs them). Prints each round (with the CPU that other work
# on the machine took meanwhile, as bench/run.sh counts it) and, per server, the median req/s, the
# median of its per-round ratios to nginx, and its median CPU and thread switches per request.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${ROUNDS:-3}
DUR=${DUR:-5s}
QUIET_WAIT=${BENCH_QUIET_WAIT:-15}
THREADS=2 # as nginx's worker_processes in bench/nginx_static.sh

command -v wrk >/dev/null || { echo "ceiling: wrk is not installed" >&2; exit 2; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "ceiling: nginx is not installed" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-ceiling.XXXXXX")
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
H=(python3 "$BENCH/helper.py")
# shellcheck source=bench/nginx_static.sh
. "$BENCH/nginx_static.sh"

cc -O2 -std=gnu11 -DH2O_USE_LIBUV=0 "$BENCH/proto/http_ceiling.c" -o "$WORK/http_ceiling" \
  -lmicrohttpd -lh2o-evloop -lssl -lcrypto -lpthread -lz ||
  { echo "ceiling: could not build http_ceiling (scripts/install-deps.sh bench)" >&2; exit 2; }

# Starts a server in the background (its output to $WORK/NAME.log) and waits for its answer;
# SERVER_PIDS[NAME]: the processes whose CPU and thread switches count (nginx: master and workers).
declare -A PORT SERVER_PIDS
start() { # name port command...
  local name=$1 port=$2 pid
  shift 2
  "$@" >"$WORK/$name.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  PORT[$name]=$port
  "${H[@]}" wait-ready "$port" 15 || { cat "$WORK/$name.log" >&2; exit 1; }
  SERVER_PIDS[$name]="$pid $(pgrep -P "$pid" | tr '\n' ' ' || true)"
}
port=$("${H[@]}" free-port)
write_nginx_static_conf "$WORK/nginx" "$port"
start nginx "$port" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log"
port=$("${H[@]}" free-port)
start libmicrohttpd "$port" "$WORK/http_ceiling" mhd "$port" "$THREADS"
port=$("${H[@]}" free-port)
start libh2o-evloop "$port" "$WORK/http_ceiling" h2o "$port" "$THREADS"
SERVERS=(nginx libmicrohttpd libh2o-evloop)
RUNS=$WORK/runs.jsonl # one wrk run a line, in the order run: a server's nth line is its round n
: >"$RUNS"

# Prints round N, or with "median" each server's median req/s and median ratio to nginx.
report() { # N|median
  python3 - "$RUNS" "$1" <<'EOF'
import json, statistics, sys
path, which = sys.argv[1:]
runs, seen = [], {}
for line in open(path):
    r = json.loads(line)
    seen[r["name"]] = r["round"] = seen.get(r["name"], 0) + 1
    runs.append(r)
nginx = {r["round"]: r["rps"] for r in runs if r["name"] == "nginx"}
def ratio(r):
    return r["rps"] / nginx[r["round"]] if r["rps"] and nginx.get(r["round"]) else None
if which != "median":
    for r in (r for r in runs if r["round"] == int(which)):
        x = f"{ratio(r):.2f}×" if r["name"] != "nginx" and ratio(r) is not None else ""
        text = (f"round {which}  {r['name']:<14} {r['rps'] or 0:>9,.0f}/s {x:>6}  "
                f"other load {r.get('other_cpu_pct', 0):.0f}%")
        if r.get("non2xx") or r.get("socket_errors"):
            text += f"  non-2xx {r['non2xx']}, socket errors {r['socket_errors']}"
        print(text)
else:
    for name in seen:
        mine = [r for r in runs if r["name"] == name]
        med = lambda key: statistics.median(r.get(key) or 0 for r in mine)
        text = f"median of {len(mine)}: {name} {med('rps'):,.0f}/s"
        ratios = [x for x in map(ratio, mine) if x is not None]
        if name != "nginx" and ratios:
            text += f", {statistics.median(ratios):.2f}× nginx"
        print(f"{text}; {med('cpu_us_per_req'):.1f} µs CPU and "
              f"{med('switches_per_req'):.2f} thread switches per request")
EOF
}

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg):" \
  "wrk -t2 -c64 -d$DUR against ${SERVERS[*]}, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
  # each round starts on a quiet machine, as far as one can be had within QUIET_WAIT seconds
  "${H[@]}" wait-quiet "$QUIET_WAIT" 10 >/dev/null
  for name in "${SERVERS[@]}"; do
    # shellcheck disable=SC2086 # a list of pids
    before=$("${H[@]}" proc ${SERVER_PIDS[$name]})
    # in a subshell, so that `times` reports wrk's own CPU as the children's (see bench/run.sh)
    (
      wrk -t2 -c64 -d"$DUR" "http://127.0.0.1:${PORT[$name]}/" >"$WORK/wrk.out" 2>&1 ||
        { cat "$WORK/wrk.out" >&2; exit 1; }
      times >"$WORK/wrk.times"
    )
    # shellcheck disable=SC2086
    after=$("${H[@]}" proc ${SERVER_PIDS[$name]})
    "${H[@]}" wrk-record "$RUNS" "$name" "$WORK/wrk.out" "$before" "$after" "$WORK/wrk.times" \
      2>"$WORK/record.log" || { cat "$WORK/record.log" >&2; exit 1; }
  done
  report "$round"
done
report median
