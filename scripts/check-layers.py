#!/usr/bin/env python3
"""The layer order of src/, and its check. Layers only point down; this catches three kinds of
tie that would point up:

1. Includes. Every `#include "dir/..."` in src/ points to its own directory or to one below it,
   and a library that one layer wraps (<microhttpd.h>, <sqlite3.h>, <libpq-fe.h>) is included
   there only.
2. Named types. A file names `struct X` (`union X`, `enum X`), by a forward declaration or any
   use, only when X is defined (`struct X {`) in its own directory or below it, or nowhere in
   src/ (a system type). A forward declaration needs no include, so without this a lower layer
   could hold a pointer to an upper layer's type unseen. Typedef names are checked only inside
   callback signatures (rule 3): elsewhere they cannot be named without the include or a
   `typedef struct X ...`, which the rules above catch.
3. Callbacks. A lower layer may call a function of an upper layer only through a callback type
   it declares itself, in its own terms, and be handed that function at start-up:
   a. a function-pointer type, field or parameter names in its signature only types (struct
      tags and typedef names) of its own directory or below;
   b. a function of an upper layer is stored into a lower layer's callback field (a field of
      function type that the lower layer itself calls, `.field(` or `->field(`) only in a
      start-up place (START_UP: main.c, server/, and processor/sim_server.c, the start-up of the
      separate `payd processor-sim` program), as a designated initializer (`.field = fn`) or an
      assignment (`x.field = fn`, `x->field = fn`). A function passed as an argument for one
      call (a write job, a request's next step, a processor's completion) is a continuation, not
      a registration, and is not checked; nor is a const table at file scope (a route table, a
      body schema's field checks), which is data the upper layer passes down with each call.
4. Write jobs (store/store.h). A write job returns a write_result, never a bare int nor a
   db_status: the query layer's db_status stays inside the job, which says what it came to in
   the store's terms (write_result_of_db). So `write_job_fn` returns write_result, and every
   function handed over as a write job returns write_result: one passed for a `write_job_fn`
   parameter (store_write, store_submit, request_write_then, commit_response_then, ...: found
   from their declarations) or stored in a `write_job_fn` field (`.fn = f`). A request's
   write_result (`req->write_result`) is read as it is, never cast.

Comments and string literals are ignored. Prints one line per tie (file:line and the rule) and
exits 1; exits 0 when every tie points down.

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


def rule(unit, target, does="includes"):
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
    return f"{where}; a layer {does} only itself and those below it: {order}"


# Where a function of an upper layer may be handed to a lower layer's callback (rule 3b): a
# directory, or one file.
START_UP = {"main.c", "server", "processor/sim_server.c"}
NAMES = "names the types of"

TAG = re.compile(r"\b(struct|union|enum)\s+([A-Za-z_]\w*)")
TAG_DEFINITION = re.compile(r"\b(?:struct|union|enum)\s+([A-Za-z_]\w*)\s*\{")
FUNCTION_POINTER = re.compile(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)\s*\(")
TYPEDEF = re.compile(r"\btypedef\b")
# a name in a type's place in a signature: before a `*` or before a parameter's name
TYPE_POSITION = re.compile(r"\b([A-Za-z_]\w*)\s*(?=\*|\b[A-Za-z_])")
STORED = re.compile(r"(?:\.|->)\s*([A-Za-z_]\w*)\s*=\s*&?\s*([A-Za-z_]\w*)\s*(?=[,;}])")
C_WORDS = {"const", "volatile", "struct", "union", "enum", "unsigned", "signed", "void", "char",
           "short", "int", "long", "float", "double", "bool", "static", "restrict", "return"}


def strip_c(text):
    """text with comments, string and character literals blanked (newlines kept, so line
    numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def closing(text, i):
    """The index just past the bracket matching the one at text[i]."""
    pair = {"(": ")", "{": "}"}[text[i]]
    depth = 0
    for j in range(i, len(text)):
        if text[j] == text[i]:
            depth += 1
        elif text[j] == pair:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def line_of(text, pos):
    return text.count("\n", 0, pos) + 1


class Source:
    def __init__(self, path, root, src):
        self.rel = path.relative_to(src)
        self.unit = self.rel.parts[0]
        self.name = path.relative_to(root)
        self.raw = path.read_text(errors="replace")
        self.code = strip_c(self.raw)

    @property
    def start_up(self):
        return self.unit in START_UP or str(self.rel) in START_UP


def typedef_names(code):
    """(name, is_function_pointer) for each typedef in code."""
    for m in TYPEDEF.finditer(code):
        j, depth = m.end(), 0
        while j < len(code) and not (code[j] == ";" and depth == 0):
            depth += code[j] in "({"
            depth -= code[j] in ")}"
            j += 1
        body = code[m.end():j]
        fp = FUNCTION_POINTER.search(body)
        if fp:
            yield fp.group(1), True
        else:
            last = re.search(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*$", body)
            if last:
                yield last.group(1), False


def file_scope_blocks(code):
    """(head, start, end) of each brace block at file scope: head is the statement before it."""
    i, stmt = 0, 0
    while i < len(code):
        c = code[i]
        if c == "{":
            end = closing(code, i)
            yield code[stmt:i], i, end
            i = stmt = end
            continue
        if c in ";}":
            stmt = i + 1
        i += 1


def function_bodies(code):
    """(name, start, end) of each function defined at file scope."""
    for head, start, end in file_scope_blocks(code):
        m = re.search(r"([A-Za-z_]\w*)\s*\([^;{}]*\)\s*$", head)
        if m and "=" not in head and not TAG_DEFINITION.search(head + "{"):
            yield m.group(1), start, end


def const_tables(code):
    """(start, end) of each const initializer at file scope (a route table, a body schema)."""
    for head, start, end in file_scope_blocks(code):
        if "=" in head and re.search(r"\bconst\b", head):
            yield start, end


def callback_signatures(code):
    """(start, end, name) of each function-pointer declarator: the return type from the start
    of its declaration to the end of its parameter list."""
    for m in FUNCTION_POINTER.finditer(code):
        start = max(code.rfind(ch, 0, m.start()) for ch in ";{},(\n") + 1
        yield start, closing(code, m.end() - 1), m.group(1)


def callback_fields(code, fn_typedefs):
    """The fields of function type in the struct definitions of code."""
    fields = set()
    for m in TAG_DEFINITION.finditer(code):
        body = code[m.end():closing(code, m.end() - 1) - 1]
        fields |= {fp.group(1) for fp in FUNCTION_POINTER.finditer(body)}
        for decl in re.finditer(r"\b([A-Za-z_]\w*)\s+\**\s*([A-Za-z_]\w*)\s*;", body):
            if decl.group(1) in fn_typedefs:
                fields.add(decl.group(2))
    return fields


def include_ties(f):
    allowed = allowed_for(f.unit)
    for n, line in enumerate(f.raw.splitlines(), 1):
        lib = SYSTEM_INCLUDE.match(line)
        home = LIBRARY_HOMES.get(lib.group(1)) if lib else None
        if home and f.unit != home:
            yield (f"{f.name}:{n}: includes <{lib.group(1)}>, which only {home}/ "
                   f"may: the other layers use {home}/'s headers")
            continue
        m = INCLUDE.match(line)
        if m and m.group(1) not in allowed:
            yield f'{f.name}:{n}: includes "{m.group(1)}/…": {rule(f.unit, m.group(1))}'


def foreign(owners, unit):
    """The directory that defines a name unit may not see, or None when unit may use it (it is
    defined in unit's own directory or below, or nowhere in src/)."""
    if not owners or owners & allowed_for(unit):
        return None
    return sorted(owners)[0]


def type_ties(f, tag_owners, typedef_owners):
    signatures = list(callback_signatures(f.code))
    for start, end, name in signatures:
        sig = f.code[start:end]
        seen = set()
        for kind, tag in TAG.findall(sig):
            owner = foreign(tag_owners.get(tag), f.unit)
            if owner and tag not in seen:
                seen.add(tag)
                yield (f"{f.name}:{line_of(f.code, start)}: callback {name} names {kind} {tag} "
                       f"in its signature, defined in {owner}/: {rule(f.unit, owner, NAMES)}; "
                       "a lower layer's callback is typed in its own layer's terms")
        for word in TYPE_POSITION.findall(re.sub(r"\b(?:struct|union|enum)\s+\w+", " ", sig)):
            owner = foreign(typedef_owners.get(word), f.unit)
            if owner and word not in C_WORDS and word not in seen:
                seen.add(word)
                yield (f"{f.name}:{line_of(f.code, start)}: callback {name} names {word} in "
                       f"its signature, defined in {owner}/: {rule(f.unit, owner, NAMES)}; "
                       "a lower layer's callback is typed in its own layer's terms")
    for m in TAG.finditer(f.code):
        if any(start <= m.start() < end for start, end, _ in signatures):
            continue
        kind, tag = m.groups()
        owner = foreign(tag_owners.get(tag), f.unit)
        if owner:
            yield (f"{f.name}:{line_of(f.code, m.start())}: names {kind} {tag}, defined in "
                   f"{owner}/: {rule(f.unit, owner, NAMES)}")


def registration_ties(f, called_fields, function_owners):
    """A function of f's layer (or one above the callback's) stored in a lower layer's callback
    field outside the start-up places."""
    if f.start_up or f.unit in APART:
        return
    here = tier_of(f.unit)
    tables = list(const_tables(f.code))
    for m in STORED.finditer(f.code):
        field, fn = m.groups()
        if any(start <= m.start() < end for start, end in tables):
            continue  # data passed down with each call, like an argument
        for lower in sorted(called_fields.get(field, ())):
            there = tier_of(lower)
            owners = function_owners.get(fn, set())
            if there is None or here is None or there >= here or f.unit not in owners:
                continue
            yield (f"{f.name}:{line_of(f.code, m.start())}: hands {fn} ({f.unit}/) to {lower}/'s "
                   f"callback .{field}, which {lower}/ calls: a lower layer is handed an upper "
                   f"layer's function only at start-up (" +
                   ", ".join(sorted(START_UP)) + ")")


WRITE_RESULT_CAST = re.compile(
    r"\(\s*(?!write_result\b)[A-Za-z_]\w*(?:\s+[A-Za-z_]\w*)*\s*\)\s*\(?\s*"
    r"[A-Za-z_]\w*(?:\s*(?:->|\.)\s*[A-Za-z_]\w*)*\s*(?:->|\.)\s*write_result\b"
    r"|(?:->|\.)\s*write_result\s*=\s*\(\s*write_result\s*\)")
JOB_FIELD = re.compile(r"\bwrite_job_fn\s+([A-Za-z_]\w*)\s*[;,)]")


def top_level_split(text):
    """text split at its top-level commas."""
    parts, depth, last = [], 0, 0
    for i, c in enumerate(text):
        depth += c in "({["
        depth -= c in ")}]"
        if c == "," and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    parts.append(text[last:])
    return parts


def job_slots(code):
    """{function: index} of each function with a write_job_fn parameter, from its declarations
    and definitions in code."""
    slots = {}
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", code):
        if m.group(1) in C_WORDS:
            continue
        params = code[m.end():closing(code, m.end() - 1) - 1]
        if "write_job_fn" not in params:
            continue
        for i, param in enumerate(top_level_split(params)):
            if re.match(r"\s*write_job_fn\s+[A-Za-z_]\w*\s*$", param):
                slots[m.group(1)] = i
    return slots


def return_types(code):
    """(function, its return type as written, whether it is static) of each function defined
    at file scope."""
    for head, _, _ in file_scope_blocks(code):
        m = re.search(r"(?:^|[;}\n])\s*((?:static\s+|inline\s+)*)([A-Za-z_][\w\s\*]*?)\s*\b"
                      r"([A-Za-z_]\w*)\s*\([^;{}]*\)\s*$", head)
        if m and "=" not in head and not TAG_DEFINITION.search(head + "{"):
            yield m.group(3), " ".join(m.group(2).split()), "static" in m.group(1)


# the text before a function's name in its own declaration or definition: its return type
DECLARED = re.compile(r"^\s*(?:(?:static|inline|extern|const)\s+)*(?!return\b)[A-Za-z_]\w*"
                      r"(?:\s+|\s*\*+\s*)$")


def write_job_ties(files):
    """Rule 4: write jobs and their callers speak write_result. Yields (file, line)."""
    slots, fields, own, shared = {}, set(), {}, {}
    for f in files:
        slots.update(job_slots(f.code))
        fields |= {m.group(1) for m in JOB_FIELD.finditer(f.code)}
        for name, ret, static in return_types(f.code):
            own.setdefault(f.name, {})[name] = ret
            if not static:
                shared[name] = ret
    if not slots and not fields:
        return
    handed = re.compile(r"(?:\.|->)\s*(" + "|".join(sorted(fields)) + r")\s*=\s*&?\s*"
                        r"([A-Za-z_]\w*)\s*(?=[,;}])") if fields else None
    for f in files:
        for m in re.finditer(r"typedef\s+([A-Za-z_]\w*)\s*\(\s*\*\s*write_job_fn\s*\)", f.code):
            if m.group(1) != "write_result":
                yield f.name, (f"{f.name}:{line_of(f.code, m.start())}: write_job_fn returns "
                               f"{m.group(1)}: a write job returns write_result (store/store.h)")
        jobs = []
        for m in re.finditer(r"\b(" + "|".join(sorted(slots)) + r")\s*\(", f.code) if slots else ():
            end = closing(f.code, m.end() - 1)
            if DECLARED.match(f.code[:m.start()].split("\n")[-1]):
                continue  # its own definition or declaration
            args = top_level_split(f.code[m.end():end - 1])
            i = slots[m.group(1)]
            if i < len(args) and re.fullmatch(r"\s*&?\s*[A-Za-z_]\w*\s*", args[i]):
                jobs.append((args[i].strip().lstrip("&").strip(), m.start(), m.group(1)))
        for m in handed.finditer(f.code) if handed else ():
            jobs.append((m.group(2), m.start(), "." + m.group(1)))
        for job, pos, via in jobs:
            ret = own.get(f.name, {}).get(job, shared.get(job))  # a static one of its file first
            if ret is not None and ret.split()[-1] != "write_result":
                yield f.name, (f"{f.name}:{line_of(f.code, pos)}: {job} is handed to {via} as "
                               f"a write job but returns {ret}: a write job returns write_result "
                               "(store/store.h), its db_status said through write_result_of_db")
        for m in WRITE_RESULT_CAST.finditer(f.code):
            yield f.name, (f"{f.name}:{line_of(f.code, m.start())}: casts a write_result: a "
                           "request's write_result is read as it is (store/store.h)")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent)
    src = root / "src"
    files, outside = [], {}
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".c", ".h") or not path.is_file():
            continue
        f = Source(path, root, src)
        if allowed_for(f.unit) is None:
            outside[f.name] = (f"{f.name}:1: src/{f.unit} is in no layer; add it to the order "
                               "in scripts/check-layers.py")
        else:
            files.append(f)

    tag_owners, typedef_owners, function_owners, fn_typedefs = {}, {}, {}, set()
    for f in files:
        for tag in TAG_DEFINITION.findall(f.code):
            tag_owners.setdefault(tag, set()).add(f.unit)
        for name, is_fp in typedef_names(f.code):
            typedef_owners.setdefault(name, set()).add(f.unit)
            if is_fp:
                fn_typedefs.add(name)
        for name, _, _ in function_bodies(f.code):
            function_owners.setdefault(name, set()).add(f.unit)
    # callback fields each layer calls through: field -> the directories that declare and call it
    declared = {}
    for f in files:
        for field in callback_fields(f.code, fn_typedefs):
            declared.setdefault(f.unit, set()).add(field)
    called_fields = {}
    for f in files:
        for field in declared.get(f.unit, ()):
            if re.search(r"(?:\.|->)\s*" + field + r"\s*\(", f.code):
                called_fields.setdefault(field, set()).add(f.unit)

    by_file = {name: [line] for name, line in outside.items()}
    for f in files:
        by_file[f.name] = [*include_ties(f), *type_ties(f, tag_owners, typedef_owners),
                           *registration_ties(f, called_fields, function_owners)]
    for name, line in write_job_ties(files):
        by_file[name].append(line)
    problems = [p for name in sorted(by_file) for p in by_file[name]]
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
