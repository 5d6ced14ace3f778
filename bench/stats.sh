#!/usr/bin/env bash
# GET /v1/accounts/{id}/payments/stats on an account with 1,000,000 seeded payments against the
# same one-bucket query on an account with 10, both on one payd and one SQLite database. The
# rollup makes both read one or two rows; the count endpoint (a scan of the payments) is timed
# on the big account for scale. Run from the repository root after `make build`:
#   bench/stats.sh            (N=1000000 by default; PAYD=build/payd)
set -euo pipefail
PAYD=${PAYD:-build/payd}
N=${N:-1000000}
H="python3 bench/helper.py"
WORK=$(mktemp -d)
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
DB=$WORK/stats.db

user=$("$PAYD" user create stats-bench --rate-limit 100000000/s --db "$DB")
export BENCH_API_KEY=$($H json-get api_key "$user")
uid=$($H json-get user_id "$user")
big=$($H json-get id "$("$PAYD" account create --user "$uid" --currency USD --name big --db "$DB")")
small=$($H json-get id "$("$PAYD" account create --user "$uid" --currency USD --name small --db "$DB")")
echo "seed big:   $("$PAYD" dev seed --account "$big" --count "$N" --db "$DB")"
echo "seed small: $("$PAYD" dev seed --account "$small" --count 10 --db "$DB")"

port=$($H free-port)
"$PAYD" serve --listen "127.0.0.1:$port" --db "$DB" --access-log=false 2>"$WORK/payd.log" &
PID=$!
$H wait-ready "$port" 15

# one day: the seeded history (N ms back from now) lies in it unless it crosses midnight UTC
day=$(date -u +%Y-%m-%dT00:00:00Z)
next=$(date -u -d "$day + 1 day" +%Y-%m-%dT%H:%M:%SZ)
for name in big small; do
  account=${!name}
  path="/v1/accounts/$account/payments/stats?interval=day&created_gte=$day&created_lt=$next"
  body=$(curl -s -H "Authorization: Bearer $BENCH_API_KEY" "http://127.0.0.1:$port$path")
  python3 -c 'import json, sys; d = json.loads(sys.argv[2]); print(sys.argv[1] + ":", len(d["data"]), "bucket(s), total", json.dumps(d["total"]))' "$name" "$body"
  echo "$name latency (2000 sequential GETs): $($H latency "$port" "$path" 2000)"
  BENCH_PATH=$path wrk -t2 -c16 -d5s --latency -s bench/wrk/get.lua "http://127.0.0.1:$port/" \
    | grep -E "Requests/sec|^ +50%|^ +99%" | sed "s/^/$name wrk: /"
done
echo "big count (a scan, for scale; 5 GETs): $($H latency "$port" "/v1/accounts/$big/payments/count" 5)"
