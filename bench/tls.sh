#!/usr/bin/env bash
# What HTTPS costs against plain HTTP, in the pinned method: one payd (CPU 1) serving plain HTTP
# and one serving HTTPS (--tls-cert, a P-256 certificate made here), on copies of the same
# database, wrk on CPU 0, alternating rounds (plain, TLS, plain, TLS, ...), each row judged on the
# median of ROUNDS runs. 64 keep-alive connections: the handshake is paid once per connection,
# the rest is record crypto. (A handshake per request is not measured here: with wrk's
# "Connection: close" the figure was dominated by a ~40 ms stall per connection, the signature of
# Nagle's algorithm meeting a delayed ACK on the client's side, not of the handshake's cost.)
#
#   bench/tls.sh                      (DURATION=5s ROUNDS=3; PAYD_BIN=build/payd)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAYD=${PAYD_BIN:-$ROOT/build/payd}
DUR=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/payd-tls-bench.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
"$PAYD" migrate --db "$WORK/plain.db" >/dev/null
KEY=$("$PAYD" user create bench --rate-limit 100000000/s --db "$WORK/plain.db" | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"])')
start() { # name port [flags...]
  local name=$1 port=$2; shift 2
  taskset -c 1 "$PAYD" serve --listen "127.0.0.1:$port" --db "$WORK/$name.db" --access-log false \
    "$@" >"$WORK/$name.log" 2>&1 &
  PIDS+=($!)
}
wait_up() { for _ in $(seq 50); do curl -sf "$@" >/dev/null && return; sleep 0.1; done; echo "payd did not start" >&2; exit 1; }
PLAIN_PORT=$(free_port); TLS_PORT=$(free_port)

# an account and one payment to GET, made once, then the database copied for the TLS node
start plain "$PLAIN_PORT"
wait_up "http://127.0.0.1:$PLAIN_PORT/healthz"
ACCOUNT=$(curl -sf -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' \
  -d '{"currency":"USD"}' "http://127.0.0.1:$PLAIN_PORT/v1/accounts" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
PAYMENT=$(curl -sf -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -H 'Idempotency-Key: tls-bench-1' \
  -d "{\"account_id\":\"$ACCOUNT\",\"amount\":100,\"currency\":\"USD\",\"source\":\"tok_visa\"}" \
  "http://127.0.0.1:$PLAIN_PORT/v1/payments" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true; PIDS=()
"$PAYD" backup --db "$WORK/plain.db" --to "$WORK/tls.db" >/dev/null
start plain "$PLAIN_PORT"
start tls "$TLS_PORT" --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
wait_up "http://127.0.0.1:$PLAIN_PORT/healthz"
wait_up --cacert "$WORK/cert.pem" "https://127.0.0.1:$TLS_PORT/v1/payments/$PAYMENT" -H "Authorization: Bearer $KEY"

rps() { # url [wrk flags...]: requests per second
  taskset -c 0 wrk -t1 -c64 -d"$DUR" "$@" | awk '/^Requests\/sec/ {print $2}'
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| row | plain HTTP req/s | HTTPS req/s | HTTPS / plain |"
echo "|---|---|---|---|"
for row in "healthz|/healthz|" "GET a payment|/v1/payments/$PAYMENT|auth"; do
  IFS='|' read -r name path mode <<<"$row"
  flags=()
  [ "$mode" = auth ] && flags+=(-H "Authorization: Bearer $KEY")
  : >"$WORK/plain.rps"; : >"$WORK/tls.rps"
  for _ in $(seq "$ROUNDS"); do
    rps "http://127.0.0.1:$PLAIN_PORT$path" "${flags[@]}" >>"$WORK/plain.rps"
    rps "https://127.0.0.1:$TLS_PORT$path" "${flags[@]}" >>"$WORK/tls.rps"
  done
  p=$(median <"$WORK/plain.rps"); t=$(median <"$WORK/tls.rps")
  echo "| $name | $p | $t | $(python3 -c "print(f'{$t/$p:.2f}')") |"
done
