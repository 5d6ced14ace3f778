#!/usr/bin/env bash
# Installs the Debian packages payd needs, and only those that are missing, so a warm
# machine spends no time here. Uses sudo only when not already root.
set -euo pipefail
build=(cmake make gcc pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev libssl-dev
       libcurl4-openssl-dev libpq-dev libhiredis-dev)
test=(libcmocka-dev python3 python3-pytest postgresql curl clang libclang-rt-14-dev redis-server
      haproxy)
case "${1:-build}" in
  build) wanted=("${build[@]}") ;;
  test)  wanted=("${build[@]}" "${test[@]}") ;;
  bench) wanted=("${build[@]}" wrk) ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
