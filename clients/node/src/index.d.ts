// Declarations of the payd Node client. The API's shapes come from types.gen.d.ts, generated
// from docs/openapi.json by scripts/gen-types.mjs.

import type {
  Account, AccountCreate, Balance, BalanceTransaction, Event, EventType, Order, OrderCreate, Payment,
  PaymentCancel, PaymentCapture, PaymentCreate, Problem, Refund, RefundCreate, WebhookAttempt,
  WebhookEndpoint, WebhookEndpointCreate,
  WebhookEndpointDeleted, WebhookEndpointUpdate, WebhookSecretRotation,
} from './types.gen.js';

export type * from './types.gen.js';

export interface AttemptReport {
  method: string;
  path: string;
  attempt: number;
  /** 0: no answer. */
  status: number;
  code: string | null;
  error: string | null;
  retryAfterMs: number | null;
  elapsedMs: number;
  retrying: boolean;
  delayMs: number;
  giveUp: GiveUp | null;
  idempotencyKey: string | null;
}

export type GiveUp = 'max_retries' | 'deadline' | 'retry_after';

export interface TimeHooks {
  monotonicMs?: () => number;
  wallClockMs?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** Uniform in [0, 1). */
  random?: () => number;
  fetch?: typeof fetch;
}

export interface PaydOptions {
  apiKey: string;
  /** Default `http://127.0.0.1:8080`. */
  baseUrl?: string;
  /** Retries after the first attempt; 0 never retries. Default 4. */
  maxRetries?: number;
  /** Nominal wait before retry 1, doubled for each next one. Default 1000. */
  baseDelayMs?: number;
  /** Cap on the nominal wait; a longer Retry-After means give up. Default 30000. */
  maxDelayMs?: number;
  /** One HTTP attempt; 0: none (the deadline still applies). Default 30000. */
  timeoutMs?: number;
  /** The whole logical call, all attempts and waits; 0: none. Default 120000. */
  deadlineMs?: number;
  /** Called after every attempt (logging, metrics). */
  onAttempt?: (report: AttemptReport) => void;
  /** Clock, sleep, randomness and fetch, for tests. */
  hooks?: TimeHooks;
}

export interface RequestOptions {
  method: string;
  /** Starts with '/': `/v1/payments`. */
  path: string;
  query?: Record<string, string | number | boolean | null | undefined>;
  body?: unknown;
  /** POST only; without one, a UUIDv4 is made for this call and sent on every attempt. */
  idempotencyKey?: string;
  ifMatch?: string;
  headers?: Record<string, string>;
}

export interface Response<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
  attempts: number;
  idempotencyKey: string | null;
  requestId: string | null;
  /** The server replayed a stored answer (`Idempotent-Replayed: true`). */
  replayed: boolean;
}

export interface CreateOptions {
  /** Your own key for this operation (1-255 visible ASCII characters). */
  idempotencyKey?: string;
}

export interface ListParams {
  /** Page size, 1-100 (default 20). */
  limit?: number;
  /** Where to start: a `next_cursor` from an earlier page. */
  cursor?: string;
}

export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
  prev_cursor: string | null;
}

/** Every item of a list, fetched page by page: `for await (const item of list)`. */
export declare class ListIterator<T> implements AsyncIterable<T> {
  /** Pages fetched so far by the iterator. */
  readonly pages: number;
  /** One page only (the first, or the one at `cursor`). */
  page(cursor?: string): Promise<Page<T>>;
  toArray(): Promise<T[]>;
  [Symbol.asyncIterator](): AsyncIterator<T>;
}

export interface PaymentListParams extends ListParams {
  account: string;
  status?: Payment['status'];
  created_gte?: string;
  created_lt?: string;
}

export interface EventListParams extends ListParams {
  type?: EventType;
  created_gte?: string;
  created_lt?: string;
}

export interface BalanceTransactionListParams extends ListParams {
  /** One of the caller's accounts (another user's: 404). */
  account_id?: string;
  type?: BalanceTransaction['type'];
  /** The payment, refund or transfer that caused the lines: `pay_…`, `re_…` or `tr_…`. */
  source?: string;
  created_gte?: string;
  created_lt?: string;
}

export declare class Payd {
  constructor(options: PaydOptions);
  readonly accounts: {
    create(params: AccountCreate, options?: CreateOptions): Promise<Account>;
    retrieve(id: string): Promise<Account>;
    list(params?: ListParams): ListIterator<Account>;
    /** The account's available and pending books (docs/api.md §18). */
    balance(id: string): Promise<Balance>;
  };
  readonly payments: {
    create(params: PaymentCreate, options?: CreateOptions): Promise<Payment>;
    retrieve(id: string): Promise<Payment>;
    capture(id: string, params?: PaymentCapture, options?: CreateOptions): Promise<Payment>;
    cancel(id: string, params?: PaymentCancel, options?: CreateOptions): Promise<Payment>;
    list(params: PaymentListParams): ListIterator<Payment>;
    count(params: Omit<PaymentListParams, 'limit' | 'cursor'>): Promise<number>;
  };
  readonly refunds: {
    create(params: RefundCreate & { payment: string }, options?: CreateOptions): Promise<Refund>;
    list(params: ListParams & { payment: string }): ListIterator<Refund>;
  };
  readonly orders: {
    create(params: OrderCreate, options?: CreateOptions): Promise<Order>;
    retrieve(id: string): Promise<Order>;
    list(params?: ListParams & { status?: Order['status'] }): ListIterator<Order>;
  };
  readonly balanceTransactions: {
    retrieve(id: string): Promise<BalanceTransaction>;
    /** The same as retrieve. */
    get(id: string): Promise<BalanceTransaction>;
    list(params?: BalanceTransactionListParams): ListIterator<BalanceTransaction>;
  };
  readonly events: {
    retrieve(id: string): Promise<Event>;
    list(params?: EventListParams): ListIterator<Event>;
  };
  readonly webhookEndpoints: {
    /** The answer's `secret` is shown only here. */
    create(params: WebhookEndpointCreate, options?: CreateOptions): Promise<WebhookEndpoint & { secret: string | null }>;
    retrieve(id: string): Promise<WebhookEndpoint>;
    list(params?: ListParams): ListIterator<WebhookEndpoint>;
    update(id: string, params: WebhookEndpointUpdate): Promise<WebhookEndpoint>;
    del(id: string): Promise<WebhookEndpointDeleted>;
    /** A new secret, shown only here; the previous one keeps signing until it expires. */
    rotateSecret(id: string, params?: WebhookSecretRotation, options?: CreateOptions): Promise<WebhookEndpoint & { secret: string | null }>;
    deliveries(id: string, params?: ListParams): ListIterator<WebhookAttempt>;
  };
  /** Any request, with the same retries. */
  request<T = unknown>(options: RequestOptions): Promise<Response<T>>;
}
export default Payd;

export interface PaydErrorFields {
  status?: number;
  code?: string | null;
  param?: string | null;
  requestId?: string | null;
  problem?: unknown;
  idempotencyKey?: string | null;
  attempts?: number;
  retryable?: boolean;
  giveUp?: GiveUp | null;
  cause?: unknown;
}

/** Every failure of a call. Branch on `code`, never on `message`. */
export declare class PaydError extends Error {
  constructor(message: string, fields?: PaydErrorFields);
  /** HTTP status of the last answer; 0 when there was no answer at all. */
  readonly status: number;
  readonly code: Problem['code'] | (string & {}) | null;
  readonly param: string | null;
  readonly requestId: string | null;
  /** The whole problem body (RFC 9457), with its extras (`decline_code`, `payment`, …). */
  readonly problem: (Problem & Record<string, unknown>) | null;
  /** The key every attempt of a POST sent: repeat the operation with it, never with a new one. */
  readonly idempotencyKey: string | null;
  readonly attempts: number;
  /** The failure is of a kind that is retried, so the client gave up on it: the outcome may be unknown. */
  readonly retryable: boolean;
  readonly giveUp: GiveUp | null;
}
export declare class PaydConnectionError extends PaydError {}
export declare class InvalidRequestError extends PaydError {}
export declare class AuthenticationError extends PaydError {}
export declare class CardError extends PaydError {}
export declare class NotFoundError extends PaydError {}
export declare class ConflictError extends PaydError {}
export declare class RateLimitError extends PaydError {}
export declare class ServerError extends PaydError {}
export declare function errorClassFor(status: number): typeof PaydError;

export declare class WebhookVerificationError extends Error {}

export type WebhookHeaders =
  | Headers
  | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** `whsec_<base64>` (the prefix is optional). */
  secret: string;
  headers: WebhookHeaders;
  /** The raw body exactly as received: never JSON parsed and serialized again. */
  payload: string | Uint8Array;
  /** Default 300. */
  toleranceSeconds?: number;
  /** Unix seconds or a Date; default now. */
  now?: number | Date;
}

/** Verifies a delivery (Standard Webhooks, else Payd-Signature) and returns its event. */
export declare function verifyWebhook<T = Event>(options: VerifyWebhookOptions): T;
export declare function signWebhook(options: {
  secret: string; id: string; timestamp: number | string; payload: string | Uint8Array;
}): string;
export declare function signPaydSignature(options: {
  secret: string; timestamp: number | string; payload: string | Uint8Array;
}): string;
export declare function secretKey(secret: string): Buffer;
export declare const DEFAULT_TOLERANCE_SECONDS: number;

export declare const VERSION: string;
export declare const DEFAULTS: Readonly<Required<Pick<PaydOptions,
  'baseUrl' | 'maxRetries' | 'baseDelayMs' | 'maxDelayMs' | 'timeoutMs' | 'deadlineMs'>>>;
export declare const JITTER: number;
export declare function validIdempotencyKey(key: unknown): boolean;
export declare function isRetryable(status: number, code: string | null): boolean;
export declare function nominalDelayMs(retry: number, policy: { baseDelayMs: number; maxDelayMs: number }): number;
export declare function nextDelayMs(
  retry: number, policy: { baseDelayMs: number; maxDelayMs: number }, u: number, retryAfterMs?: number | null,
): number | null;
export declare function parseHttpDate(text: string): number | null;
export declare function parseRetryAfter(value: string | null | undefined, nowMs?: number): number | null;
export declare class HttpClient {
  constructor(options: PaydOptions);
  request<T = unknown>(options: RequestOptions): Promise<Response<T>>;
}
