#!/usr/bin/env bash
# Builds one libFuzzer target with clang (ASan+UBSan), replays its kept inputs (crashers found
# before stay here as regression inputs), then fuzzes for FUZZ_SECONDS (default 10).
# usage: run.sh NAME BUILD_DIR
set -euo pipefail
name=$1
out=$2/fuzz
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out" "$here/corpus/$name"
rm -f "$out/$name.summary" # written again only by a run that passes
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A target may name more sources on a line "// fuzz-sources: FILE ..." (paths from the root);
# the word handler-stubs adds an empty body for every route handler of src/api/handlers.h (and an
# empty schema for every declared body), so the real route table links without the store behind it;
# the word server-sources links the whole server instead (every layer but main.c, with the files
# the build generates and the libraries they need), for the real schemas.
extra=()
libs=()
for f in $(sed -n 's|^// fuzz-sources: ||p' "$here/$name.c"); do
  if [ "$f" = server-sources ]; then
    for layer in store http node processor webhook request idem api server; do
      extra+=("$root"/src/$layer/*.c)
    done
    extra+=("$2/openapi_json.c" "$2/web_assets.c" "$2/version.c")
    libs+=($(pkg-config --cflags --libs libmicrohttpd sqlite3 libpq libcurl hiredis gnutls libsystemd) -lssl)
  elif [ "$f" = handler-stubs ]; then
    { echo '#include "api/handlers.h"'
      sed -n -e 's/^void \([a-z_0-9]*\)(request \*req);$/void \1(request *req) { (void)req; }/p' \
        -e 's/^step_result \([a-z_0-9]*\)(request \*req, void \*\([a-z_]*\));$/step_result \1(request *req, void *\2) { (void)req; (void)\2; return STEP_DONE; }/p' \
        -e 's/^extern const schema \([a-z_0-9]*\);$/const schema \1;/p' \
        "$root/src/api/handlers.h"; } >"$work/handler_stubs.c"
    extra+=("$work/handler_stubs.c")
  else
    extra+=("$root/$f")
  fi
done
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=undefined -I"$root/src" "$here/$name.c" "$root"/src/core/*.c \
  "${extra[@]}" $(pkg-config --cflags --libs jansson) "${libs[@]}" -lcrypto -lpthread -lm \
  -o "$out/$name"
# a target's dictionary, tests/fuzz/NAME.dict, when it has one
dict=()
if [ -f "$here/$name.dict" ]; then dict=(-dict="$here/$name.dict"); fi
# new inputs go to a scratch corpus; the kept corpus in the tree only changes by hand
"$out/$name" -max_total_time="${FUZZ_SECONDS:-10}" -timeout=5 -rss_limit_mb=1024 \
  "${dict[@]}" -artifact_prefix="$work/" "$work" "$here/corpus/$name" 2>"$work/log" || {
  tail -30 "$work/log"
  echo "fuzz $name: crash; keep the input as a regression case in tests/fuzz/corpus/$name/:"
  ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* 2>/dev/null || true
  exit 1
}
# the edges covered (cov:) and the features (ft:) at the end, and how many inputs ran; kept in
# BUILD_DIR/fuzz/NAME.summary too, which `make test` prints (ctest shows no passing test's output)
{ echo "fuzz $name: $(grep -E "^#[0-9]+.*DONE" "$work/log" | tail -1 | sed 's/^#[0-9]*[[:space:]]*DONE[[:space:]]*//')"
  grep -E "^Done" "$work/log" | tail -1; } | tee "$out/$name.summary"
