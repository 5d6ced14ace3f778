# shellcheck shell=bash
# A PostgreSQL cluster of a bench script's own, sourced by bench/migrate_partitions,
# bench/pg_vs_sqlite.sh and bench/sustain: Debian's newest server binaries, run as the postgres
# user when the script runs as root, on a free loopback port with its socket and log in the
# script's work directory, with the server's defaults otherwise (fsync and synchronous_commit
# on).
PG_BIN="" # set by pg_cluster_start
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# pg_cluster_start DATA_DIR WORK_DIR [PREFIX...]: makes the cluster in DATA_DIR (with a database
# `payd`) unless it holds one already, starts it (PREFIX runs pg_ctl: `taskset -c 1` pins the
# server), and sets PGPORT and PG_URL (the payd database's URL).
pg_cluster_start() {
  local data=$1 work=$2
  shift 2
  PG_BIN=$(dirname "$(ls /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
  PGPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  # shellcheck disable=SC2034 # for the scripts that source this
  PG_URL="postgres://postgres@127.0.0.1:$PGPORT/payd"
  local fresh=false
  # the server writes its socket and log in the work directory
  if [ "$(id -u)" -eq 0 ]; then chown postgres "$work"; fi
  if [ ! -f "$data/PG_VERSION" ]; then
    mkdir -p "$data"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$data"; fi
    as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
    fresh=true
  fi
  as_pg "$@" "$PG_BIN/pg_ctl" -D "$data" -l "$work/pg.log" -w start \
    -o "-p $PGPORT -k $work -c listen_addresses=127.0.0.1" >/dev/null
  if $fresh; then pg_psql postgres -c "CREATE DATABASE payd"; fi
}

# pg_cluster_stop DATA_DIR [MODE]: fast unless MODE says otherwise; quiet when it is not running.
pg_cluster_stop() {
  if [ -n "$PG_BIN" ]; then as_pg "$PG_BIN/pg_ctl" -D "$1" -m "${2:-fast}" stop >/dev/null 2>&1 || true; fi
}

# pg_psql DATABASE [psql arguments...]: psql as the cluster's superuser.
pg_psql() {
  local db=$1
  shift
  as_pg "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres "$@" "$db"
}
