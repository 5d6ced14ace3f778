// End to end against a real payd (PAYD_BIN, else build/payd): a lost answer and a 409 in
// flight each end with one charge, a 429 waits its Retry-After, a 402 is not retried, a 250-item
// list is iterated to the end with no repeat, and a signed delivery from payd is verified while a
// tampered or stale one is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Payd, CardError, verifyWebhook, WebhookVerificationError } from '../src/index.js';
import { PaydServer, lossyProxy, paydAvailable, PAYD_BIN } from './harness.mjs';

const skip = !paydAvailable && !process.env.CI && `no payd binary at ${PAYD_BIN} (build it, or set PAYD_BIN)`;
let payd;
let user;

before(async () => {
  if (skip) return;
  payd = await new PaydServer(['--rate-limit', '100000/s']).start();
  user = payd.createUser('node-e2e');
}, { timeout: 30000 });

after(() => payd?.stop());

// A client that records every attempt it makes.
function client(options = {}) {
  const attempts = [];
  const payd_ = new Payd({
    apiKey: options.apiKey ?? user.api_key, baseUrl: options.baseUrl ?? payd.url, baseDelayMs: 100,
    maxDelayMs: 5000, ...options, onAttempt: (report) => attempts.push(report),
  });
  return { client: payd_, attempts };
}

const newAccount = async () => (await client().client.accounts.create({ currency: 'USD' })).id;
const paymentsOf = async (account) => client().client.payments.list({ account, limit: 100 }).toArray();

test('a payment whose answer is lost is retried under the same key: one charge', { skip }, async () => {
  const proxy = await lossyProxy(payd.port, 1);
  try {
    const account = await newAccount();
    const { client: payments, attempts } = client({ baseUrl: proxy.url });
    const payment = await payments.payments.create({ account_id: account, amount: 4200, currency: 'USD', source: 'tok_visa' });
    assert.equal(proxy.dropped, 1);
    assert.deepEqual(attempts.map((a) => a.status), [0, 201]);
    assert.equal(attempts[0].idempotencyKey, attempts[1].idempotencyKey);
    const stored = await paymentsOf(account);
    assert.deepEqual(stored.map((p) => p.id), [payment.id]); // the first attempt's payment, once
    assert.equal(payment.status, 'succeeded');
  } finally {
    proxy.close();
  }
});

test("the processor's lost answer (503) is resumed under the same key: one charge", { skip }, async () => {
  const account = await newAccount();
  const { client: payments, attempts } = client();
  const payment = await payments.payments.create({ account_id: account, amount: 4200, currency: 'USD', source: 'tok_lostResponse' });
  assert.deepEqual(attempts.map((a) => [a.status, a.code]), [[503, 'processor_unavailable'], [201, null]]);
  assert.deepEqual((await paymentsOf(account)).map((p) => p.id), [payment.id]);
});

test('a 409 request_in_progress is waited out and answered with the first attempt\'s payment', { skip }, async () => {
  const account = await newAccount();
  const params = { account_id: account, amount: 700, currency: 'USD', source: 'tok_slow' }; // 2 s
  const key = `node-e2e-${Date.now()}`;
  // Two calls with one key, the second 300 ms after the first: whichever reaches payd second
  // finds the first still running.
  const [one, two] = [client(), client()];
  const first = one.client.payments.create(params, { idempotencyKey: key });
  await new Promise((resolve) => setTimeout(resolve, 300));
  const started = performance.now();
  const second = await two.client.payments.create(params, { idempotencyKey: key });
  const elapsed = performance.now() - started;
  const original = await first;
  assert.equal(second.id, original.id);
  const waited = [one, two].find(({ attempts }) => attempts[0].status === 409);
  assert.ok(waited, `no call saw the 409: ${JSON.stringify([one.attempts, two.attempts])}`);
  assert.equal(waited.attempts[0].code, 'request_in_progress');
  assert.ok(waited.attempts[0].retryAfterMs >= 1000 && waited.attempts[0].delayMs >= waited.attempts[0].retryAfterMs);
  assert.equal(waited.attempts.at(-1).status, 201);
  assert.ok([...one.attempts, ...two.attempts].every((a) => a.idempotencyKey === key));
  if (waited === two) assert.ok(elapsed >= 1000);
  assert.deepEqual((await paymentsOf(account)).map((p) => p.id), [original.id]);
});

test('a 429 waits its Retry-After, then succeeds', { skip }, async () => {
  const slow = payd.createUser('node-e2e-limited', '--rate-limit', '1/s');
  const { client: limited, attempts } = client({ apiKey: slow.api_key });
  await limited.accounts.list({ limit: 1 }).page(); // spends the one-request burst
  const started = performance.now();
  await limited.accounts.list({ limit: 1 }).page();
  const waited = performance.now() - started;
  const second = attempts.slice(1);
  assert.equal(second[0].status, 429);
  assert.equal(second[0].code, 'rate_limited');
  assert.ok(second[0].retryAfterMs >= 1000, `Retry-After ${second[0].retryAfterMs}`);
  assert.ok(second[0].delayMs >= second[0].retryAfterMs); // not the 100 ms the backoff alone gives
  assert.equal(second.at(-1).status, 200);
  assert.ok(waited >= second[0].retryAfterMs, `waited ${waited} ms`);
});

test('a 402 decline is final: one attempt, a CardError with the failed payment', { skip }, async () => {
  const account = await newAccount();
  const { client: payments, attempts } = client();
  const error = await payments.payments
    .create({ account_id: account, amount: 500, currency: 'USD', source: 'tok_chargeDeclined' })
    .catch((e) => e);
  assert.ok(error instanceof CardError, String(error));
  assert.equal(error.status, 402);
  assert.equal(error.code, 'card_declined');
  assert.equal(error.attempts, 1);
  assert.equal(attempts.length, 1);
  assert.equal(error.retryable, false);
  assert.equal(error.problem.payment.status, 'failed');
  assert.match(error.requestId, /\S/);
});

test('a 250-item list is iterated to the end with no repeat', { skip }, async () => {
  const account = await newAccount();
  const { client: c } = client();
  const created = [];
  for (let batch = 0; batch < 25; batch++)
    created.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) =>
      c.payments.create({ account_id: account, amount: 1 + batch * 10 + i, currency: 'USD', source: 'tok_visa' })))));
  const list = c.payments.list({ account, limit: 100 });
  const seen = [];
  for await (const payment of list) seen.push(payment.id);
  assert.equal(list.pages, 3);
  assert.equal(seen.length, 250);
  assert.equal(new Set(seen).size, 250);
  assert.deepEqual([...seen].sort(), created.map((p) => p.id).sort());
});

test("balances: the account's books and its balance transactions, listed through next_cursor and got by id", { skip }, async () => {
  const { client: c } = client();
  const from = await newAccount();
  const to = await newAccount();
  const payments = [];
  for (let i = 0; i < 7; i++)
    payments.push(await c.payments.create({ account_id: from, amount: 1000 + i, currency: 'USD', source: 'tok_visa' }));
  const refund = await c.refunds.create({ payment: payments[2].id, amount: 300 });
  const transfer = (await c.request({
    method: 'POST', path: '/v1/transfers',
    body: { biz_seq: `node-e2e-${from}`, from_account: from, to_account: to, amount: 2500, currency: 'USD' },
  })).body;
  assert.equal(transfer.status, 'succeeded');

  const charged = payments.reduce((sum, p) => sum + p.amount, 0);
  assert.deepEqual(await c.accounts.balance(from),
    { object: 'balance', livemode: true, available: charged - 300 - 2500, pending: 0, currency: 'USD' });
  assert.deepEqual(await c.accounts.balance(to), { object: 'balance', livemode: true, available: 2500, pending: 0, currency: 'USD' });
  assert.equal((await c.accounts.balance(from)).available, (await c.accounts.retrieve(from)).balance);

  // 9 lines on `from`, 2 at a time: 5 pages, newest first, each line once
  const list = c.balanceTransactions.list({ account_id: from, limit: 2 });
  const lines = await list.toArray();
  assert.equal(list.pages, 5);
  assert.equal(lines.length, 9);
  assert.equal(new Set(lines.map((t) => t.id)).size, 9);
  assert.deepEqual(lines.map((t) => [t.type, t.amount, t.source]), [
    ['transfer', -2500, transfer.id], ['refund', -300, refund.id],
    ...[...payments].reverse().map((p) => ['charge', p.amount, p.id]),
  ]);
  assert.equal(lines.reduce((sum, t) => sum + t.amount, 0), (await c.accounts.balance(from)).available);
  for (const t of lines) assert.ok(/^txn_[0-9a-z]{13}$/.test(t.id) && t.account_id === from && t.currency === 'USD');

  // the filters are the server's: a type, a source (both sides of the transfer), every account
  assert.deepEqual((await c.balanceTransactions.list({ account_id: from, type: 'charge' }).toArray()).length, 7);
  const sides = await c.balanceTransactions.list({ source: transfer.id }).toArray();
  assert.deepEqual(sides.map((t) => [t.account_id, t.amount]).sort(), [[from, -2500], [to, 2500]].sort());
  assert.equal(sides[0].entry_id, sides[1].entry_id);
  const all = (await c.balanceTransactions.list({ limit: 100 }).toArray()).map((t) => t.id);
  for (const t of lines) assert.ok(all.includes(t.id));

  assert.deepEqual(await c.balanceTransactions.retrieve(lines[1].id), lines[1]);
  assert.deepEqual(await c.balanceTransactions.get(lines[0].id), lines[0]);
  await assert.rejects(c.balanceTransactions.retrieve('txn_0000000000000'), (e) => e.status === 404 && e.code === 'resource_missing');
  await assert.rejects(c.balanceTransactions.list({ type: 'gift' }).toArray(), (e) => e.status === 400);
  // another user sees none of it
  const other = payd.createUser('node-e2e-other');
  const { client: stranger } = client({ apiKey: other.api_key });
  await assert.rejects(stranger.accounts.balance(from), (e) => e.status === 404);
  await assert.rejects(stranger.balanceTransactions.retrieve(lines[0].id), (e) => e.status === 404);
  assert.deepEqual(await stranger.balanceTransactions.list().toArray(), []);
});

test('a delivery from payd verifies; a tampered or stale one is refused', { skip }, async () => {
  const deliveries = [];
  const waiters = [];
  const receiver = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(204).end();
      waiters.splice(0).forEach((wake) => wake());
    });
  });
  // The next delivery whose event is about this payment.
  const deliveryOf = async (paymentId) => {
    const deadline = Date.now() + 15000;
    for (;;) {
      const found = deliveries.find((d) => d.body.includes(paymentId));
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no delivery for ${paymentId} in 15 s`);
      await new Promise((resolve) => { waiters.push(resolve); setTimeout(resolve, 200); });
    }
  };
  await new Promise((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  try {
    const { client: c } = client();
    const endpoint = await c.webhookEndpoints.create({
      url: `http://127.0.0.1:${receiver.address().port}/hooks`, events: ['payment.succeeded'],
    });
    assert.match(endpoint.secret, /^whsec_/);
    const account = await newAccount();
    const payment = await c.payments.create({ account_id: account, amount: 990, currency: 'USD', source: 'tok_visa' });
    const { headers, body } = await deliveryOf(payment.id);
    assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]+=*$/); // Standard Webhooks
    assert.match(headers['payd-signature'], /^t=\d+,v1=[0-9a-f]{64}$/);

    const event = verifyWebhook({ secret: endpoint.secret, headers, payload: body });
    assert.equal(event.type, 'payment.succeeded');
    assert.equal(event.data.object.id, payment.id);
    assert.equal(event.id, headers['webhook-id'] ?? headers['payd-event-id']);
    assert.deepEqual(verifyWebhook({ secret: endpoint.secret, headers, payload: body.toString('utf8') }), event);
    // Each scheme payd sends verifies on its own.
    for (const scheme of ['payd-signature', 'webhook-signature'].filter((name) => headers[name])) {
      const only = Object.fromEntries(Object.entries(headers).filter(([name]) =>
        scheme === 'payd-signature' ? !name.startsWith('webhook-') : name !== 'payd-signature'));
      assert.equal(verifyWebhook({ secret: endpoint.secret, headers: only, payload: body }).id, event.id);
    }

    const tampered = Buffer.from(body.toString('utf8').replace('"amount":990', '"amount":99000'));
    assert.notDeepEqual(tampered, body);
    assert.throws(() => verifyWebhook({ secret: endpoint.secret, headers, payload: tampered }), WebhookVerificationError);
    const reserialized = JSON.stringify(JSON.parse(body.toString('utf8')), null, 2);
    assert.throws(() => verifyWebhook({ secret: endpoint.secret, headers, payload: reserialized }), WebhookVerificationError);
    const timestamp = Number(headers['webhook-timestamp'] ?? /t=(\d+)/.exec(headers['payd-signature'])[1]);
    assert.throws(() => verifyWebhook({ secret: endpoint.secret, headers, payload: body, now: timestamp + 301 }),
      WebhookVerificationError);
    assert.equal(verifyWebhook({ secret: endpoint.secret, headers, payload: body, now: timestamp + 299 }).id, event.id);
    const otherSecret = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
    assert.throws(() => verifyWebhook({ secret: otherSecret, headers, payload: body }), WebhookVerificationError);

    // A rotated secret: while the previous one has not expired, a delivery carries both
    // signatures, and a receiver holding either secret accepts it.
    const rotated = await c.webhookEndpoints.rotateSecret(endpoint.id, { expire_previous_in: 3600 });
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, endpoint.secret);
    const next = await c.payments.create({ account_id: account, amount: 991, currency: 'USD', source: 'tok_visa' });
    const later = await deliveryOf(next.id);
    assert.equal(later.headers['webhook-signature'].split(' ').length, 2);
    for (const secret of [rotated.secret, endpoint.secret]) {
      assert.equal(verifyWebhook({ secret, headers: later.headers, payload: later.body }).data.object.id, next.id);
      const paydOnly = { 'payd-signature': later.headers['payd-signature'] };
      assert.equal(verifyWebhook({ secret, headers: paydOnly, payload: later.body }).data.object.id, next.id);
    }
    assert.throws(() => verifyWebhook({ secret: rotated.secret, headers, payload: body }), WebhookVerificationError);
  } finally {
    receiver.closeAllConnections();
    receiver.close();
  }
});

test('a manual payment is captured in part under one key, then canceled (§17)', { skip }, async () => {
  const account = await newAccount();
  const { client: c } = client();
  const p = await c.payments.create({ account_id: account, amount: 1000, currency: 'USD', source: 'tok_visa', capture_method: 'manual' });
  assert.equal(p.status, 'requires_capture');
  const first = await c.payments.capture(p.id, { amount_to_capture: 400, final_capture: false }, { idempotencyKey: 'node-cap-1' });
  const again = await c.payments.capture(p.id, { amount_to_capture: 400, final_capture: false }, { idempotencyKey: 'node-cap-1' });
  assert.deepEqual(again, first);
  assert.equal(first.amount_captured, 400);
  const done = await c.payments.cancel(p.id, { cancellation_reason: 'duplicate' });
  assert.deepEqual([done.status, done.amount_captured, done.amount_released], ['succeeded', 400, 600]);
  const refused = await c.payments.cancel(p.id).catch((e) => e);
  assert.equal(refused.code, 'payment_not_capturable');
});
