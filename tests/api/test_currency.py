"""§1 currencies (docs/api.md, "money"): an active ISO 4217 code from payd's own table, in any
case, answered upper case; a code not in the table is a 400 naming `currency`; a payment's and a
transfer's currency must be their account's. JPY has no minor unit: its amounts are whole yen."""

import os

import pytest


@pytest.fixture(scope="module")
def dora(server):
    return server.create_user("dora")


def assert_refused_currency(r):
    assert r.status == 400, r
    assert r.json["code"] == "invalid_parameter" and r.json["param"] == "currency", r.json
    assert "ISO 4217" in r.json["detail"]


def test_lower_case_is_accepted_and_answered_upper_case(dora):
    account = dora.post("/v1/accounts", {"currency": "usd"})
    assert account.status == 201 and account.json["currency"] == "USD"
    assert dora.get(f"/v1/accounts/{account.json['id']}").json["currency"] == "USD"
    paid = dora.post("/v1/payments", {"account_id": account.json["id"], "amount": 1999,
                                      "currency": "usd", "source": "tok_visa"},
                     idem=os.urandom(8).hex())
    assert paid.status == 201 and paid.json["currency"] == "USD"
    order = dora.post("/v1/orders", {"external_order_id": "cur-1", "amount": 500,
                                     "currency": "eUr"})
    assert order.status == 201 and order.json["currency"] == "EUR"


@pytest.mark.parametrize("code", ["QQQ", "qqq", "ABC", "XYZ", "US", "USDX", "ÉUR", 840])
def test_a_code_not_in_the_table_is_refused(dora, code):
    assert_refused_currency(dora.post("/v1/accounts", {"currency": code}))
    assert_refused_currency(dora.post("/v1/orders", {"external_order_id": f"cur-{code}",
                                                     "amount": 500, "currency": code}))


def test_an_unknown_code_on_a_payment_is_refused_before_its_key(dora):
    account = dora.create_account()
    idem = os.urandom(8).hex()
    body = {"account_id": account["id"], "amount": 100, "source": "tok_visa"}
    assert_refused_currency(dora.post("/v1/payments", {**body, "currency": "QQQ"}, idem=idem))
    # the key was not claimed: the corrected request takes it
    again = dora.post("/v1/payments", {**body, "currency": "USD"}, idem=idem)
    assert again.status == 201 and again.header("idempotent-replayed") is None


def test_a_jpy_account_pays_and_transfers_in_whole_yen(dora):
    a = dora.post("/v1/accounts", {"currency": "jpy", "name": "yen"})
    b = dora.post("/v1/accounts", {"currency": "JPY"})
    assert a.status == 201 and a.json["currency"] == "JPY" and b.json["currency"] == "JPY"
    paid = dora.post("/v1/payments", {"account_id": a.json["id"], "amount": 1500,
                                      "currency": "JPY", "source": "tok_visa"},
                     idem=os.urandom(8).hex())
    assert paid.status == 201 and paid.json["amount"] == 1500 and paid.json["currency"] == "JPY"
    moved = dora.post("/v1/transfers", {"biz_seq": "cur-jpy-1", "from_account": a.json["id"],
                                        "to_account": b.json["id"], "amount": 500,
                                        "currency": "jpy"})
    assert moved.status == 201 and moved.json["currency"] == "JPY"
    assert dora.get(f"/v1/accounts/{a.json['id']}").json["balance"] == 1000
    # another valid code, but not the account's
    other = dora.post("/v1/payments", {"account_id": a.json["id"], "amount": 1500,
                                       "currency": "USD", "source": "tok_visa"},
                      idem=os.urandom(8).hex())
    assert other.status == 400 and other.json["param"] == "currency"


def test_the_command_line_refuses_an_unknown_code(server, dora):
    r = server.cli("account", "create", "--user", dora.id, "--currency", "QQQ", check=False)
    assert r.returncode == 2 and "ISO 4217" in r.stderr
    made = server.cli("account", "create", "--user", dora.id, "--currency", "kwd")
    assert '"currency":"KWD"' in made.stdout.replace(" ", "")
