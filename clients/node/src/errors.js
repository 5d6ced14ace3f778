// Typed errors. Every failure of a call is a PaydError carrying the last answer's problem
// (RFC 9457) and what the retry loop did; subclasses only make `instanceof` branches easy.
// Branch on `code`, never on `message`: the detail text may change.

export class PaydError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.name;
    /** HTTP status of the last answer; 0 when there was no answer at all. */
    this.status = fields.status ?? 0;
    /** The problem's stable machine-readable code (`card_declined`, …), or null. */
    this.code = fields.code ?? null;
    /** The request field the problem is about, or null. */
    this.param = fields.param ?? null;
    /** The server's request id (`X-Request-Id` / the problem's `request_id`), or null. */
    this.requestId = fields.requestId ?? null;
    /** The whole problem body as parsed JSON, or null (no answer, or not JSON). */
    this.problem = fields.problem ?? null;
    /** The Idempotency-Key every attempt of a POST sent: resume with it, never with a new one. */
    this.idempotencyKey = fields.idempotencyKey ?? null;
    /** How many HTTP attempts were made. */
    this.attempts = fields.attempts ?? 0;
    /** True when the failure is of a kind that is retried, so the client gave up on it. */
    this.retryable = fields.retryable ?? false;
    /** Why the client stopped retrying: 'max_retries', 'deadline', 'retry_after', or null. */
    this.giveUp = fields.giveUp ?? null;
    if (fields.cause) this.cause = fields.cause;
  }
}

/** No answer: connection refused or dropped, or the attempt timed out (status 0). */
export class PaydConnectionError extends PaydError {}
/** 400, 405, 413, 414, 415, 422, 431: the request itself is wrong. */
export class InvalidRequestError extends PaydError {}
/** 401: missing or unknown API key. */
export class AuthenticationError extends PaydError {}
/** 402: the processor declined the card; `problem.payment` is the failed payment. */
export class CardError extends PaydError {}
/** 404. */
export class NotFoundError extends PaydError {}
/** 409 and 412: the state of a resource refuses the request. */
export class ConflictError extends PaydError {}
/** 429: rate limited (after the retries ran out). */
export class RateLimitError extends PaydError {}
/** 5xx (after the retries ran out). */
export class ServerError extends PaydError {}

/** The error class for an answer's status. */
export function errorClassFor(status) {
  if (status === 0) return PaydConnectionError;
  if (status === 401) return AuthenticationError;
  if (status === 402) return CardError;
  if (status === 404) return NotFoundError;
  if (status === 409 || status === 412) return ConflictError;
  if (status === 429) return RateLimitError;
  if (status >= 500) return ServerError;
  return InvalidRequestError;
}

/** The problem body of an error answer as a typed error. */
export function errorFromAnswer({ status, problem, requestId, message, ...rest }) {
  const body = problem && typeof problem === 'object' && !Array.isArray(problem) ? problem : null;
  const text =
    message ??
    (status
      ? `${status} ${body?.code ?? ''}: ${body?.detail ?? body?.title ?? 'error'}`.replace(' :', ':')
      : 'no answer');
  const ErrorClass = errorClassFor(status);
  return new ErrorClass(text, {
    status,
    code: typeof body?.code === 'string' ? body.code : null,
    param: typeof body?.param === 'string' ? body.param : null,
    requestId: (typeof body?.request_id === 'string' ? body.request_id : null) ?? requestId ?? null,
    problem: body ?? problem ?? null,
    ...rest,
  });
}
