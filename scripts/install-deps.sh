#!/usr/bin/env bash
# Installs the Debian packages payd needs, and only those that are missing, so a warm
# machine spends no time here. Uses sudo only when not already root.
set -euo pipefail
build=(cmake make gcc pkg-config libmicrohttpd-dev libgnutls28-dev libsystemd-dev libjansson-dev libsqlite3-dev libssl-dev
       libcurl4-openssl-dev libpq-dev libhiredis-dev)
# chromium and nodejs: the dashboard's browser tests (tests/browser, playwright-core from npm);
# redis-server and haproxy: the cluster tests; zsh and fish: payctl's completion scripts are
# parsed by the shells they are for; patroni, etcd-server and gettext-base (envsubst): the failover
# suite's cluster (deploy/ha, tests/ha); python3-venv and -pip: the Python client's offline
# `pip install` test (clients/python, whose build backend is its own), python3-mypy its type check;
# faketime: a restart with the clock set back (tests/api/test_node_time.py)
test=(libcmocka-dev python3 python3-pytest postgresql curl clang libclang-rt-14-dev
      mandoc man-db systemd prometheus chromium nodejs redis-server haproxy
      python3-venv python3-pip python3-mypy zsh fish faketime patroni python3-etcd etcd-server
      gettext-base)
case "${1:-build}" in
  build) wanted=("${build[@]}") ;;
  test)  wanted=("${build[@]}" "${test[@]}") ;;
  # libh2o-evloop-dev: the second HTTP library bench/library_ceiling.sh measures; gnuplot-nox
  # and sqlite3: bench/sustain's plot and database queries, bench/bytes_per_payment's dbstat
  bench) wanted=("${build[@]}" wrk nginx-light libh2o-evloop-dev gnuplot-nox sqlite3) ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's nodejs leaves npm to a package of its own; other builds of nodejs bring it along
if [ "${1:-build}" = test ] && ! command -v npm >/dev/null; then missing+=(npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The browser tests' npm packages, exactly as package-lock.json pins them (no browser download:
# playwright-core drives Debian's chromium)
if [ "${1:-build}" = test ]; then
  browser_tests="$(dirname "$0")/../tests/browser"
  if [ ! -d "$browser_tests/node_modules/playwright-core" ]; then
    (cd "$browser_tests" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # The Node client's dev dependencies (typescript, @types/node: its declarations' check)
  node_client="$(dirname "$0")/../clients/node"
  if [ ! -d "$node_client/node_modules/typescript" ]; then
    (cd "$node_client" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
