"""The currency table is said once, in src/core/currency_table.h (scripts/gen-currencies.py
writes it): sorted, each code once, three capital letters, exponents 0 to 4; and the dashboard's
table of exponents other than 2 (web/assets/format.js, which formats amounts) is exactly the
server's, so no amount is shown with more or fewer decimals than the API means."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def server_table():
    text = (ROOT / "src/core/currency_table.h").read_text()
    return [(code, int(e)) for code, e in re.findall(r'\{"([A-Z]{3})", (\d)\}', text)]


def dashboard_exponents():
    text = (ROOT / "web/assets/format.js").read_text()
    body = re.search(r"const EXPONENTS = \{(.*?)\};", text, re.S).group(1)
    return {code: int(e) for code, e in re.findall(r"\b([A-Z]{3}): (\d)", body)}


def test_the_table_is_sorted_and_each_code_is_there_once():
    rows = server_table()
    codes = [code for code, _ in rows]
    assert len(rows) == 183
    assert codes == sorted(set(codes))
    assert all(0 <= e <= 4 for _, e in rows)
    assert dict(rows)["JPY"] == 0 and dict(rows)["USD"] == 2 and dict(rows)["KWD"] == 3


def test_the_dashboard_knows_every_exponent_that_is_not_2():
    server = {code: e for code, e in server_table() if e != 2}
    assert dashboard_exponents() == server
