// The payd client for Node 18+: no runtime dependency (the global fetch and node:crypto).
// Retries as docs/client.md says, typed errors, lists as async iterators, webhook verification.

import { HttpClient } from './http.js';
import { Accounts, BalanceTransactions, Events, Orders, Payments, Refunds, WebhookEndpoints } from './resources.js';

export class Payd {
  /**
   * @param {object} options apiKey (required), baseUrl, maxRetries (4), baseDelayMs (1000),
   *   maxDelayMs (30000), timeoutMs (one attempt, 30000), deadlineMs (the whole call, 120000;
   *   0: none), onAttempt (called after every attempt).
   */
  constructor(options) {
    this.http = new HttpClient(options);
    this.accounts = new Accounts(this.http);
    this.payments = new Payments(this.http);
    this.refunds = new Refunds(this.http);
    this.orders = new Orders(this.http);
    this.balanceTransactions = new BalanceTransactions(this.http);
    this.events = new Events(this.http);
    this.webhookEndpoints = new WebhookEndpoints(this.http);
  }

  /** Any request, with the same retries: resolves to {status, headers, body, attempts, …}. */
  request(options) {
    return this.http.request(options);
  }
}

export default Payd;
export { HttpClient, DEFAULTS, VERSION, validIdempotencyKey } from './http.js';
export { ListIterator } from './list.js';
export { isRetryable, nextDelayMs, nominalDelayMs, parseHttpDate, parseRetryAfter, JITTER } from './backoff.js';
export {
  PaydError, PaydConnectionError, InvalidRequestError, AuthenticationError, CardError,
  NotFoundError, ConflictError, RateLimitError, ServerError, errorClassFor,
} from './errors.js';
export {
  verifyWebhook, signWebhook, signPaydSignature, secretKey, WebhookVerificationError,
  DEFAULT_TOLERANCE_SECONDS,
} from './webhooks.js';
