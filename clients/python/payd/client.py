"""payd.Client and its resources: each method is one logical call with the retry policy
(payd._transport); lists are generators that follow next_cursor until has_more is false."""

from __future__ import annotations

import urllib.parse
from typing import Any, Callable, Iterator, Mapping, TypeVar, cast

from . import models
from ._transport import Response, Transport

T = TypeVar("T")


def _segment(value: str) -> str:
    """One path segment, escaped, so an id can never reach another route."""
    if not isinstance(value, str) or not value:
        raise ValueError("an id is a non-empty string")
    return urllib.parse.quote(value, safe="")


def _body(**fields: Any) -> dict[str, Any]:
    """The JSON body: the fields the caller gave (None means not given)."""
    return {k: v for k, v in fields.items() if v is not None}


class Client:
    """A payd API client.

    max_retries: retries after the first attempt (0 never retries).
    base_delay, max_delay: seconds; the nominal wait before retry n is
        min(base_delay * 2**(n-1), max_delay), +-30 % jitter, never less than Retry-After;
        a Retry-After above max_delay means give up.
    timeout: seconds for one attempt (the connect, and each wait for bytes of the answer);
        deadline: seconds for the whole logical call, all attempts and waits (None or 0: none).

    A Client holds no connection between calls, so one may be shared by threads.
    """

    def __init__(self, api_key: str, base_url: str = "http://127.0.0.1:8080", *,
                 max_retries: int = 4, base_delay: float = 1.0, max_delay: float = 30.0,
                 timeout: float = 30.0, deadline: float | None = 120.0,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] | None = None,
                 wall_clock: Callable[[], float] | None = None,
                 rand: Callable[[], float] | None = None) -> None:
        if not api_key:
            raise ValueError("an API key is required")
        # sleep, clock (monotonic), wall_clock (Unix seconds, for HTTP-date Retry-After) and
        # rand (uniform in [0, 1), the jitter) are for tests; the defaults are the real ones.
        self._transport = Transport(api_key, base_url, max_retries=max_retries,
                                    base_delay=base_delay, max_delay=max_delay, timeout=timeout,
                                    deadline=deadline, sleep=sleep, clock=clock,
                                    wall_clock=wall_clock, rand=rand)
        self.accounts = Accounts(self)
        self.payments = Payments(self)
        self.refunds = Refunds(self)
        self.orders = Orders(self)
        self.transfers = Transfers(self)
        self.balance_transactions = BalanceTransactions(self)
        self.events = Events(self)
        self.webhook_endpoints = WebhookEndpoints(self)

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                body: Any = None, idempotency_key: str | None = None,
                headers: Mapping[str, str] | None = None) -> Response:
        """Any request, with the retry policy: the final answer below 400 (its body, status,
        headers, attempts, the Idempotency-Key sent, whether it was replayed), or a PaydError."""
        return self._transport.request(method, path, query=query, body=body,
                                       idempotency_key=idempotency_key, headers=headers)

    def list_page(self, path: str, **query: Any) -> dict[str, Any]:
        """One page of any list: {"object": "list", "data", "has_more", "next_cursor", ...}."""
        page = self.request("GET", path, query=query).body
        if not isinstance(page, dict) or not isinstance(page.get("data"), list):
            raise ValueError(f"GET {path}: the answer is not a list page")
        return page

    def list_all(self, path: str, **query: Any) -> Iterator[Any]:
        """Every item of a list, page after page (each page one logical call with its own
        retries), following next_cursor until has_more is false. A `cursor` in the query is
        where the walk starts."""
        while True:
            page = self.list_page(path, **query)
            yield from page["data"]
            if not page.get("has_more"):
                return
            if not isinstance(page.get("next_cursor"), str):
                raise ValueError(f"GET {path}: has_more without a next_cursor")
            query = {**query, "cursor": page["next_cursor"]}


class _Resource:
    def __init__(self, client: Client) -> None:
        self._client = client

    def _post(self, path: str, body: dict[str, Any], idempotency_key: str | None) -> Any:
        return self._client.request("POST", path, body=body,
                                    idempotency_key=idempotency_key).body

    def _get(self, path: str, **query: Any) -> Any:
        return self._client.request("GET", path, query=query).body


class Accounts(_Resource):
    def create(self, currency: str, *, name: str | None = None,
               idempotency_key: str | None = None) -> models.Account:
        return cast(models.Account, self._post(
            "/v1/accounts", _body(currency=currency, name=name), idempotency_key))

    def retrieve(self, account_id: str) -> models.Account:
        return cast(models.Account, self._get(f"/v1/accounts/{_segment(account_id)}"))

    def list(self, *, limit: int | None = None,
             cursor: str | None = None) -> Iterator[models.Account]:
        return self._client.list_all("/v1/accounts", limit=limit, cursor=cursor)

    def list_page(self, *, limit: int | None = None,
                  cursor: str | None = None) -> models.AccountList:
        return cast(models.AccountList,
                    self._client.list_page("/v1/accounts", limit=limit, cursor=cursor))

    def balance(self, account_id: str) -> models.Balance:
        """The account's books (docs/api.md §18): available and pending, in minor units."""
        return cast(models.Balance, self._get(f"/v1/accounts/{_segment(account_id)}/balance"))


class Payments(_Resource):
    def create(self, *, account_id: str, amount: int, currency: str, source: str,
               order_id: str | None = None, description: str | None = None,
               metadata: Mapping[str, str] | None = None,
               capture_method: str | None = None,
               idempotency_key: str | None = None) -> models.Payment:
        """Charges `source` (`capture_method="manual"`: only authorizes, §17). Retried under one Idempotency-Key (the caller's, else a UUIDv4
        made once here), so a lost answer or a 409 in flight still ends as one charge."""
        body = _body(account_id=account_id, amount=amount, currency=currency, source=source,
                     order_id=order_id, description=description,
                     metadata=dict(metadata) if metadata is not None else None,
                     capture_method=capture_method)
        return cast(models.Payment, self._post("/v1/payments", body, idempotency_key))

    def retrieve(self, payment_id: str) -> models.Payment:
        return cast(models.Payment, self._get(f"/v1/payments/{_segment(payment_id)}"))

    def capture(self, payment_id: str, *, amount_to_capture: int | None = None,
                final_capture: bool | None = None,
                idempotency_key: str | None = None) -> models.Payment:
        """Captures `amount_to_capture` (default: all that is capturable) of a manual payment's
        hold; `final_capture` (the server's default: true) releases the rest (§17)."""
        return cast(models.Payment, self._post(
            f"/v1/payments/{_segment(payment_id)}/capture",
            _body(amount_to_capture=amount_to_capture, final_capture=final_capture),
            idempotency_key))

    def cancel(self, payment_id: str, *, cancellation_reason: str | None = None,
               idempotency_key: str | None = None) -> models.Payment:
        """Releases what is left of a manual payment's hold (§17)."""
        return cast(models.Payment, self._post(
            f"/v1/payments/{_segment(payment_id)}/cancel",
            _body(cancellation_reason=cancellation_reason), idempotency_key))

    def _filters(self, limit: int | None, cursor: str | None, status: str | None,
                 created_gte: str | None, created_lt: str | None) -> dict[str, Any]:
        return {"limit": limit, "cursor": cursor, "status": status, "created_gte": created_gte,
                "created_lt": created_lt}

    def list(self, *, account: str, limit: int | None = None, cursor: str | None = None,
             status: str | None = None, created_gte: str | None = None,
             created_lt: str | None = None) -> Iterator[models.Payment]:
        """Every payment of the account, newest first, across all pages."""
        return self._client.list_all(f"/v1/accounts/{_segment(account)}/payments",
                                     **self._filters(limit, cursor, status, created_gte,
                                                     created_lt))

    def list_page(self, *, account: str, limit: int | None = None, cursor: str | None = None,
                  status: str | None = None, created_gte: str | None = None,
                  created_lt: str | None = None) -> models.PaymentList:
        return cast(models.PaymentList, self._client.list_page(
            f"/v1/accounts/{_segment(account)}/payments",
            **self._filters(limit, cursor, status, created_gte, created_lt)))

    def count(self, *, account: str, status: str | None = None, created_gte: str | None = None,
              created_lt: str | None = None) -> models.Count:
        return cast(models.Count, self._get(
            f"/v1/accounts/{_segment(account)}/payments/count", status=status,
            created_gte=created_gte, created_lt=created_lt))


class Refunds(_Resource):
    def create(self, payment_id: str, *, amount: int | None = None, reason: str | None = None,
               idempotency_key: str | None = None) -> models.Refund:
        """Refunds `amount` (default: all that is left) of the payment."""
        return cast(models.Refund, self._post(
            f"/v1/payments/{_segment(payment_id)}/refunds", _body(amount=amount, reason=reason),
            idempotency_key))

    def list(self, payment_id: str, *, limit: int | None = None,
             cursor: str | None = None) -> Iterator[models.Refund]:
        return self._client.list_all(f"/v1/payments/{_segment(payment_id)}/refunds",
                                     limit=limit, cursor=cursor)

    def list_page(self, payment_id: str, *, limit: int | None = None,
                  cursor: str | None = None) -> models.RefundList:
        return cast(models.RefundList, self._client.list_page(
            f"/v1/payments/{_segment(payment_id)}/refunds", limit=limit, cursor=cursor))


class Orders(_Resource):
    def create(self, *, external_order_id: str, amount: int, currency: str,
               description: str | None = None,
               idempotency_key: str | None = None) -> models.Order:
        return cast(models.Order, self._post("/v1/orders", _body(
            external_order_id=external_order_id, amount=amount, currency=currency,
            description=description), idempotency_key))

    def retrieve(self, order_id: str) -> models.Order:
        return cast(models.Order, self._get(f"/v1/orders/{_segment(order_id)}"))

    def list(self, *, limit: int | None = None, cursor: str | None = None,
             status: str | None = None) -> Iterator[models.Order]:
        return self._client.list_all("/v1/orders", limit=limit, cursor=cursor, status=status)


class Transfers(_Resource):
    def create(self, *, biz_seq: str, from_account: str, to_account: str, amount: int,
               currency: str, description: str | None = None) -> models.Transfer:
        """`biz_seq` is the transfer's own dedupe key: a retry cannot move money twice."""
        return cast(models.Transfer, self._post("/v1/transfers", _body(
            biz_seq=biz_seq, from_account=from_account, to_account=to_account, amount=amount,
            currency=currency, description=description), None))

    def retrieve(self, transfer_id: str) -> models.Transfer:
        return cast(models.Transfer, self._get(f"/v1/transfers/{_segment(transfer_id)}"))


class BalanceTransactions(_Resource):
    """The ledger's lines on the caller's accounts (txn_...), newest first."""

    def retrieve(self, transaction_id: str) -> models.BalanceTransaction:
        return cast(models.BalanceTransaction,
                    self._get(f"/v1/balance_transactions/{_segment(transaction_id)}"))

    def get(self, transaction_id: str) -> models.BalanceTransaction:
        """The same as retrieve (the C client's and payctl's name for it)."""
        return self.retrieve(transaction_id)

    def list(self, *, account_id: str | None = None, type: str | None = None,
             source: str | None = None, created_gte: str | None = None,
             created_lt: str | None = None, limit: int | None = None,
             cursor: str | None = None) -> Iterator[models.BalanceTransaction]:
        """Every line the filters select, page after page through next_cursor. `source` is
        the payment, refund or transfer that moved the money (pay_, re_ or tr_)."""
        return self._client.list_all(
            "/v1/balance_transactions", account_id=account_id, type=type, source=source,
            created_gte=created_gte, created_lt=created_lt, limit=limit, cursor=cursor)

    def list_page(self, *, account_id: str | None = None, type: str | None = None,
                  source: str | None = None, created_gte: str | None = None,
                  created_lt: str | None = None, limit: int | None = None,
                  cursor: str | None = None) -> models.BalanceTransactionList:
        return cast(models.BalanceTransactionList, self._client.list_page(
            "/v1/balance_transactions", account_id=account_id, type=type, source=source,
            created_gte=created_gte, created_lt=created_lt, limit=limit, cursor=cursor))


class Events(_Resource):
    def retrieve(self, event_id: str) -> models.Event:
        return cast(models.Event, self._get(f"/v1/events/{_segment(event_id)}"))

    def list(self, *, limit: int | None = None, cursor: str | None = None,
             type: str | None = None, created_gte: str | None = None,
             created_lt: str | None = None) -> Iterator[models.Event]:
        return self._client.list_all("/v1/events", limit=limit, cursor=cursor, type=type,
                                     created_gte=created_gte, created_lt=created_lt)

    def list_page(self, *, limit: int | None = None, cursor: str | None = None,
                  type: str | None = None, created_gte: str | None = None,
                  created_lt: str | None = None) -> models.EventList:
        return cast(models.EventList, self._client.list_page(
            "/v1/events", limit=limit, cursor=cursor, type=type, created_gte=created_gte,
            created_lt=created_lt))


class WebhookEndpoints(_Resource):
    def create(self, *, url: str, events: list[str], description: str | None = None,
               idempotency_key: str | None = None) -> models.WebhookEndpoint:
        """The answer holds `secret` (whsec_...), shown only here: keep it for verify()."""
        return cast(models.WebhookEndpoint, self._post("/v1/webhook_endpoints", _body(
            url=url, events=events, description=description), idempotency_key))

    def retrieve(self, endpoint_id: str) -> models.WebhookEndpoint:
        return cast(models.WebhookEndpoint,
                    self._get(f"/v1/webhook_endpoints/{_segment(endpoint_id)}"))

    def update(self, endpoint_id: str, *, url: str | None = None,
               events: list[str] | None = None,
               disabled: bool | None = None) -> models.WebhookEndpoint:
        return cast(models.WebhookEndpoint, self._client.request(
            "PATCH", f"/v1/webhook_endpoints/{_segment(endpoint_id)}",
            body=_body(url=url, events=events, disabled=disabled)).body)

    def delete(self, endpoint_id: str) -> models.WebhookEndpointDeleted:
        return cast(models.WebhookEndpointDeleted, self._client.request(
            "DELETE", f"/v1/webhook_endpoints/{_segment(endpoint_id)}").body)

    def list(self, *, limit: int | None = None,
             cursor: str | None = None) -> Iterator[models.WebhookEndpoint]:
        return self._client.list_all("/v1/webhook_endpoints", limit=limit, cursor=cursor)

    def deliveries(self, endpoint_id: str, *, limit: int | None = None,
                   cursor: str | None = None) -> Iterator[models.WebhookAttempt]:
        """Every delivery attempt to the endpoint, newest first."""
        return self._client.list_all(
            f"/v1/webhook_endpoints/{_segment(endpoint_id)}/deliveries", limit=limit,
            cursor=cursor)
