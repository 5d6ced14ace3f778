#!/usr/bin/env bash
# The failover arrangement of docs/operations.md ("Failover") on one machine, on loopback: one
# etcd, three PostgreSQL 15 members under Patroni (synchronous_mode and synchronous_mode_strict)
# and haproxy routing to the primary. For trying it out and for tests/ha/failover.py; the same
# templates (patroni.yml.in, haproxy.cfg.in, etcd.env.in) serve three machines.
#
#   deploy/ha/ha-local.sh start DIR   renders the configs into DIR, starts everything, waits for
#                                     a primary (and its synchronous standby), prints DIR/ha.env
#   deploy/ha/ha-local.sh stop DIR    stops what `start DIR` started (by the pids it recorded)
#   deploy/ha/ha-local.sh status DIR  the members as Patroni sees them (patronictl list)
#
# Settings from the environment: HA_SYNC=false runs the members with synchronous replication off
# (what the suite compares against); HA_DCS=etcd3 uses Patroni's etcd3 section instead of the
# v2 API (seen to lose writes with Patroni 3.0.2); HA_TTL, HA_LOOP_WAIT, HA_RETRY_TIMEOUT.
# As root, Patroni and PostgreSQL run as the postgres user.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd="${1:-}"
dir="${2:-}"
[ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '6,13p' "$0" >&2; exit 2; }

free_ports() { # N distinct free loopback ports
  /usr/bin/python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
  as_pg=(setpriv --reuid=postgres --regid=postgres --init-groups)
fi

start_bg() { # name, command...: started in the background, its pid in DIR/pids/NAME
  local name="$1"; shift
  "$@" >>"$dir/log/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name"
}

patronictl_() { patronictl -c "$dir/patroni-pg1.yml" "$@"; }

wait_ready() { # a primary, and with HA_SYNC its synchronous standby, all three members running
  local deadline=$((SECONDS + ${HA_START_TIMEOUT:-120}))
  while [ $SECONDS -lt $deadline ]; do
    local json
    json="$(curl -fsS --max-time 2 "http://127.0.0.1:$REST_PORT1/cluster" 2>/dev/null || true)"
    if [ -n "$json" ] && /usr/bin/python3 - "$json" "$SYNC" <<'EOF'
import json, sys
members = json.loads(sys.argv[1]).get("members", [])
roles = [m.get("role") for m in members]
running = all(m.get("state") in ("running", "streaming") for m in members)
want_sync = sys.argv[2] == "true"
ok = len(members) == 3 and running and roles.count("leader") == 1 and (
    not want_sync or roles.count("sync_standby") == 1)
sys.exit(0 if ok else 1)
EOF
    then
      return 0
    fi
    sleep 0.5
  done
  echo "ha-local: the cluster did not become ready; logs in $dir/log" >&2
  return 1
}

start() {
  mkdir -p "$dir/log" "$dir/pids"
  dir="$(cd "$dir" && pwd)"
  read -r ETCD_CLIENT_PORT ETCD_PEER_PORT PG_PORT1 PG_PORT2 PG_PORT3 REST_PORT1 REST_PORT2 \
    REST_PORT3 HAPROXY_PORT <<<"$(free_ports 9)"
  pw() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
  export SCOPE=payd ETCD_NAME=etcd1 ETCD_HOST=127.0.0.1 ETCD_CLIENT_PORT ETCD_PEER_PORT
  export ETCD_DATA_DIR="$dir/etcd" ETCD_INITIAL_CLUSTER="etcd1=http://127.0.0.1:$ETCD_PEER_PORT"
  export ETCD_HOSTS="127.0.0.1:$ETCD_CLIENT_PORT" DCS="${HA_DCS:-etcd}"
  export TTL="${HA_TTL:-10}" LOOP_WAIT="${HA_LOOP_WAIT:-2}" RETRY_TIMEOUT="${HA_RETRY_TIMEOUT:-3}"
  export SYNC="${HA_SYNC:-true}" NETWORK=127.0.0.1/32 RUN_DIR="$dir" HOST=127.0.0.1 LOCAL_AUTH=trust
  export REPLICATION_USER=replicator SUPERUSER_PASSWORD REPLICATION_PASSWORD REWIND_PASSWORD
  SUPERUSER_PASSWORD="$(pw)" REPLICATION_PASSWORD="$(pw)" REWIND_PASSWORD="$(pw)"
  envsubst <"$here/etcd.env.in" | grep -v '^#' >"$dir/etcd.env"
  for i in 1 2 3; do
    eval "export NAME=pg$i PG_PORT=\$PG_PORT$i REST_PORT=\$REST_PORT$i"
    export DATA_DIR="$dir/pg$i"
    envsubst <"$here/patroni.yml.in" >"$dir/patroni-pg$i.yml"
    eval "export NAME$i=pg$i HOST$i=127.0.0.1 PG_PORT$i REST_PORT$i"
  done
  export HAPROXY_BIND="127.0.0.1:$HAPROXY_PORT"
  envsubst <"$here/haproxy.cfg.in" >"$dir/haproxy.cfg"
  cat >"$dir/ha.env" <<EOF
HA_DIR=$dir
HA_SYNC=$SYNC
HA_DCS=$DCS
HA_TTL=$TTL
ETCD_PORT=$ETCD_CLIENT_PORT
HAPROXY_PORT=$HAPROXY_PORT
PG_PORTS=$PG_PORT1,$PG_PORT2,$PG_PORT3
REST_PORTS=$REST_PORT1,$REST_PORT2,$REST_PORT3
PGPASSWORD=$SUPERUSER_PASSWORD
HAPROXY_URL=postgres://postgres:$SUPERUSER_PASSWORD@127.0.0.1:$HAPROXY_PORT/postgres
MULTIHOST_URL=postgres://postgres:$SUPERUSER_PASSWORD@127.0.0.1:$PG_PORT1,127.0.0.1:$PG_PORT2,127.0.0.1:$PG_PORT3/postgres?target_session_attrs=read-write
EOF
  chmod 600 "$dir/ha.env"
  if [ ${#as_pg[@]} -gt 0 ]; then chown postgres:postgres "$dir"; fi
  # etcd reads its ETCD_* settings from the environment
  start_bg etcd env $(cat "$dir/etcd.env") etcd
  local deadline=$((SECONDS + 30))
  until curl -fsS --max-time 1 "http://127.0.0.1:$ETCD_CLIENT_PORT/health" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "ha-local: etcd did not start" >&2; return 1; }
    sleep 0.2
  done
  for i in 1 2 3; do
    start_bg "patroni-pg$i" "${as_pg[@]}" env HOME="$dir" patroni "$dir/patroni-pg$i.yml"
    # the first member bootstraps alone; the others clone from it
    [ "$i" -gt 1 ] || sleep 2
  done
  start_bg haproxy haproxy -db -f "$dir/haproxy.cfg"
  wait_ready
  cat "$dir/ha.env"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  [ -d "$dir/pids" ] || return 0
  # Patroni stops its PostgreSQL on SIGTERM; a paused one is woken first
  for i in 1 2 3; do
    local f="$dir/pids/patroni-pg$i"
    if alive "$f"; then kill -CONT "$(cat "$f")" 2>/dev/null || true; kill -TERM "$(cat "$f")" || true; fi
  done
  local deadline=$((SECONDS + 30))
  for i in 1 2 3; do
    local f="$dir/pids/patroni-pg$i"
    while alive "$f" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if alive "$f"; then kill -KILL "$(cat "$f")" || true; fi
    # a postmaster left behind (its Patroni killed): the pid PostgreSQL recorded in our data dir
    local pm="$dir/pg$i/postmaster.pid"
    if [ -f "$pm" ]; then
      local pid
      pid="$(head -1 "$pm")"
      if [ -n "$pid" ] && grep -qs "$dir/pg$i" "/proc/$pid/cmdline" 2>/dev/null; then
        kill -CONT "$pid" 2>/dev/null || true
        kill -QUIT "$pid" 2>/dev/null || true
      fi
    fi
  done
  for name in haproxy etcd; do
    local f="$dir/pids/$name"
    if alive "$f"; then kill -TERM "$(cat "$f")" || true; fi
  done
  rm -f "$dir"/pids/*
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) patronictl_ list ;;
  *) sed -n '6,13p' "$0" >&2; exit 2 ;;
esac
