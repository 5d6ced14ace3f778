"""The API's resources as TypedDicts. Generated from docs/openapi.json by
clients/python/scripts/gen_models.py: do not edit; run the script after changing
the document (a test fails while this file is stale)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "UserId",
    "AccountId",
    "PaymentId",
    "RefundId",
    "OrderId",
    "TransferId",
    "ProductId",
    "ReservationId",
    "Timestamp",
    "Amount",
    "CurrencyIn",
    "Currency",
    "Version",
    "Metadata",
    "Account",
    "AccountCreate",
    "Payment",
    "PaymentCreate",
    "Refund",
    "RefundCreate",
    "Order",
    "OrderCreate",
    "OrderStatusUpdate",
    "Transfer",
    "TransferCreate",
    "User",
    "UserUpdate",
    "Product",
    "ProductCreate",
    "ProductUpdate",
    "Reservation",
    "ReservationCreate",
    "List",
    "AccountList",
    "PaymentList",
    "RefundList",
    "OrderList",
    "TransferList",
    "Count",
    "Problem",
    "Health",
    "ApiKeyId",
    "ApiKey",
    "ApiKeyCreated",
    "ApiKeyCreate",
    "ApiKeyList",
    "PaymentStatsDataItem",
    "PaymentStatsTotal",
    "PaymentStats",
    "EventId",
    "WebhookEndpointId",
    "WebhookAttemptId",
    "EventType",
    "EventData",
    "Event",
    "EventList",
    "WebhookEndpoint",
    "WebhookEndpointCreate",
    "WebhookEndpointUpdate",
    "WebhookSecretRotation",
    "WebhookEndpointDeleted",
    "WebhookEndpointList",
    "WebhookAttempt",
    "WebhookAttemptList",
    "SecretRedacted",
    "EventRedeliver",
    "Redelivery",
    "WebhookRecover",
    "WebhookRecovery",
    "BalanceTransactionId",
    "JournalEntryId",
    "Balance",
    "BalanceTransaction",
    "BalanceTransactionList",
    "PaymentCapture",
    "PaymentCancel",
]

UserId = str
AccountId = str
PaymentId = str
RefundId = str
OrderId = str
TransferId = str
ProductId = str
ReservationId = str
Timestamp = str
Amount = int
CurrencyIn = str
Currency = str
Version = int
Metadata = dict[str, str]
ApiKeyId = str
EventId = str
WebhookEndpointId = str
WebhookAttemptId = str
EventType = Literal["account.created", "payment.succeeded", "payment.failed", "payment.authorized", "payment.captured", "payment.canceled", "refund.succeeded", "order.created", "order.status_changed", "transfer.succeeded", "transfer.failed", "reservation.created", "webhook_endpoint.disabled"]
BalanceTransactionId = str
JournalEntryId = str


class Account(TypedDict):
    id: AccountId
    object: Literal["account"]
    livemode: bool
    currency: Currency
    name: str | None
    balance: int
    version: Version
    created_at: Timestamp


class AccountCreate(TypedDict):
    currency: CurrencyIn
    name: NotRequired[str | None]


class Payment(TypedDict):
    id: PaymentId
    object: Literal["payment"]
    livemode: bool
    account_id: AccountId
    amount: Amount
    currency: Currency
    status: Literal["requires_capture", "succeeded", "failed", "canceled", "partially_refunded", "refunded"]
    source: str
    order_id: OrderId | None
    description: str | None
    metadata: Metadata
    refunded_amount: int
    processor_charge_id: str | None
    capture_method: Literal["automatic", "manual"]
    amount_capturable: int
    amount_captured: int
    amount_released: int
    capture_before: Timestamp | None
    canceled_at: Timestamp | None
    cancellation_reason: Literal["requested_by_customer", "abandoned", "fraudulent", "duplicate", "expired", None]
    created_at: Timestamp


class PaymentCreate(TypedDict):
    account_id: AccountId
    amount: Amount
    currency: CurrencyIn
    source: str
    order_id: NotRequired[OrderId | None]
    description: NotRequired[str | None]
    metadata: NotRequired[Metadata | None]
    capture_method: NotRequired[Literal["automatic", "manual"] | None]


class Refund(TypedDict):
    id: RefundId
    object: Literal["refund"]
    livemode: bool
    payment_id: PaymentId
    amount: Amount
    reason: Literal["requested_by_customer", "duplicate", "fraudulent", None]
    status: Literal["succeeded", "pending"]
    created_at: Timestamp


class RefundCreate(TypedDict):
    amount: NotRequired[Amount | None]
    reason: NotRequired[Literal["requested_by_customer", "duplicate", "fraudulent"] | None]


class Order(TypedDict):
    id: OrderId
    object: Literal["order"]
    livemode: bool
    external_order_id: str
    amount: Amount
    currency: Currency
    status: Literal["created", "paid", "cancelled", "shipped", "completed", "refunded"]
    payment_id: PaymentId | None
    version: Version
    created_at: Timestamp
    updated_at: Timestamp


class OrderCreate(TypedDict):
    external_order_id: str
    amount: Amount
    currency: CurrencyIn
    description: NotRequired[str | None]


class OrderStatusUpdate(TypedDict):
    status: Literal["created", "paid", "cancelled", "shipped", "completed", "refunded"]
    version: NotRequired[Version | None]


class Transfer(TypedDict):
    id: TransferId
    object: Literal["transfer"]
    livemode: bool
    biz_seq: str
    from_account: AccountId
    to_account: AccountId
    amount: Amount
    currency: Currency
    status: str
    created_at: Timestamp


class TransferCreate(TypedDict):
    biz_seq: str
    from_account: AccountId
    to_account: AccountId
    amount: Amount
    currency: CurrencyIn
    description: NotRequired[str | None]


class User(TypedDict):
    id: UserId
    object: Literal["user"]
    livemode: bool
    name: str
    email: str | None
    version: Version
    created_at: Timestamp
    updated_at: Timestamp


class UserUpdate(TypedDict):
    name: NotRequired[str | None]
    email: NotRequired[str | None]
    version: NotRequired[Version | None]


class Product(TypedDict):
    id: ProductId
    object: Literal["product"]
    livemode: bool
    sku: str
    name: str
    stock: int
    version: Version
    created_at: Timestamp
    updated_at: Timestamp


class ProductCreate(TypedDict):
    sku: str
    name: str
    stock: int


class ProductUpdate(TypedDict):
    name: NotRequired[str | None]
    stock: NotRequired[int | None]
    version: NotRequired[Version | None]


class Reservation(TypedDict):
    id: ReservationId
    object: Literal["reservation"]
    livemode: bool
    sku: str
    quantity: int
    created_at: Timestamp


class ReservationCreate(TypedDict):
    quantity: int
    order_id: NotRequired[OrderId | None]


class List(TypedDict):
    """One page, newest first by (created_at, id). `next_cursor` is non-null exactly when `has_more` is true on a forward page; `prev_cursor` is non-null on every non-empty page reached through a cursor. There is no total: use the count endpoint."""

    object: Literal["list"]
    data: list[Any]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class AccountList(TypedDict):
    object: Literal["list"]
    data: list[Account]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class PaymentList(TypedDict):
    object: Literal["list"]
    data: list[Payment]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class RefundList(TypedDict):
    object: Literal["list"]
    data: list[Refund]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class OrderList(TypedDict):
    object: Literal["list"]
    data: list[Order]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class TransferList(TypedDict):
    object: Literal["list"]
    data: list[Transfer]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class Count(TypedDict):
    object: Literal["count"]
    livemode: bool
    count: int


class Problem(TypedDict):
    """RFC 9457 problem details (`application/problem+json`). Branch on `code`."""

    type: Literal["about:blank"]
    title: str
    status: int
    detail: str
    code: Literal["route_not_found", "method_not_allowed", "unauthorized", "resource_missing", "payload_too_large", "unsupported_media_type", "invalid_json", "unknown_parameter", "missing_parameter", "invalid_parameter", "invalid_limit", "invalid_cursor", "cursor_mismatch", "idempotency_key_missing", "idempotency_key_invalid", "idempotency_key_reused", "request_in_progress", "card_declined", "processor_unavailable", "duplicate_payment", "order_not_payable", "order_mismatch", "payment_not_refundable", "amount_exceeds_refundable", "insufficient_funds", "biz_seq_reused", "duplicate_order", "invalid_state_transition", "version_conflict", "duplicate_sku", "out_of_stock", "balance_limit_exceeded", "rate_limited", "headers_too_large", "invalid_header", "request_timeout", "uri_too_long", "bad_framing", "overloaded", "too_many_connections", "too_many_requests_in_progress", "shutting_down", "not_ready", "api_key_in_use", "api_key_limit_reached", "webhook_endpoint_limit_reached", "webhook_endpoint_disabled", "internal_error", "database_unavailable", "database_timeout"]
    request_id: str
    param: NotRequired[str]
    decline_code: NotRequired[str]
    payment: NotRequired[Payment]
    existing_payment_id: NotRequired[PaymentId]
    current_status: NotRequired[str]
    refundable_amount: NotRequired[int]
    existing_order_id: NotRequired[OrderId]
    current_version: NotRequired[Version]
    current_etag: NotRequired[str]
    available: NotRequired[int]


class Health(TypedDict):
    status: Literal["ok", "ready"]


class ApiKey(TypedDict):
    """An API key as it is listed: its id and first characters only, never the key or its hash."""

    id: ApiKeyId
    object: Literal["api_key"]
    livemode: bool
    user_id: UserId
    name: str | None
    prefix: str
    status: Literal["active", "revoked"]
    mode: Literal["test", "live"]
    created_at: Timestamp
    revoked_at: Timestamp | None


class ApiKeyCreated(TypedDict):
    id: ApiKeyId
    object: Literal["api_key"]
    livemode: bool
    user_id: UserId
    name: str | None
    prefix: str
    status: Literal["active", "revoked"]
    mode: Literal["test", "live"]
    created_at: Timestamp
    revoked_at: Timestamp | None
    api_key: str | None
    redacted: NotRequired[SecretRedacted]


class ApiKeyCreate(TypedDict):
    name: NotRequired[str | None]
    mode: NotRequired[Literal["test", "live"] | None]


class ApiKeyList(TypedDict):
    object: Literal["list"]
    data: list[ApiKey]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class PaymentStatsDataItem(TypedDict):
    bucket_start: str
    count: int
    amount: int
    refunded_amount: int
    net_amount: int


class PaymentStatsTotal(TypedDict):
    count: int
    amount: int
    refunded_amount: int
    net_amount: int


class PaymentStats(TypedDict):
    object: Literal["payment_stats"]
    livemode: bool
    account_id: str
    currency: str
    interval: Literal["hour", "day"]
    created_gte: str | None
    created_lt: str | None
    data: list[PaymentStatsDataItem]
    total: PaymentStatsTotal


class EventData(TypedDict):
    object: Account | Payment | Refund | Order | Transfer | Reservation


class Event(TypedDict):
    """A change, written in the same transaction as the change itself. `data.object` is the resource as it was right after the change. Also the body of every webhook delivery."""

    id: EventId
    object: Literal["event"]
    livemode: bool
    type: EventType
    created_at: Timestamp
    data: EventData


class EventList(TypedDict):
    object: Literal["list"]
    data: list[Event]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class WebhookEndpoint(TypedDict):
    id: WebhookEndpointId
    object: Literal["webhook_endpoint"]
    livemode: bool
    url: str
    events: list[str]
    description: str | None
    disabled: bool
    created_at: Timestamp
    updated_at: Timestamp
    previous_secret_expires_at: Timestamp | None
    secret: NotRequired[str | None]
    redacted: NotRequired[SecretRedacted]


class WebhookEndpointCreate(TypedDict):
    url: str
    events: list[EventType | Literal["*"]]
    description: NotRequired[str | None]


class WebhookEndpointUpdate(TypedDict):
    url: NotRequired[str | None]
    events: NotRequired[list[EventType | Literal["*"]] | None]
    disabled: NotRequired[bool | None]


class WebhookSecretRotation(TypedDict):
    expire_previous_in: NotRequired[int | None]


class WebhookEndpointDeleted(TypedDict):
    id: WebhookEndpointId
    object: Literal["webhook_endpoint"]
    livemode: bool
    deleted: Literal[True]


class WebhookEndpointList(TypedDict):
    object: Literal["list"]
    data: list[WebhookEndpoint]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class WebhookAttempt(TypedDict):
    """One delivery attempt. `created_at` is when it finished; `next_attempt_at` is when the next one is due (null once delivered or given up)."""

    id: WebhookAttemptId
    object: Literal["webhook_attempt"]
    livemode: bool
    webhook_endpoint_id: WebhookEndpointId
    event_id: EventId
    attempt: int
    response_status: int | None
    latency_ms: int
    error: Literal["timeout", "dns_failure", "connection_refused", "address_not_allowed", "tls_error", "connection_error", "bad_status", "body_too_large", "headers_too_large"] | None
    outcome: Literal["delivered", "retrying", "failed"]
    next_attempt_at: Timestamp | None
    created_at: Timestamp


class WebhookAttemptList(TypedDict):
    object: Literal["list"]
    data: list[WebhookAttempt]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class SecretRedacted(TypedDict):
    """Only in a replay of the create (the same Idempotency-Key): the secret named by `member` was shown in the first answer only, and is null here."""

    member: Literal["secret", "api_key"]
    code: Literal["secret_shown_once"]
    detail: str


class EventRedeliver(TypedDict):
    endpoint_id: NotRequired[WebhookEndpointId | None]


class Redelivery(TypedDict):
    object: Literal["redelivery"]
    livemode: bool
    event_id: EventId
    endpoint_ids: list[WebhookEndpointId]


class WebhookRecover(TypedDict):
    since: str


class WebhookRecovery(TypedDict):
    object: Literal["webhook_recovery"]
    livemode: bool
    webhook_endpoint_id: WebhookEndpointId
    since: Timestamp
    queued: int
    brought_forward: int


class Balance(TypedDict):
    object: Literal["balance"]
    livemode: bool
    available: int
    pending: int
    currency: Currency


class BalanceTransaction(TypedDict):
    """One line of a journal entry on one of the caller's accounts (docs/ledger.md)."""

    id: BalanceTransactionId
    object: Literal["balance_transaction"]
    livemode: bool
    account_id: AccountId
    amount: int
    currency: Currency
    type: Literal["charge", "authorization", "capture", "release", "refund", "transfer"]
    source: str
    entry_id: JournalEntryId
    created_at: Timestamp


class BalanceTransactionList(TypedDict):
    object: Literal["list"]
    data: list[BalanceTransaction]
    has_more: bool
    next_cursor: str | None
    prev_cursor: str | None


class PaymentCapture(TypedDict):
    amount_to_capture: NotRequired[Amount | None]
    final_capture: NotRequired[bool | None]


class PaymentCancel(TypedDict):
    cancellation_reason: NotRequired[Literal["requested_by_customer", "abandoned", "fraudulent", "duplicate"] | None]
