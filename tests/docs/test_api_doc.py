"""docs/api.md is the contract the repository serves, and every citation of it holds: nothing in
the tree cites the contract file that used to live outside the repository, and every section a
citation names, `docs/api.md §N` or a bare `§N`, is a section of docs/api.md."""

import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
API_DOC = os.path.join(ROOT, "docs", "api.md")

# The old contract's file name, spelled so that this file does not cite it.
OLD_CONTRACT = "API" + ".md"
SKIPPED_DIRS = {".git", "node_modules", "__pycache__", ".pytest_cache"}
# A citation: "§5", "§3-§10" or "§3–§10" (a range names both ends). docs/api.md has no
# subsections, so a dotted number ("§6.1", on the line after its RFC's name) is another document's.
CITATION = re.compile(r"§(\d+)(?!\d|\.\d)(?:\s*[-–]\s*§?(\d+)(?!\d|\.\d))?")
# Another document's section ("RFC 9110 §13.1.1") is not a section of ours.
OTHER_DOCUMENT = re.compile(r"RFC[ -]?\d+,?\s*$")


def tree_files():
    """Every text file of the tree, without version control and build directories (any
    directory holding a CMakeCache.txt, wherever it was configured)."""
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS
                         and not os.path.exists(os.path.join(top, d, "CMakeCache.txt")))
        for name in sorted(files):
            path = os.path.join(top, name)
            with open(path, "rb") as f:
                data = f.read()
            if b"\0" in data:
                continue  # binary
            yield os.path.relpath(path, ROOT), data.decode("utf-8", errors="replace")


def sections(doc_text):
    """The numbers of the sections of docs/api.md: its `## N. Title` headings."""
    return {int(n) for n in re.findall(r"^## (\d+)\. \S", doc_text, re.M)}


def cited_sections(text):
    """[(line number, section)] for every section of docs/api.md the text cites."""
    cited = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in CITATION.finditer(line):
            if OTHER_DOCUMENT.search(line[:m.start()]):
                continue
            cited.append((number, int(m.group(1))))
            if m.group(2):
                cited.append((number, int(m.group(2))))
    return cited


def old_contract_citations(text):
    return [number for number, line in enumerate(text.splitlines(), 1) if OLD_CONTRACT in line]


def test_api_doc_has_the_sixteen_sections_in_order():
    """Sections 1 to 16 in order; later ones keep the contract's numbers (the ledger's 18 may
    come before 17 is written), in increasing order."""
    with open(API_DOC, encoding="utf-8") as f:
        numbers = [int(n) for n in re.findall(r"^## (\d+)\. \S", f.read(), re.M)]
    assert numbers[:16] == list(range(1, 17))
    assert numbers[16:] == sorted(set(numbers[16:])) and all(n > 16 for n in numbers[16:])


def test_nothing_cites_the_old_contract_file():
    found = [f"{path}:{line}" for path, text in tree_files()
             for line in old_contract_citations(text)]
    assert found == [], f"cite docs/api.md §N instead: {found}"


def test_every_cited_section_exists():
    with open(API_DOC, encoding="utf-8") as f:
        existing = sections(f.read())
    missing = [f"{path}:{line}: §{section}" for path, text in tree_files()
               for line, section in cited_sections(text) if section not in existing]
    assert missing == [], f"no such section in docs/api.md: {missing}"


def test_the_checks_see_what_they_look_for():
    """The finders on known text, so a broken pattern cannot pass by finding nothing."""
    assert sections("# t\n## 1. One\n## 2. Two\n### 2.1 not a section\n## Not yet\n") == {1, 2}
    text = ("/* Payments (docs/api.md §5), §3-§10 and §11–§12 */\n"
            "RFC 9110 §13.1.1 and RFC 9112 §6.1 are not ours; (§16)\n"
            " * (RFC 9112 §5.1,\n * §3.2, §6.1), the policy of §14.\n")
    assert cited_sections(text) == [(1, 5), (1, 3), (1, 10), (1, 11), (1, 12), (2, 16), (4, 14)]
    assert old_contract_citations(f"ok\nsee {OLD_CONTRACT} §5\n") == [2]
    assert old_contract_citations("see docs/api.md §5\n") == []
