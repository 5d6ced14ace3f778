// The API's resources as methods: each builds a path and a body and makes one logical call
// (http.js). Creates take `{idempotencyKey}` in their options; without one the client makes a
// UUIDv4 that every retry of that call reuses.

import { ListIterator } from './list.js';

const seg = (value) => {
  if (typeof value !== 'string' || value === '') throw new TypeError('an id must be a non-empty string');
  return encodeURIComponent(value);
};

class Resource {
  constructor(http) {
    this.http = http;
  }
  async call(method, path, { body, query, idempotencyKey, ifMatch } = {}) {
    return (await this.http.request({ method, path, body, query, idempotencyKey, ifMatch })).body;
  }
  list(path, params = {}) {
    return new ListIterator(this.http, path, params);
  }
}

export class Accounts extends Resource {
  create(params, { idempotencyKey } = {}) {
    return this.call('POST', '/v1/accounts', { body: params, idempotencyKey });
  }
  retrieve(id) {
    return this.call('GET', `/v1/accounts/${seg(id)}`);
  }
  list(params = {}) {
    return super.list('/v1/accounts', params);
  }
  /** The account's books (docs/api.md §18): `{object: 'balance', available, pending, currency}`. */
  balance(id) {
    return this.call('GET', `/v1/accounts/${seg(id)}/balance`);
  }
}

export class Payments extends Resource {
  create(params, { idempotencyKey } = {}) {
    return this.call('POST', '/v1/payments', { body: params, idempotencyKey });
  }
  retrieve(id) {
    return this.call('GET', `/v1/payments/${seg(id)}`);
  }
  /** A manual payment's hold (§17): `capture(id, {amount_to_capture?, final_capture?})`. */
  capture(id, params = {}, { idempotencyKey } = {}) {
    return this.call('POST', `/v1/payments/${seg(id)}/capture`, { body: params, idempotencyKey });
  }
  /** Releases what is left of a manual payment's hold: `cancel(id, {cancellation_reason?})`. */
  cancel(id, params = {}, { idempotencyKey } = {}) {
    return this.call('POST', `/v1/payments/${seg(id)}/cancel`, { body: params, idempotencyKey });
  }
  /** The payments of one account: `list({account: 'acct_…', limit, status, created_gte, created_lt})`. */
  list({ account, ...params }) {
    return super.list(`/v1/accounts/${seg(account)}/payments`, params);
  }
  async count({ account, ...params }) {
    return (await this.call('GET', `/v1/accounts/${seg(account)}/payments/count`, { query: params })).count;
  }
}

export class Refunds extends Resource {
  /** `create({payment: 'pay_…', amount?, reason?})`. */
  create({ payment, ...params }, { idempotencyKey } = {}) {
    return this.call('POST', `/v1/payments/${seg(payment)}/refunds`, { body: params, idempotencyKey });
  }
  list({ payment, ...params }) {
    return super.list(`/v1/payments/${seg(payment)}/refunds`, params);
  }
}

export class Orders extends Resource {
  create(params, { idempotencyKey } = {}) {
    return this.call('POST', '/v1/orders', { body: params, idempotencyKey });
  }
  retrieve(id) {
    return this.call('GET', `/v1/orders/${seg(id)}`);
  }
  list(params = {}) {
    return super.list('/v1/orders', params);
  }
}

export class BalanceTransactions extends Resource {
  /** One ledger line on one of the caller's accounts (`txn_…`). */
  retrieve(id) {
    return this.call('GET', `/v1/balance_transactions/${seg(id)}`);
  }
  /** The same as retrieve: the C client's and payctl's name for it. */
  get(id) {
    return this.retrieve(id);
  }
  /** `list({account_id?, type?, source?, created_gte?, created_lt?, limit?})`, newest first. */
  list(params = {}) {
    return super.list('/v1/balance_transactions', params);
  }
}

export class Events extends Resource {
  retrieve(id) {
    return this.call('GET', `/v1/events/${seg(id)}`);
  }
  /** `list({type?, created_gte?, created_lt?, limit?})`. */
  list(params = {}) {
    return super.list('/v1/events', params);
  }
}

export class WebhookEndpoints extends Resource {
  /** `create({url, events: ['*'], description?})`: the answer's `secret` is shown only here. */
  create(params, { idempotencyKey } = {}) {
    return this.call('POST', '/v1/webhook_endpoints', { body: params, idempotencyKey });
  }
  retrieve(id) {
    return this.call('GET', `/v1/webhook_endpoints/${seg(id)}`);
  }
  list(params = {}) {
    return super.list('/v1/webhook_endpoints', params);
  }
  /** `update(id, {url?, events?, disabled?})`. */
  update(id, params) {
    return this.call('PATCH', `/v1/webhook_endpoints/${seg(id)}`, { body: params });
  }
  del(id) {
    return this.call('DELETE', `/v1/webhook_endpoints/${seg(id)}`);
  }
  /**
   * A new secret (in the answer only); the one it replaces keeps signing beside it for
   * `expire_previous_in` seconds (default a day), so receivers can move over without a gap.
   */
  rotateSecret(id, params = {}, { idempotencyKey } = {}) {
    return this.call('POST', `/v1/webhook_endpoints/${seg(id)}/rotate_secret`, { body: params, idempotencyKey });
  }
  /** The delivery attempts of one endpoint, newest first. */
  deliveries(id, params = {}) {
    return super.list(`/v1/webhook_endpoints/${seg(id)}/deliveries`, params);
  }
}
