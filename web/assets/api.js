// Talking to payd: the API key from the tab's session storage, problem+json errors as values
// with their `code` and `detail`, and 429s waited out as the server's Retry-After asks (the
// page says so while it waits). Same-origin only: the page may talk to nothing else.

const KEY_NAME = 'payd.apiKey';
// The key of the other mode (docs/modes.md), kept so that switching back needs no key again.
const OTHER_KEY_NAME = 'payd.otherModeKey';
// Past this many waits in a row the 429 is shown as an error instead of waited out again.
const MAX_RATE_LIMIT_WAITS = 20;

export const session = {
  get key() { return sessionStorage.getItem(KEY_NAME); },
  set key(value) { sessionStorage.setItem(KEY_NAME, value); },
  get otherKey() { return sessionStorage.getItem(OTHER_KEY_NAME); },
  set otherKey(value) {
    if (value) sessionStorage.setItem(OTHER_KEY_NAME, value);
    else sessionStorage.removeItem(OTHER_KEY_NAME);
  },
  clear() { sessionStorage.removeItem(KEY_NAME); sessionStorage.removeItem(OTHER_KEY_NAME); },
};

// An answer with a problem+json body (or at least a status).
export class ApiError extends Error {
  constructor(status, problem, headers) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || `HTTP ${status}`);
    this.status = status;
    this.problem = p;
    this.code = p.code || `http_${status}`;
    this.headers = headers;
  }
}

// No answer at all: the request may or may not have reached the server.
export class NetworkError extends Error {}

// ---- rate-limit waits, reported to whoever shows them ----

const waitListeners = new Set();
const waits = new Map(); // id -> {until, code}
let nextWaitId = 1;

export function onRateLimitWaits(listener) {
  waitListeners.add(listener);
}

function reportWaits() {
  const list = [...waits.values()];
  for (const listener of waitListeners) listener(list);
}

// Retry-After: delta-seconds or an HTTP-date (RFC 9110 §10.2.3); at least one second.
export function retryAfterMs(value, now = Date.now()) {
  if (value && /^\d+$/.test(value.trim())) return Math.max(1, Number(value)) * 1000;
  const date = value ? Date.parse(value) : NaN;
  return Number.isNaN(date) ? 1000 : Math.max(1000, date - now);
}

async function waitOut(ms, code) {
  const id = nextWaitId++;
  waits.set(id, { until: Date.now() + ms, code });
  reportWaits();
  try {
    await new Promise((resolve) => setTimeout(resolve, ms));
  } finally {
    waits.delete(id);
    reportWaits();
  }
}

// ---- 401: the key is gone or revoked ----

let onUnauthorized = () => {};
export function setUnauthorizedHandler(handler) {
  onUnauthorized = handler;
}

function withQuery(path, query) {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== '') params.set(name, value);
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

// api('GET', '/v1/accounts', {query: {limit: 100}}) -> {status, data, headers}
// A POST that carries an Idempotency-Key is resent with the same key after a 429, so the
// wait can never turn one payment into two.
export async function api(method, path, { query, body, idempotencyKey, key } = {}) {
  const headers = { Accept: 'application/json', Authorization: `Bearer ${key ?? session.key ?? ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
  const url = withQuery(path, query);
  for (let waited = 0; ; waited++) {
    let resp, text;
    try {
      resp = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
        credentials: 'same-origin',
        redirect: 'error',
      });
      text = await resp.text();
    } catch (e) {
      throw new NetworkError(`the request did not complete (${e.message})`);
    }
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch {
        data = null;
      }
    }
    if (resp.status === 429 && waited < MAX_RATE_LIMIT_WAITS) {
      await waitOut(retryAfterMs(resp.headers.get('Retry-After')), data?.code || 'rate_limited');
      continue;
    }
    if (!resp.ok) {
      const err = new ApiError(resp.status, data, resp.headers);
      if (resp.status === 401 && key === undefined) onUnauthorized(err);
      throw err;
    }
    return { status: resp.status, data, headers: resp.headers };
  }
}

// Every item of a list, following next_cursor (§4); for the short lists (accounts, refunds).
export async function listAll(path, query = {}) {
  const items = [];
  let cursor = null;
  do {
    const { data } = await api('GET', path, { query: { ...query, limit: 100, cursor } });
    items.push(...data.data);
    cursor = data.has_more ? data.next_cursor : null;
  } while (cursor);
  return items;
}
