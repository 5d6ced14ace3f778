// One logical call: the retry loop of docs/client.md around single HTTP exchanges.
//
// What is retried: no answer at all (connection refused or dropped, timeout), 5xx, 429 and
// 409 request_in_progress; every other 4xx is final. How long to wait: backoff.js. When to stop:
// after maxRetries retries, when the next attempt would start after the deadline, or when the
// server asks (Retry-After) for more than maxDelayMs. Every attempt of a POST carries the same
// Idempotency-Key, so a retry can never charge twice.

import { randomBytes, randomUUID } from 'node:crypto';
import { isRetryable, nextDelayMs, parseRetryAfter } from './backoff.js';
import { errorFromAnswer } from './errors.js';

export const VERSION = '0.1.0';

export const DEFAULTS = Object.freeze({
  baseUrl: 'http://127.0.0.1:8080',
  maxRetries: 4,
  baseDelayMs: 1000,
  maxDelayMs: 30000,
  timeoutMs: 30000, // one attempt
  deadlineMs: 120000, // the whole logical call, all attempts and waits; 0: none
});

/** An Idempotency-Key is 1-255 visible ASCII characters (docs/api.md §2). */
export function validIdempotencyKey(key) {
  return typeof key === 'string' && /^[\x21-\x7e]{1,255}$/.test(key);
}

const defaultHooks = {
  monotonicMs: () => performance.now(),
  wallClockMs: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  random: () => randomBytes(6).readUIntBE(0, 6) / 2 ** 48, // uniform in [0, 1)
  fetch: (...args) => globalThis.fetch(...args),
};

// fetch reports every network failure as "fetch failed"; the reason is in its cause.
const describe = (error) => error?.cause?.code ?? error?.cause?.message ?? error?.message ?? 'unknown error';

export class HttpClient {
  constructor(options = {}) {
    if (!options.apiKey) throw new TypeError('apiKey is required');
    this.apiKey = options.apiKey;
    this.baseUrl = String(options.baseUrl ?? DEFAULTS.baseUrl).replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.baseUrl)) throw new TypeError('baseUrl must be http:// or https://');
    this.policy = {};
    for (const name of ['maxRetries', 'baseDelayMs', 'maxDelayMs', 'timeoutMs', 'deadlineMs']) {
      const value = options[name] ?? DEFAULTS[name];
      if (!Number.isFinite(value) || value < 0) throw new TypeError(`${name} must be a number >= 0`);
      this.policy[name] = value;
    }
    this.hooks = { ...defaultHooks, ...(options.hooks ?? {}) };
    this.onAttempt = options.onAttempt ?? null;
    this.userAgent = `payd-node/${VERSION}`;
  }

  url(path, query) {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query ?? {}))
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    return url.toString();
  }

  /**
   * Sends one logical request with the retry policy. Resolves to {status, headers, body,
   * attempts, idempotencyKey, requestId, replayed} for an answer below 400; rejects with a
   * PaydError otherwise.
   */
  async request({ method, path, query, body, idempotencyKey, ifMatch, headers: extra }) {
    method = method.toUpperCase();
    if (typeof path !== 'string' || !path.startsWith('/'))
      throw new TypeError("a request needs a path starting '/'");
    const isPost = method === 'POST';
    // A key given as a raw header is the caller's key too: taken, never replaced.
    const extraHeaders = { ...(extra ?? {}) };
    for (const name of Object.keys(extraHeaders))
      if (name.toLowerCase() === 'idempotency-key') {
        idempotencyKey ??= extraHeaders[name];
        delete extraHeaders[name];
      }
    // One key per logical call, chosen before the first attempt and sent with every retry; the
    // caller's own key is used as given, never replaced.
    let key = null;
    if (isPost) {
      if (idempotencyKey != null && !validIdempotencyKey(idempotencyKey))
        throw new TypeError('an Idempotency-Key is 1-255 visible ASCII characters');
      key = idempotencyKey ?? randomUUID();
    }
    const headers = {
      Accept: 'application/json',
      Authorization: `Bearer ${this.apiKey}`,
      'User-Agent': this.userAgent,
      ...extraHeaders,
    };
    if (key) headers['Idempotency-Key'] = key;
    if (ifMatch) headers['If-Match'] = ifMatch;
    let payload;
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
    const url = this.url(path, query);
    const { hooks, policy } = this;
    const started = hooks.monotonicMs();
    const deadline = policy.deadlineMs > 0 ? started + policy.deadlineMs : Infinity;

    for (let attempt = 1; ; attempt++) {
      const attemptStart = hooks.monotonicMs();
      const timeoutMs = Math.max(1, Math.min(policy.timeoutMs || Infinity, deadline - attemptStart));
      const answer = await this.attempt(url, { method, headers, body: payload }, timeoutMs);
      const now = hooks.monotonicMs();
      const code = answer.problem && typeof answer.problem.code === 'string' ? answer.problem.code : null;
      const succeeded = answer.status !== 0 && answer.status < 400;
      const retryable = !succeeded && isRetryable(answer.status, code);
      const retryAfterMs = parseRetryAfter(answer.headers?.get('retry-after'), hooks.wallClockMs());

      let giveUp = null;
      let delayMs = 0;
      if (retryable) {
        if (answer.timedOut && now >= deadline) giveUp = 'deadline'; // the deadline cut it short
        else if (attempt > policy.maxRetries) giveUp = 'max_retries';
        else {
          delayMs = nextDelayMs(attempt, policy, hooks.random(), retryAfterMs);
          if (delayMs === null) giveUp = 'retry_after';
          else if (delayMs >= deadline - now) giveUp = 'deadline'; // no use sleeping to fail
        }
      }
      const retrying = retryable && !giveUp;
      this.onAttempt?.({
        method, path, attempt, status: answer.status, code, error: answer.error ? describe(answer.error) : null,
        retryAfterMs, elapsedMs: now - attemptStart, retrying, delayMs: retrying ? delayMs : 0,
        giveUp, idempotencyKey: key,
      });
      if (retrying) {
        await hooks.sleep(delayMs);
        continue;
      }

      const requestId = answer.headers?.get('x-request-id') ?? null;
      if (succeeded)
        return {
          status: answer.status, headers: answer.headers, body: answer.json, attempts: attempt,
          idempotencyKey: key, requestId, replayed: answer.headers.get('idempotent-replayed') === 'true',
        };
      throw errorFromAnswer({
        status: answer.status,
        problem: answer.problem,
        requestId,
        message: answer.status === 0 ? `no answer from ${this.baseUrl}: ${describe(answer.error)}` : undefined,
        idempotencyKey: key,
        attempts: attempt,
        retryable,
        giveUp,
        cause: answer.error,
      });
    }
  }

  /** One HTTP exchange. Never throws: no answer is {status: 0, error}. */
  async attempt(url, init, timeoutMs) {
    const controller = new AbortController();
    let timedOut = false;
    // No timer at all when neither timeoutMs nor a deadline limits the attempt (setTimeout
    // would read Infinity as 1 ms).
    const timer = Number.isFinite(timeoutMs)
      ? setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, Math.min(timeoutMs, 2 ** 31 - 1))
      : null;
    try {
      const response = await this.hooks.fetch(url, { ...init, redirect: 'manual', signal: controller.signal });
      const text = await response.text(); // an answer cut mid-body is no answer either
      let json = null;
      if (text) {
        try {
          json = JSON.parse(text);
        } catch {
          json = null;
        }
      }
      const problem = response.status >= 400 ? json : null;
      return { status: response.status, headers: response.headers, json: json ?? (text || null), problem };
    } catch (error) {
      return { status: 0, headers: null, error: timedOut ? new Error(`timed out after ${Math.round(timeoutMs)} ms`) : error, timedOut };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }
}
