// Generated from docs/openapi.json by scripts/gen-types.mjs: do not edit.
// payd 1

/** User id: `usr_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type UserId = string;

/** Account id: `acct_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type AccountId = string;

/** Payment id: `pay_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type PaymentId = string;

/** Refund id: `re_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type RefundId = string;

/** Order id: `ord_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type OrderId = string;

/** Transfer id: `tr_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type TransferId = string;

/** Product id: `prod_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type ProductId = string;

/** Reservation id: `rsv_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type ReservationId = string;

/** RFC 3339 UTC with milliseconds. */
export type Timestamp = string;

/** Integer minor units (cents for USD): a JSON integer, so `10.0` is refused like `"10"`. */
export type Amount = number;

/** An active ISO 4217 code (payd's built-in table), in any case; answered upper case. A code not in the table (`QQQ`) is 400 `invalid_parameter` with `param: "currency"`. A payment's or transfer's currency must equal its account's. */
export type CurrencyIn = string;

/** An active ISO 4217 code, upper case. Amounts in it are integers of its minor unit: JPY has none (exponent 0), USD two digits, KWD three. */
export type Currency = string;

/** Starts at 1, +1 on every change; the ETag is `"v<version>"`. */
export type Version = number;

export type Metadata = {
  [name: string]: string;
};

export type Account = {
  id: AccountId;
  object: "account";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  currency: Currency;
  name: string | null;
  /** Succeeded payments − refunds + transfers in − transfers out; never below zero. */
  balance: number;
  version: Version;
  created_at: Timestamp;
};

export type AccountCreate = {
  currency: CurrencyIn;
  name?: string | null;
};

export type Payment = {
  id: PaymentId;
  object: "payment";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  account_id: AccountId;
  amount: Amount;
  currency: Currency;
  status: "requires_capture" | "succeeded" | "failed" | "canceled" | "partially_refunded" | "refunded";
  source: string;
  order_id: OrderId | null;
  description: string | null;
  metadata: Metadata;
  refunded_amount: number;
  processor_charge_id: string | null;
  /** §17: `manual` payments are held at the processor until captured. */
  capture_method: "automatic" | "manual";
  /** What is left of the hold. `amount_captured + amount_released + amount_capturable = amount`. */
  amount_capturable: number;
  /** What was captured; refunds take from this. An automatic payment that succeeded was captured in full. */
  amount_captured: number;
  /** What was released from the hold (a cancel, a final capture's rest, an expiry). */
  amount_released: number;
  /** A manual payment's hold is released and the payment canceled (`expired`) after this. */
  capture_before: Timestamp | null;
  canceled_at: Timestamp | null;
  cancellation_reason: "requested_by_customer" | "abandoned" | "fraudulent" | "duplicate" | "expired" | null;
  created_at: Timestamp;
};

export type PaymentCreate = {
  account_id: AccountId;
  amount: Amount;
  currency: CurrencyIn;
  /** A card token. The builtin simulator approves any token except `tok_chargeDeclined` and `tok_insufficientFunds` (declined), `tok_lostResponse` (charges, then loses the answer: 503), `tok_processorDown` (503, nothing charged) and `tok_slow` (approved after 2 s). */
  source: string;
  order_id?: OrderId | null;
  description?: string | null;
  metadata?: Metadata | null;
  /** `automatic` (default): authorized and captured at once. `manual`: only authorized (a hold, §17); capture or cancel it later. */
  capture_method?: "automatic" | "manual" | null;
};

export type Refund = {
  id: RefundId;
  object: "refund";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  payment_id: PaymentId;
  amount: Amount;
  reason: "requested_by_customer" | "duplicate" | "fraudulent" | null;
  /** pending while the processor's answer is in doubt (shown in lists); a retry with the same Idempotency-Key or the recoverer finishes it */
  status: "succeeded" | "pending";
  created_at: Timestamp;
};

export type RefundCreate = {
  /** Default: everything not yet refunded. */
  amount?: Amount | null;
  reason?: "requested_by_customer" | "duplicate" | "fraudulent" | null;
};

export type Order = {
  id: OrderId;
  object: "order";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  external_order_id: string;
  amount: Amount;
  currency: Currency;
  status: "created" | "paid" | "cancelled" | "shipped" | "completed" | "refunded";
  payment_id: PaymentId | null;
  version: Version;
  created_at: Timestamp;
  updated_at: Timestamp;
};

export type OrderCreate = {
  /** Unique per user: a second create answers 409 `duplicate_order`. */
  external_order_id: string;
  amount: Amount;
  currency: CurrencyIn;
  description?: string | null;
};

export type OrderStatusUpdate = {
  /** created → cancelled, paid → shipped and shipped → completed are made by this call; → paid and → refunded only by payments and refunds. Asking for the current status changes nothing (200). Anything else: 409 `invalid_state_transition`. */
  status: "created" | "paid" | "cancelled" | "shipped" | "completed" | "refunded";
  version?: Version | null;
};

export type Transfer = {
  id: TransferId;
  object: "transfer";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  biz_seq: string;
  from_account: AccountId;
  to_account: AccountId;
  amount: Amount;
  currency: Currency;
  status: string;
  created_at: Timestamp;
};

export type TransferCreate = {
  /** The caller's business serial number, unique per user: the dedupe key of this endpoint. */
  biz_seq: string;
  from_account: AccountId;
  to_account: AccountId;
  amount: Amount;
  currency: CurrencyIn;
  description?: string | null;
};

export type User = {
  id: UserId;
  object: "user";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  name: string;
  email: string | null;
  version: Version;
  created_at: Timestamp;
  updated_at: Timestamp;
};

export type UserUpdate = {
  name?: string | null;
  email?: string | null;
  version?: Version | null;
};

export type Product = {
  id: ProductId;
  object: "product";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  sku: string;
  name: string;
  stock: number;
  version: Version;
  created_at: Timestamp;
  updated_at: Timestamp;
};

export type ProductCreate = {
  sku: string;
  name: string;
  stock: number;
};

export type ProductUpdate = {
  name?: string | null;
  stock?: number | null;
  version?: Version | null;
};

export type Reservation = {
  id: ReservationId;
  object: "reservation";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  sku: string;
  quantity: number;
  created_at: Timestamp;
};

export type ReservationCreate = {
  quantity: number;
  order_id?: OrderId | null;
};

/** One page, newest first by (created_at, id). `next_cursor` is non-null exactly when `has_more` is true on a forward page; `prev_cursor` is non-null on every non-empty page reached through a cursor. There is no total: use the count endpoint. */
export type List = {
  object: "list";
  data: unknown[];
  has_more: boolean;
  next_cursor: string | null;
  prev_cursor: string | null;
};

export type AccountList = List & {
  data?: Account[];
};

export type PaymentList = List & {
  data?: Payment[];
};

export type RefundList = List & {
  data?: Refund[];
};

export type OrderList = List & {
  data?: Order[];
};

export type TransferList = List & {
  data?: Transfer[];
};

export type Count = {
  object: "count";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  count: number;
};

/** RFC 9457 problem details (`application/problem+json`). Branch on `code`. */
export type Problem = {
  type: "about:blank";
  title: string;
  status: number;
  detail: string;
  code: "route_not_found" | "method_not_allowed" | "unauthorized" | "resource_missing" | "payload_too_large" | "unsupported_media_type" | "invalid_json" | "unknown_parameter" | "missing_parameter" | "invalid_parameter" | "invalid_limit" | "invalid_cursor" | "cursor_mismatch" | "idempotency_key_missing" | "idempotency_key_invalid" | "idempotency_key_reused" | "request_in_progress" | "card_declined" | "processor_unavailable" | "duplicate_payment" | "order_not_payable" | "order_mismatch" | "payment_not_refundable" | "amount_exceeds_refundable" | "insufficient_funds" | "biz_seq_reused" | "duplicate_order" | "invalid_state_transition" | "version_conflict" | "duplicate_sku" | "out_of_stock" | "balance_limit_exceeded" | "rate_limited" | "headers_too_large" | "invalid_header" | "request_timeout" | "uri_too_long" | "bad_framing" | "overloaded" | "too_many_connections" | "too_many_requests_in_progress" | "shutting_down" | "not_ready" | "api_key_in_use" | "api_key_limit_reached" | "webhook_endpoint_limit_reached" | "webhook_endpoint_disabled" | "internal_error" | "database_unavailable" | "database_timeout";
  request_id: string;
  /** The offending parameter (400s, `invalid_cursor`, `cursor_mismatch`, `invalid_limit`). */
  param?: string;
  /** `card_declined`. */
  decline_code?: string;
  /** `card_declined`: the stored payment, `status: "failed"`. */
  payment?: Payment;
  /** `duplicate_payment`. */
  existing_payment_id?: PaymentId;
  /** `order_not_payable`, `invalid_state_transition`. */
  current_status?: string;
  /** `amount_exceeds_refundable`. */
  refundable_amount?: number;
  /** `duplicate_order`. */
  existing_order_id?: OrderId;
  /** 409 `version_conflict`. */
  current_version?: Version;
  /** `version_conflict` (409 and 412). */
  current_etag?: string;
  /** `out_of_stock`. */
  available?: number;
  [name: string]: unknown;
};

export type Health = {
  status: "ok" | "ready";
};

/** API key id: `key_` and 13 lowercase Crockford base32 characters encoding a Snowflake id. */
export type ApiKeyId = string;

/** An API key as it is listed: its id and first characters only, never the key or its hash. */
export type ApiKey = {
  id: ApiKeyId;
  object: "api_key";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  user_id: UserId;
  name: string | null;
  /** `sk_` and the key's next 8 characters; just `sk_` for a key made before keys were listed. */
  prefix: string;
  status: "active" | "revoked";
  /** a test key (sk_test_…) or a live key (sk_live_…); a key made before modes is live (§19) */
  mode: "test" | "live";
  created_at: Timestamp;
  revoked_at: Timestamp | null;
};

export type ApiKeyCreated = ApiKey & {
  /** The key itself, shown only in the first answer to the creation; only its SHA-256 is stored. Null in a replay (see `redacted`). */
  api_key: string | null;
  redacted?: SecretRedacted;
};

export type ApiKeyCreate = {
  /** A label to tell keys apart (`ci`, `2026-11 rotation`). */
  name?: string | null;
  /** The mode of the key made: `test` (sk_test_…) or `live` (sk_live_…); default the mode of the key making the request. A test key makes test keys only (§19). */
  mode?: "test" | "live" | null;
};

export type ApiKeyList = List & {
  data?: ApiKey[];
};

export type PaymentStats = {
  object: "payment_stats";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  account_id: string;
  currency: string;
  interval: "hour" | "day";
  created_gte: string | null;
  created_lt: string | null;
  data: Array<{
    bucket_start: string;
    /** Payments whose charge succeeded. */
    count: number;
    /** Their amount, in minor units. */
    amount: number;
    /** Refunded from them so far. */
    refunded_amount: number;
    /** `amount` - `refunded_amount`. */
    net_amount: number;
  }>;
  total: {
    /** Payments whose charge succeeded. */
    count: number;
    /** Their amount, in minor units. */
    amount: number;
    /** Refunded from them so far. */
    refunded_amount: number;
    /** `amount` - `refunded_amount`. */
    net_amount: number;
  };
};

export type EventId = string;

export type WebhookEndpointId = string;

export type WebhookAttemptId = string;

export type EventType = "account.created" | "payment.succeeded" | "payment.failed" | "payment.authorized" | "payment.captured" | "payment.canceled" | "refund.succeeded" | "order.created" | "order.status_changed" | "transfer.succeeded" | "transfer.failed" | "reservation.created" | "webhook_endpoint.disabled";

/** A change, written in the same transaction as the change itself. `data.object` is the resource as it was right after the change. Also the body of every webhook delivery. */
export type Event = {
  id: EventId;
  object: "event";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  type: EventType;
  created_at: Timestamp;
  data: {
    object: Account | Payment | Refund | Order | Transfer | Reservation;
  };
};

export type EventList = List & {
  data?: Event[];
};

export type WebhookEndpoint = {
  id: WebhookEndpointId;
  object: "webhook_endpoint";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  url: string;
  events: string[];
  description: string | null;
  disabled: boolean;
  created_at: Timestamp;
  updated_at: Timestamp;
  /** When the secret replaced by the last rotation stops (or stopped) signing beside the current one; null when no rotation kept one. */
  previous_secret_expires_at: Timestamp | null;
  /** Only in the answer to the creation or to a rotation; null in a replay of either (see `redacted`). Kept sealed at rest. */
  secret?: string | null;
  redacted?: SecretRedacted;
};

export type WebhookEndpointCreate = {
  /** `http` or `https`, no user name or password; with `--webhook-deny-private` every address of its host must be global unicast (not private, loopback, reserved or the server's own). Redirects are never followed. */
  url: string;
  /** `["*"]` for every type, or distinct event types. */
  events: Array<EventType | "*">;
  description?: string | null;
};

export type WebhookEndpointUpdate = {
  /** `http` or `https`, no user name or password; with `--webhook-deny-private` every address of its host must be global unicast (not private, loopback, reserved or the server's own). Redirects are never followed. */
  url?: string | null;
  /** `["*"]` for every type, or distinct event types. */
  events?: Array<EventType | "*"> | null;
  disabled?: boolean | null;
};

export type WebhookSecretRotation = {
  /** Seconds the previous secret keeps signing beside the new one; default 86400 (a day), at most 604800 (a week); 0 stops it at once. */
  expire_previous_in?: number | null;
};

export type WebhookEndpointDeleted = {
  id: WebhookEndpointId;
  object: "webhook_endpoint";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  deleted: true;
};

export type WebhookEndpointList = List & {
  data?: WebhookEndpoint[];
};

/** One delivery attempt. `created_at` is when it finished; `next_attempt_at` is when the next one is due (null once delivered or given up). */
export type WebhookAttempt = {
  id: WebhookAttemptId;
  object: "webhook_attempt";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  webhook_endpoint_id: WebhookEndpointId;
  event_id: EventId;
  attempt: number;
  /** null when there was no answer */
  response_status: number | null;
  latency_ms: number;
  /** What went wrong, in payd's words (never the transport's text); null for a 2xx read whole. A 2xx whose body or headers were cut at their cap is delivered and keeps body_too_large or headers_too_large. */
  error: "timeout" | "dns_failure" | "connection_refused" | "address_not_allowed" | "tls_error" | "connection_error" | "bad_status" | "body_too_large" | "headers_too_large" | null;
  outcome: "delivered" | "retrying" | "failed";
  next_attempt_at: Timestamp | null;
  created_at: Timestamp;
};

export type WebhookAttemptList = List & {
  data?: WebhookAttempt[];
};

/** Only in a replay of the create (the same Idempotency-Key): the secret named by `member` was shown in the first answer only, and is null here. */
export type SecretRedacted = {
  member: "secret" | "api_key";
  code: "secret_shown_once";
  /** How to get a new secret (rotate it). */
  detail: string;
};

export type EventRedeliver = {
  /** Only this endpoint (sent even when it does not subscribe to the event's type). Left out: every enabled endpoint of yours that wants the type, at most `--max-webhook-fanout`. */
  endpoint_id?: WebhookEndpointId | null;
};

export type Redelivery = {
  object: "redelivery";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  event_id: EventId;
  /** The endpoints the event was queued for, due now; empty when no enabled endpoint wants it. */
  endpoint_ids: WebhookEndpointId[];
};

export type WebhookRecover = {
  /** RFC 3339, not in the future: deliveries that ended `failed` at or after this time are queued again. */
  since: string;
};

export type WebhookRecovery = {
  object: "webhook_recovery";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  webhook_endpoint_id: WebhookEndpointId;
  since: Timestamp;
  /** Failed deliveries made pending again, due now. */
  queued: number;
  /** Deliveries still retrying whose next attempt was moved to now. */
  brought_forward: number;
};

/** Balance transaction id: `txn_` and 13 lowercase Crockford base32 characters encoding a Snowflake id (ids sort by creation time). */
export type BalanceTransactionId = string;

/** Journal entry id: `je_` and 13 lowercase Crockford base32 characters. The lines of one entry (a transfer's two, for instance) share it. */
export type JournalEntryId = string;

export type Balance = {
  object: "balance";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  /** What the account holds; equals the account's `balance`. */
  available: number;
  /** Authorized and not yet captured. */
  pending: number;
  currency: Currency;
};

/** One line of a journal entry on one of the caller's accounts (docs/ledger.md). */
export type BalanceTransaction = {
  id: BalanceTransactionId;
  object: "balance_transaction";
  /** true for an object of live mode, false for test mode (docs/api.md §19) */
  livemode: boolean;
  account_id: AccountId;
  /** Signed minor units: positive raises the account. */
  amount: number;
  currency: Currency;
  type: "charge" | "authorization" | "capture" | "release" | "refund" | "transfer";
  /** The payment, refund or transfer that moved the money. */
  source: string;
  entry_id: JournalEntryId;
  created_at: Timestamp;
};

export type BalanceTransactionList = List & {
  data?: BalanceTransaction[];
};

export type PaymentCapture = {
  /** Default: all that is capturable. */
  amount_to_capture?: Amount | null;
  /** Default true: the rest of the hold is released. false keeps it capturable for a later capture (at most 50). */
  final_capture?: boolean | null;
};

export type PaymentCancel = {
  cancellation_reason?: "requested_by_customer" | "abandoned" | "fraudulent" | "duplicate" | null;
};
