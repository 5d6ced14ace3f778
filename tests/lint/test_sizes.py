"""Files a newcomer can hold: no source file in src/ over 800 lines, no C function over 150
(docs/architecture.md). A file that grows past the bound is split by what changes together, as
store/ and db.c were, rather than let the bound move."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150


def sources():
    return sorted(p for p in (ROOT / "src").rglob("*") if p.suffix in (".c", ".h"))


def test_no_source_file_is_over_800_lines():
    long = [f"{p.relative_to(ROOT)}: {n} lines"
            for p in sources() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES]
    assert not long, long


def function_lengths(text):
    """(name, lines) of each function defined at file scope: a line that opens a definition at
    column 0 (clang-format puts a function's brace alone on the next line) to its closing brace
    at column 0."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line == "{" and i > 0 and not lines[i - 1].startswith((" ", "#", "}")):
            name = re.search(r"(\w+)\s*\(", lines[i - 1]) or re.search(r"(\w+)\s*\(",
                                                                       lines[i - 2])
            end = next(j for j in range(i + 1, len(lines)) if lines[j] == "}")
            yield (name.group(1) if name else lines[i - 1]), end - i + 1


def test_no_function_is_over_150_lines():
    long = [f"{p.relative_to(ROOT)}: {name} {n} lines"
            for p in sources() if p.suffix == ".c"
            for name, n in function_lengths(p.read_text()) if n > MAX_FUNCTION_LINES]
    assert not long, long


def test_the_function_finder_sees_a_long_function(tmp_path):
    body = "\n".join(["    x++;"] * 160)
    text = f"static int f(void)\n{{\n{body}\n}}\n\nint g(void)\n{{\n    return 0;\n}}\n"
    assert dict(function_lengths(text)) == {"f": 162, "g": 3}
