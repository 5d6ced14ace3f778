// Unit tests: the delay policy, Retry-After in both forms, the Idempotency-Key rules and the
// mapping of answers to typed errors, through a node:http server on loopback with fake time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  Payd, nominalDelayMs, nextDelayMs, parseRetryAfter, parseHttpDate, isRetryable,
  PaydError, CardError, ConflictError, InvalidRequestError, NotFoundError, PaydConnectionError,
  RateLimitError, ServerError, AuthenticationError, validIdempotencyKey,
} from '../src/index.js';

const policy = { baseDelayMs: 1000, maxDelayMs: 30000 };
const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('nominal delay doubles from the base and stops at the cap', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((n) => nominalDelayMs(n, policy)),
    [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  assert.equal(nominalDelayMs(200, policy), 30000);
});

test('jitter spreads each delay over ±30 % of its nominal value, after the cap', () => {
  for (let n = 1; n <= 8; n++) {
    const nominal = nominalDelayMs(n, policy);
    assert.equal(nextDelayMs(n, policy, 0), Math.round(nominal * 0.7));
    assert.equal(nextDelayMs(n, policy, 0.5), nominal);
    assert.ok(nextDelayMs(n, policy, 0.999999) <= Math.round(nominal * 1.3));
    assert.ok(nextDelayMs(n, policy, 0.999999) > Math.round(nominal * 1.29));
  }
  for (let i = 0; i < 1000; i++) {
    const delay = nextDelayMs(3, policy, Math.random());
    assert.ok(delay >= 2800 && delay <= 5200, `${delay}`);
  }
});

test('Retry-After is a floor, spread above it, and past maxDelay means give up', () => {
  assert.equal(nextDelayMs(1, policy, 0, 5000), 5000);
  assert.equal(nextDelayMs(1, policy, 0.5, 5000), 5750);
  assert.equal(nextDelayMs(5, policy, 0.5, 1000), 16000); // backoff already longer: it decides
  assert.equal(nextDelayMs(1, policy, 0.5, 30000), 34500);
  assert.equal(nextDelayMs(1, policy, 0.5, 30001), null);
  assert.equal(nextDelayMs(1, policy, 0.5, 0), 1000);
});

test('Retry-After: delta-seconds and the three HTTP-date forms', () => {
  const now = Date.UTC(1994, 10, 6, 8, 49, 30);
  assert.equal(parseRetryAfter('2', now), 2000);
  assert.equal(parseRetryAfter(' 0 ', now), 0);
  assert.equal(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', now), 7000);
  assert.equal(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', now), 7000);
  assert.equal(parseRetryAfter('Sun Nov  6 08:49:37 1994', now), 7000);
  assert.equal(parseRetryAfter('Sun, 06 Nov 1994 08:49:00 GMT', now), 0); // in the past
  assert.equal(parseRetryAfter('99999999', now), 86_400_000); // capped at a day
  for (const bad of [undefined, null, '', '-1', '1.5', 'soon', 'Sun, 31 Nov 1994 08:49:37 GMT',
    'Sun, 06 Nov 1994 25:49:37 GMT', 'Sun, 06 Foo 1994 08:49:37 GMT'])
    assert.equal(parseRetryAfter(bad, now), null, String(bad));
  assert.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT'), Date.UTC(1994, 10, 6, 8, 49, 37));
});

test('what is retried: no answer, 5xx, 429, 409 request_in_progress; no other 4xx', () => {
  for (const [status, code] of [[0, null], [500, 'internal_error'], [503, 'processor_unavailable'],
    [429, 'rate_limited'], [409, 'request_in_progress']])
    assert.ok(isRetryable(status, code), `${status} ${code}`);
  for (const [status, code] of [[400, 'invalid_parameter'], [401, 'unauthorized'], [402, 'card_declined'],
    [404, 'resource_missing'], [409, 'duplicate_payment'], [412, 'version_conflict'], [422, 'idempotency_key_reused']])
    assert.ok(!isRetryable(status, code), `${status} ${code}`);
});

test('Idempotency-Key validity: 1-255 visible ASCII characters', () => {
  assert.ok(validIdempotencyKey('a'));
  assert.ok(validIdempotencyKey('x'.repeat(255)));
  for (const bad of ['', 'x'.repeat(256), 'a b', 'a\r\nX-Evil: 1', 'é'])
    assert.ok(!validIdempotencyKey(bad), JSON.stringify(bad));
});

// A scripted server: answers[i] answers the i-th request; every request is recorded.
async function scripted(answers) {
  const requests = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      const answer = answers[requests.length - 1] ?? { status: 500, body: { code: 'script_ended' } };
      if (answer.drop) return req.socket.destroy();
      const type = answer.status >= 400 ? 'application/problem+json' : 'application/json';
      res.writeHead(answer.status, { 'Content-Type': type, ...(answer.headers ?? {}) });
      res.end(JSON.stringify(answer.body ?? {}));
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { requests, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

// A client whose sleeps only move a fake clock, so the policy runs without waiting.
function fakeTimeClient(url, options = {}) {
  const sleeps = [];
  let clock = 0;
  const client = new Payd({
    apiKey: 'sk_test', baseUrl: url, ...options,
    hooks: {
      monotonicMs: () => clock,
      sleep: async (ms) => { sleeps.push(ms); clock += ms; },
      random: () => 0.5,
      ...(options.hooks ?? {}),
    },
  });
  return { client, sleeps };
}

const payment = { account_id: 'acct_1', amount: 4200, currency: 'USD', source: 'tok_visa' };

test('503, 503, 201 is one call of three attempts under one generated UUIDv4 key', async () => {
  const server = await scripted([
    { status: 503, body: { code: 'processor_unavailable' } },
    { status: 503, body: { code: 'processor_unavailable' } },
    { status: 201, body: { id: 'pay_1', object: 'payment' } },
  ]);
  try {
    const { client, sleeps } = fakeTimeClient(server.url);
    const result = await client.request({ method: 'POST', path: '/v1/payments', body: payment });
    assert.equal(result.body.id, 'pay_1');
    assert.equal(result.attempts, 3);
    assert.deepEqual(sleeps, [1000, 2000]);
    const keys = server.requests.map((r) => r.headers['idempotency-key']);
    assert.match(keys[0], UUID4);
    assert.deepEqual(keys, [keys[0], keys[0], keys[0]]);
    assert.equal(result.idempotencyKey, keys[0]);
    assert.equal(server.requests[0].headers.authorization, 'Bearer sk_test');
    assert.deepEqual(JSON.parse(server.requests[2].body), payment);
  } finally {
    server.close();
  }
});

test("the caller's key is sent on every attempt and never replaced; each call gets its own", async () => {
  const server = await scripted([
    { drop: true },
    { status: 201, body: { id: 'pay_1' } },
    { status: 201, body: { id: 'pay_2' } },
    { status: 201, body: { id: 'pay_3' } },
    { status: 201, body: { id: 'pay_4' } },
  ]);
  try {
    const { client } = fakeTimeClient(server.url);
    await client.payments.create(payment, { idempotencyKey: 'order-77-payment' });
    await client.payments.create(payment);
    await client.payments.create(payment);
    const keys = server.requests.map((r) => r.headers['idempotency-key']);
    assert.deepEqual(keys.slice(0, 2), ['order-77-payment', 'order-77-payment']);
    assert.notEqual(keys[2], keys[3]);
    await assert.rejects(client.payments.create(payment, { idempotencyKey: 'bad key' }), TypeError);
    assert.equal(server.requests.length, 4); // nothing was sent for the bad key
    // A key given as a raw header is the caller's as well.
    await client.request({ method: 'POST', path: '/v1/payments', body: payment, headers: { 'idempotency-key': 'raw-1' } });
    assert.equal(server.requests[4].headers['idempotency-key'], 'raw-1');
  } finally {
    server.close();
  }
});

test('a GET carries no Idempotency-Key', async () => {
  const server = await scripted([{ status: 200, body: { id: 'pay_1' } }]);
  try {
    const { client } = fakeTimeClient(server.url);
    assert.equal((await client.payments.retrieve('pay_1')).id, 'pay_1');
    assert.equal(server.requests[0].headers['idempotency-key'], undefined);
    assert.equal(server.requests[0].url, '/v1/payments/pay_1');
  } finally {
    server.close();
  }
});

test('Retry-After is waited (seconds and HTTP-date); one past maxDelay gives up at once', async () => {
  const wall = Date.UTC(2026, 0, 1, 0, 0, 0);
  const server = await scripted([
    { status: 429, headers: { 'Retry-After': '3' }, body: { code: 'rate_limited' } },
    { status: 503, headers: { 'Retry-After': 'Thu, 01 Jan 2026 00:00:05 GMT' }, body: { code: 'overloaded' } },
    { status: 200, body: { id: 'acct_1' } },
    { status: 503, headers: { 'Retry-After': '60' }, body: { code: 'overloaded', request_id: 'req_9' } },
  ]);
  try {
    const { client, sleeps } = fakeTimeClient(server.url, { hooks: { wallClockMs: () => wall } });
    await client.accounts.retrieve('acct_1');
    assert.deepEqual(sleeps, [3450, 5750]);
    const error = await client.accounts.retrieve('acct_1').catch((e) => e);
    assert.ok(error instanceof ServerError);
    assert.equal(error.giveUp, 'retry_after');
    assert.equal(error.attempts, 1);
    assert.equal(error.retryable, true);
    assert.equal(error.requestId, 'req_9');
  } finally {
    server.close();
  }
});

test('a final 4xx is never retried and maps to its typed error with the whole problem', async () => {
  const cases = [
    [400, 'invalid_parameter', InvalidRequestError],
    [401, 'unauthorized', AuthenticationError],
    [402, 'card_declined', CardError],
    [404, 'resource_missing', NotFoundError],
    [409, 'duplicate_payment', ConflictError],
  ];
  const server = await scripted(cases.map(([status, code]) => ({
    status, body: { type: 'about:blank', status, code, param: 'source', request_id: `req_${status}`, detail: 'no' },
  })));
  try {
    const { client, sleeps } = fakeTimeClient(server.url);
    for (const [status, code, ErrorClass] of cases) {
      const error = await client.payments.create(payment).catch((e) => e);
      assert.ok(error instanceof ErrorClass && error instanceof PaydError, `${status}`);
      assert.equal(error.status, status);
      assert.equal(error.code, code);
      assert.equal(error.param, 'source');
      assert.equal(error.requestId, `req_${status}`);
      assert.equal(error.problem.detail, 'no');
      assert.equal(error.attempts, 1);
      assert.equal(error.retryable, false);
      assert.match(error.idempotencyKey, UUID4);
    }
    assert.equal(server.requests.length, cases.length);
    assert.deepEqual(sleeps, []);
  } finally {
    server.close();
  }
});

test('max retries: 1 + maxRetries attempts, then the last answer as the error', async () => {
  const server = await scripted(Array(3).fill({ status: 429, body: { code: 'rate_limited' } }));
  try {
    const { client, sleeps } = fakeTimeClient(server.url, { maxRetries: 2 });
    const error = await client.accounts.retrieve('acct_1').catch((e) => e);
    assert.ok(error instanceof RateLimitError);
    assert.equal(error.attempts, 3);
    assert.equal(error.giveUp, 'max_retries');
    assert.deepEqual(sleeps, [1000, 2000]);
  } finally {
    server.close();
  }
});

test('409 request_in_progress is retried, and the deadline stops a wait that would pass it', async () => {
  const server = await scripted([
    { status: 409, body: { code: 'request_in_progress' } },
    { status: 201, body: { id: 'pay_1' } },
    { status: 503, body: { code: 'overloaded' } },
  ]);
  try {
    const { client } = fakeTimeClient(server.url);
    assert.equal((await client.payments.create(payment)).id, 'pay_1');
    const short = fakeTimeClient(server.url, { deadlineMs: 500 }).client;
    const error = await short.payments.create(payment).catch((e) => e);
    assert.equal(error.giveUp, 'deadline');
    assert.equal(error.attempts, 1);
  } finally {
    server.close();
  }
});

test('a refused connection is a PaydConnectionError (status 0) after the retries', async () => {
  const server = await scripted([]);
  const { url } = server;
  server.close();
  await new Promise((resolve) => setTimeout(resolve, 50));
  const { client, sleeps } = fakeTimeClient(url, { maxRetries: 2 });
  const error = await client.payments.create(payment).catch((e) => e);
  assert.ok(error instanceof PaydConnectionError);
  assert.equal(error.status, 0);
  assert.equal(error.attempts, 3);
  assert.equal(sleeps.length, 2);
  assert.match(error.idempotencyKey, UUID4);
});

test('an attempt that hangs is cut at timeoutMs and retried', async () => {
  let calls = 0;
  const server = http.createServer((req, res) => {
    calls++;
    if (calls === 1) return; // never answers
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"id":"acct_1"}');
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const client = new Payd({
      apiKey: 'k', baseUrl: `http://127.0.0.1:${server.address().port}`, timeoutMs: 200, baseDelayMs: 10,
    });
    const started = Date.now();
    assert.equal((await client.accounts.retrieve('acct_1')).id, 'acct_1');
    assert.equal(calls, 2);
    assert.ok(Date.now() - started >= 190);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test('the deadline cuts an attempt in flight and gives up', async () => {
  const server = http.createServer(() => {}); // never answers
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const client = new Payd({
      apiKey: 'k', baseUrl: `http://127.0.0.1:${server.address().port}`, timeoutMs: 10000, deadlineMs: 300,
    });
    const started = Date.now();
    const error = await client.payments.create(payment).catch((e) => e);
    const took = Date.now() - started;
    assert.ok(error instanceof PaydConnectionError);
    assert.equal(error.giveUp, 'deadline');
    assert.equal(error.attempts, 1);
    assert.ok(took >= 290 && took < 2000, `${took} ms`);
  } finally {
    server.closeAllConnections();
    server.close();
  }
});

test('timeoutMs 0 and deadlineMs 0: no limit at all, the attempt is not cut at once', async () => {
  const server = http.createServer((req, res) => setTimeout(() => {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end('{"id":"acct_1"}');
  }, 100));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const client = new Payd({
      apiKey: 'k', baseUrl: `http://127.0.0.1:${server.address().port}`, timeoutMs: 0, deadlineMs: 0, maxRetries: 0,
    });
    assert.equal((await client.accounts.retrieve('acct_1')).id, 'acct_1');
  } finally {
    server.close();
  }
});

test('lists follow next_cursor until has_more is false; page() reads one page', async () => {
  const server = await scripted([
    { status: 200, body: { object: 'list', data: [{ id: 'a' }, { id: 'b' }], has_more: true, next_cursor: 'c2' } },
    { status: 200, body: { object: 'list', data: [{ id: 'c' }], has_more: false, next_cursor: null } },
    { status: 200, body: { object: 'list', data: [{ id: 'a' }], has_more: true, next_cursor: 'c2' } },
  ]);
  try {
    const { client } = fakeTimeClient(server.url);
    const ids = [];
    for await (const item of client.payments.list({ account: 'acct_1', limit: 2 })) ids.push(item.id);
    assert.deepEqual(ids, ['a', 'b', 'c']);
    assert.deepEqual(server.requests.slice(0, 2).map((r) => r.url),
      ['/v1/accounts/acct_1/payments?limit=2', '/v1/accounts/acct_1/payments?limit=2&cursor=c2']);
    const page = await client.accounts.list({ limit: 1 }).page();
    assert.equal(page.next_cursor, 'c2');
  } finally {
    server.close();
  }
});

test('Payd-Signature: verified with the whole secret as key; Headers objects accepted', async () => {
  const { createHmac } = await import('node:crypto');
  const { verifyWebhook, WebhookVerificationError } = await import('../src/index.js');
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const body = '{"id":"evt_1","object":"event","type":"payment.succeeded","data":{"object":{}}}';
  const t = 1_800_000_000;
  const mac = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
  const headers = new Headers({ 'Payd-Signature': `t=${t},v1=${mac}`, 'Payd-Event-Id': 'evt_1' });
  assert.equal(verifyWebhook({ secret, headers, payload: body, now: t + 10 }).id, 'evt_1');
  assert.equal(verifyWebhook({ secret, headers: { 'payd-signature': `t=${t},v1=${mac}` }, payload: body, now: new Date(t * 1000) }).id, 'evt_1');
  for (const [h, now] of [
    [{ 'payd-signature': `t=${t},v1=${mac}` }, t + 301],
    [{ 'payd-signature': `t=${t + 1},v1=${mac}` }, t],
    [{ 'payd-signature': `t=${t},v1=${'0'.repeat(64)}` }, t],
    [{ 'payd-signature': `v1=${mac}` }, t],
    [{}, t],
  ])
    assert.throws(() => verifyWebhook({ secret, headers: h, payload: body, now }), WebhookVerificationError);
  assert.throws(() => verifyWebhook({ secret, headers, payload: JSON.parse(body), now: t }), TypeError);
});
