#!/usr/bin/env python3
"""The layer order of src/, and its check: every `#include "dir/..."` in src/ must point to its
own directory or to one below it, and the libraries that one layer wraps are included there
only. Prints one line per offending include (file:line and the rule) and exits 1; exits 0 when
every include points down.

usage: check-layers.py [ROOT]    (ROOT: the source tree, by default this script's parent's)

The order is written here once; docs/architecture.md states it in words.
"""
import pathlib
import re
import sys

# Lowest first. A directory may include its own headers and those of any earlier tier, never
# one of its own tier (beside it) or of a later one (above it).
TIERS = [
    ["core"],                              # pure logic, no I/O; shared with the client library
    ["store", "http"],                     # the database; generic HTTP (server, checks, deadlines)
    ["node"],                              # the node's shared state and services: app, config...
    ["processor", "webhook", "request"],   # processor client; webhook worker; a request + router
    ["idem"],                              # the idempotency engine and its recoverer
    ["api"],                               # the handlers and the route table
    ["server"],                            # the pipeline (the HTTP server's callbacks), payd dev
    ["main.c"],                            # the payd command line
]

# The client library and payctl stand apart: core, and the client's public header
# (include/payd/), only.
APART = {
    "client": {"client", "core", "payd"},
    "cli": {"cli", "core", "payd"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/')

# Libraries that one layer wraps for the rest, so the choice of library is made in one place:
# the header, and the only directory whose files may include it.
LIBRARY_HOMES = {
    "microhttpd.h": "http",     # http/server.h is the HTTP server for every other layer
    "sqlite3.h": "store",       # store/db.h speaks for both databases
    "libpq-fe.h": "store",
}
SYSTEM_INCLUDE = re.compile(r'^\s*#\s*include\s+<([^>]+)>')


def allowed_for(unit):
    """The directories unit may include, or None when unit is not in the order."""
    if unit in APART:
        return APART[unit]
    below = set()
    for tier in TIERS:
        if unit in tier:
            return below | {unit}
        below |= set(tier)
    return None


def tier_of(unit):
    return next((i for i, tier in enumerate(TIERS) if unit in tier), None)


def rule(unit, target):
    if unit in APART:
        return f"{unit}/ may include only " + ", ".join(
            f"{d}/" for d in sorted(APART[unit] - {unit}))
    order = " ← ".join(" ".join(t) for t in TIERS)
    here, there = tier_of(unit), tier_of(target)
    if there is None:
        where = f"{target}/ is in no layer"
    elif there == here:
        where = f"{target}/ is beside {unit}"
    else:
        where = f"{target}/ is above {unit}"
    return f"{where}; a layer includes only itself and those below it: {order}"


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent)
    src = root / "src"
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".c", ".h") or not path.is_file():
            continue
        rel = path.relative_to(src)
        unit = rel.parts[0]
        name = path.relative_to(root)
        allowed = allowed_for(unit)
        if allowed is None:
            problems.append(f"{name}:1: src/{unit} is in no layer; add it to the order in "
                            "scripts/check-layers.py")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            lib = SYSTEM_INCLUDE.match(line)
            home = LIBRARY_HOMES.get(lib.group(1)) if lib else None
            if home and unit != home:
                problems.append(f"{name}:{n}: includes <{lib.group(1)}>, which only {home}/ "
                                f"may: the other layers use {home}/'s headers")
                continue
            m = INCLUDE.match(line)
            if not m or m.group(1) in allowed:
                continue
            target = m.group(1)
            problems.append(f'{name}:{n}: includes "{target}/…": {rule(unit, target)}')
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
