// The dashboard in a real browser (§16): Debian's Chromium, headless, driven by playwright-core
// against the real payd on a fresh database. Every page checks that no request left for another
// origin and that the console showed no error, except the browser's own line for a failed
// response a test provokes on purpose (a 402 decline, a 409 refusal, a 429, a cut connection).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import {
  Payd, User, launchBrowser, parseCsv, screenshotPath, signIn, signedWith, sleep, watchedPage, webhookReceiver,
} from './harness.mjs';

let server, browser;

before(async () => {
  // the scene is set through the API at full speed; the limited user has a limit of its own
  server = await new Payd(['--rate-limit', '100000/s']).start();
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

// Same origin only, no uncaught exception, and no console error but the expected ones.
function assertClean(seen, allowedConsole = []) {
  const origin = new URL(server.url).origin;
  const foreign = seen.requests.filter((u) => new URL(u).origin !== origin);
  assert.deepEqual(foreign, [], 'requests to another origin');
  assert.deepEqual(seen.pageErrors, [], 'uncaught exceptions');
  const unexpected = seen.consoleErrors.filter((text) => !allowedConsole.some((re) => re.test(text)));
  assert.deepEqual(unexpected, [], 'console errors');
}

// Runs fn(i) for i < n, `width` at a time.
async function pool(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

const rowIds = (page) => page.$$eval('#payments li', (lis) => lis.map((li) => li.dataset.id));
const listState = (page) => page.$eval('#list-status', (el) => el.dataset.state);

describe('the payments list and the chart', () => {
  let user, account, page, seen, shownBeforeNotice;

  test('scrolls through 250 payments once each, in order, while 20 more arrive behind the notice', async () => {
    user = server.createUser('scroller');
    account = server.createAccount(user, 'USD', 'Scroll test');
    await pool(250, 8, (i) => user.pay(account, 100 + i * 7, i % 9 === 4 ? 'tok_chargeDeclined' : 'tok_visa',
      i % 3 ? `order ${i}` : undefined));
    // a few partial refunds, so the list and the chart carry refunded amounts too
    const before = await user.payments(account);
    for (const p of before.filter((x) => x.status === 'succeeded').slice(0, 12)) {
      const r = await user.request('POST', `/v1/payments/${p.id}/refunds`,
        { idempotencyKey: crypto.randomUUID(), body: { amount: 50 } });
      assert.equal(r.status, 201);
    }
    const expected = (await user.payments(account)).map((p) => p.id);
    assert.equal(expected.length, 250);

    ({ page, seen } = await watchedPage(browser));
    await signIn(page, server, user, '#poll=600');
    await page.locator('#payments li').first().waitFor();
    await page.mouse.move(640, 600);

    // Scroll page by page; before each next page is read, 5 more payments are made, so all 20
    // exist before the list reaches its end.
    const made = [];
    let loadsAfterFirstNew = 0;
    for (let step = 0; step < 60 && (await listState(page)) !== 'end'; step++) {
      const shown = (await rowIds(page)).length;
      if (made.length < 20) {
        for (let i = 0; i < 5; i++) made.push(await user.pay(account, 9000 + made.length, 'tok_visa', 'arrived while scrolling'));
      }
      await page.mouse.wheel(0, 5000);
      await page.waitForFunction((n) => document.querySelectorAll('#payments li').length > n
        || document.querySelector('#list-status').dataset.state === 'end', shown);
      if (made.length) loadsAfterFirstNew++;
    }
    assert.equal(made.length, 20);
    assert.ok(loadsAfterFirstNew >= 2, 'the new payments were made while the list was still loading');
    assert.equal(await listState(page), 'end');

    // every one of the 250 exactly once, in the API's order; none of the 20 slipped in
    shownBeforeNotice = await rowIds(page);
    assert.deepEqual(shownBeforeNotice, expected);

    // the poll found the 20 and says so, without touching the list
    const notice = page.locator('#new-payments');
    await page.waitForFunction(() => document.querySelector('#new-payments').dataset.count === '20');
    assert.match(await notice.textContent(), /^20 new payments/);
    assert.deepEqual(await rowIds(page), expected);

    // shown on request (with the keyboard), on top, newest first, none twice
    await notice.focus();
    await page.keyboard.press('Enter');
    await notice.waitFor({ state: 'hidden' });
    const all = await rowIds(page);
    const newest = made.map((p) => p.id).reverse();
    assert.deepEqual(all, [...newest, ...expected]);
    assert.equal(new Set(all).size, 270);
    // and a later poll finds nothing more
    await sleep(1500);
    assert.equal(await notice.isHidden(), true);
    assert.deepEqual(await rowIds(page), all);

    await page.evaluate(() => document.querySelector('#payments').closest('.card').scrollIntoView());
    await page.screenshot({ path: screenshotPath('payments-list.png') });
    assertClean(seen);
  });

  test("the chart's totals equal the sum of the listed payments", async () => {
    const rows = await page.$$eval('#payments li', (lis) => lis.map((li) => ({
      status: li.dataset.status, amount: Number(li.dataset.amount), refunded: Number(li.dataset.refunded),
    })));
    assert.equal(rows.length, 270);
    const charged = rows.filter((r) => r.status !== 'failed');
    const want = {
      count: charged.length,
      amount: charged.reduce((s, r) => s + r.amount, 0),
      refunded: charged.reduce((s, r) => s + r.refunded, 0),
    };
    assert.equal(want.refunded, 12 * 50);
    for (const range of ['all', 'day', 'hour']) {
      await page.selectOption('#chart-range', range);
      await page.locator('#chart-totals[data-state=ready]').waitFor();
      const totals = await page.$eval('#chart-totals', (el) => ({
        count: Number(el.dataset.count), amount: Number(el.dataset.amount), refunded: Number(el.dataset.refunded),
      }));
      assert.deepEqual(totals, want, range);
      // and the bars add up to the same
      const bars = await page.$$eval('#chart g.bucket', (gs) => gs.map((g) => ({
        count: Number(g.dataset.count), amount: Number(g.dataset.amount), refunded: Number(g.dataset.refunded),
      })));
      assert.deepEqual({
        count: bars.reduce((s, b) => s + b.count, 0),
        amount: bars.reduce((s, b) => s + b.amount, 0),
        refunded: bars.reduce((s, b) => s + b.refunded, 0),
      }, want, range);
      assert.ok(await page.locator('#chart rect.bar-net').count() >= 1);
    }
    assert.equal(await page.locator('#chart rect.bar-refunded').count() >= 1, true);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.locator('#chart').screenshot({ path: screenshotPath('volume-chart.png') });
    assertClean(seen);
    await page.context().close();
  });
});

describe('forms that cannot charge twice', () => {
  test('a double click on Pay, and a resubmission after the network was cut, each charge once', async () => {
    const user = server.createUser('payer');
    const account = server.createAccount(user, 'USD', 'Pay test');
    const { page, seen } = await watchedPage(browser);
    const posted = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/v1/payments')) posted.push(r.headers()['idempotency-key']);
    });
    await signIn(page, server, user);
    await page.locator('#list-status[data-state=end]').waitFor();

    await page.click('#new-payment');
    await page.fill('#pay-amount', '12.34');
    const first = await page.textContent('#pay-key');
    assert.match(first, /^[0-9a-f-]{36}$/);
    await page.dblclick('#pay-submit');
    await page.locator('#pay-dialog').waitFor({ state: 'hidden' });
    await page.locator('#payments li').first().waitFor();
    let payments = await user.payments(account);
    assert.equal(payments.length, 1);
    assert.equal(payments[0].amount, 1234);
    assert.ok(posted.length >= 1 && posted.every((k) => k === first), 'every submission sent the key shown');

    // The request reaches payd, which charges; the answer is lost on the way back.
    await page.click('#new-payment');
    await page.fill('#pay-amount', '56.78');
    const second = await page.textContent('#pay-key');
    assert.notEqual(second, first, 'a new form, a new key');
    let cut = false;
    await page.route('**/v1/payments', async (route) => {
      if (!cut && route.request().method() === 'POST') {
        cut = true;
        await route.fetch(); // payd answers 201 here...
        await route.abort('connectionreset'); // ...and the page never sees it
        return;
      }
      await route.continue();
    });
    await page.click('#pay-submit');
    const problem = page.locator('#pay-problem');
    await problem.waitFor({ state: 'visible' });
    assert.match(await problem.textContent(), /No answer from the server/);
    assert.equal(await page.textContent('#pay-key'), second, 'the key is kept for the retry');
    assert.equal((await user.payments(account)).length, 2, 'the lost answer was a real charge');

    const replay = page.waitForResponse((r) => r.url().endsWith('/v1/payments') && r.request().method() === 'POST');
    await page.click('#pay-submit');
    const answer = await replay;
    assert.equal(answer.status(), 201);
    assert.equal(answer.headers()['idempotent-replayed'], 'true');
    await page.locator('#pay-dialog').waitFor({ state: 'hidden' });
    await page.unroute('**/v1/payments');

    payments = await user.payments(account);
    assert.deepEqual(payments.map((p) => p.amount), [5678, 1234]);
    assert.deepEqual(posted.filter((k) => k === second).length, 2);
    await page.waitForFunction(() => document.querySelectorAll('#payments li').length === 2);
    assert.deepEqual(await rowIds(page), payments.map((p) => p.id));
    assertClean(seen, [/ERR_CONNECTION_RESET|ERR_FAILED/]);
    await page.context().close();
  });

  test('a decline shows card_declined and a refund past what is left shows amount_exceeds_refundable', async () => {
    const user = server.createUser('refunder');
    const account = server.createAccount(user, 'USD', 'Refund test');
    const { page, seen } = await watchedPage(browser);
    await signIn(page, server, user);
    await page.locator('#list-status[data-state=end]').waitFor();

    await page.click('#new-payment');
    await page.fill('#pay-amount', '20');
    await page.selectOption('#pay-source', 'tok_chargeDeclined');
    const key = await page.textContent('#pay-key');
    await page.click('#pay-submit');
    const problem = page.locator('#pay-problem');
    await problem.waitFor({ state: 'visible' });
    assert.equal(await problem.locator('.problem-code').textContent(), 'card_declined');
    assert.match(await problem.textContent(), /declined.*generic_decline/);
    assert.notEqual(await page.textContent('#pay-key'), key, 'a decline settles the attempt: the next one gets a new key');

    await page.selectOption('#pay-source', 'tok_visa');
    await page.click('#pay-submit');
    await page.locator('#pay-dialog').waitFor({ state: 'hidden' });
    await page.waitForFunction(() => document.querySelectorAll('#payments li').length === 2);
    const statuses = await page.$$eval('#payments li', (lis) => lis.map((li) => li.dataset.status));
    assert.deepEqual(statuses, ['succeeded', 'failed']);

    // open the payment with the keyboard
    await page.locator('#payments li[data-status=succeeded] button').focus();
    await page.keyboard.press('Enter');
    const detail = page.locator('#detail-dialog');
    await detail.locator('#detail-refunds li').first().waitFor();
    await page.fill('#refund-amount', '15.00');
    await page.click('#refund-submit');
    await page.locator('#detail-refunds li[data-refund]').waitFor();
    assert.match(await page.textContent('#refund-left'), /\$5\.00 left/);

    await page.fill('#refund-amount', '10.00');
    await page.click('#refund-submit');
    const refundProblem = page.locator('#refund-problem');
    await refundProblem.waitFor({ state: 'visible' });
    assert.equal(await refundProblem.locator('.problem-code').textContent(), 'amount_exceeds_refundable');
    assert.match(await refundProblem.textContent(), /\$5\.00 can still be refunded/);
    assert.equal(await page.locator('#detail-refunds li[data-refund]').count(), 1);
    await page.keyboard.press('Escape');
    await detail.waitFor({ state: 'hidden' });
    // the row shows the refund too
    assert.equal(await page.$eval('#payments li[data-status=partially_refunded]', (li) => li.dataset.refunded), '1500');
    assertClean(seen, [/status of 402/, /status of 409/]);
    await page.context().close();
  });

  test('a manual payment is captured in part, then canceled, each form with its own key', async () => {
    const user = server.createUser('holder');
    const account = server.createAccount(user, 'USD', 'Hold test');
    const { page, seen } = await watchedPage(browser);
    await signIn(page, server, user);
    await page.locator('#list-status[data-state=end]').waitFor();

    await page.click('#new-payment');
    await page.fill('#pay-amount', '30');
    await page.check('#pay-manual');
    await page.click('#pay-submit');
    await page.locator('#pay-dialog').waitFor({ state: 'hidden' });
    await page.waitForFunction(() => document.querySelectorAll('#payments li').length === 1);
    await page.locator('#payments li[data-status=requires_capture] button').click();
    const capture = page.locator('#capture-form');
    await capture.waitFor({ state: 'visible' });
    const captureKey = await page.textContent('#capture-key');
    const cancelKey = await page.textContent('#cancel-key');
    assert.notEqual(captureKey, cancelKey, 'each form has its own Idempotency-Key');

    await page.fill('#capture-amount', '10.00');
    await page.uncheck('#capture-final');
    await page.click('#capture-submit');
    await page.waitForFunction(() => document.querySelector('[data-captured]')?.dataset.captured === '1000');
    assert.match(await page.textContent('#capture-left'), /\$20\.00 capturable/);
    assert.notEqual(await page.textContent('#capture-key'), captureKey, 'a success settles the attempt');

    await page.fill('#capture-amount', '25.00');
    await page.click('#capture-submit');
    const problem = page.locator('#capture-problem');
    await problem.waitFor({ state: 'visible' });
    assert.equal(await problem.locator('.problem-code').textContent(), 'amount_exceeds_capturable');
    assert.match(await problem.textContent(), /\$20\.00 can still be captured/);

    await page.selectOption('#cancel-reason', 'abandoned');
    await page.click('#cancel-submit');
    await capture.waitFor({ state: 'hidden' });
    assert.equal(await page.$eval('#detail-fields [data-status]', (el) => el.dataset.status), 'succeeded');
    assert.equal(await page.$eval('[data-capturable]', (el) => el.dataset.capturable), '0');
    assertClean(seen, [/status of 409/]);
    await page.context().close();
  });
});

test('a user limited to 1/s sees the wait, then the dashboard and a payment succeed', async () => {
  const user = server.createUser('limited', '1/s');
  const account = server.createAccount(user, 'USD', 'Limited');
  const { page, seen } = await watchedPage(browser);
  await signIn(page, server, user);
  const notice = page.locator('#notice[data-kind=rate-limited]');
  await notice.waitFor({ state: 'visible' });
  assert.match(await notice.textContent(), /Rate limited \(429 rate_limited\): waiting \d+ s .*Retry-After/);
  await page.locator('#list-status[data-state=end]').waitFor({ timeout: 30000 });
  await page.locator('#chart-totals[data-state=ready]').waitFor({ timeout: 30000 });
  await page.locator('#notice').waitFor({ state: 'hidden', timeout: 30000 });

  await page.click('#new-payment');
  await page.fill('#pay-amount', '3.00');
  await page.click('#pay-submit');
  await page.locator('#pay-dialog').waitFor({ state: 'hidden', timeout: 30000 });
  const payments = await user.payments(account);
  assert.equal(payments.length, 1);
  await page.waitForFunction(() => document.querySelectorAll('#payments li').length === 1);
  assertClean(seen, [/status of 429/]);
  await page.context().close();
});

test('the page is usable on a phone-sized screen and with the keyboard', async () => {
  const user = server.createUser('phone');
  const account = server.createAccount(user, 'EUR', 'Phone');
  for (let i = 0; i < 30; i++) await user.pay(account, 250 + i * 100, i % 5 === 2 ? 'tok_chargeDeclined' : 'tok_visa');
  const { page, seen } = await watchedPage(browser, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await page.goto(`${server.url}/`);
  // the key field is reachable by Tab and the form submits with Enter
  for (let i = 0; i < 6 && !(await page.evaluate(() => document.activeElement?.id === 'api-key')); i++) {
    await page.keyboard.press('Tab');
  }
  assert.equal(await page.evaluate(() => document.activeElement.id), 'api-key');
  await page.keyboard.type(user.key);
  await page.keyboard.press('Enter');
  await page.locator('#chart-totals[data-state=ready]').waitFor();
  await page.locator('#payments li').first().waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `no sideways scrolling (${overflow}px too wide)`);
  await page.screenshot({ path: screenshotPath('phone.png'), fullPage: true });

  // Tab reaches "New payment"; Enter opens the form with the amount focused; Escape closes it
  await page.evaluate(() => document.querySelector('#sign-out').focus());
  for (let i = 0; i < 20 && !(await page.evaluate(() => document.activeElement?.id === 'new-payment')); i++) {
    await page.keyboard.press('Tab');
  }
  await page.keyboard.press('Enter');
  await page.locator('#pay-dialog').waitFor({ state: 'visible' });
  assert.equal(await page.evaluate(() => document.activeElement.id), 'pay-amount');
  await page.keyboard.press('Escape');
  await page.locator('#pay-dialog').waitFor({ state: 'hidden' });
  assertClean(seen);
  await page.context().close();
});

test('the Content-Security-Policy is enforced: no HTML from strings, nothing from another origin', async () => {
  // another origin on this machine that counts what reaches it
  let hits = 0;
  const other = http.createServer((req, res) => {
    hits++;
    res.end('x');
  });
  await new Promise((resolve) => other.listen(0, '127.0.0.1', resolve));
  const elsewhere = `http://127.0.0.1:${other.address().port}`;
  try {
    const { page, seen } = await watchedPage(browser);
    await page.goto(`${server.url}/`);
    const outcome = await page.evaluate(async (base) => {
      const result = {};
      try {
        document.body.insertAdjacentHTML('beforeend', '<b>injected</b>');
        result.html = 'allowed';
      } catch (e) {
        result.html = e.name;
      }
      try {
        await fetch(`${base}/data`);
        result.fetch = 'allowed';
      } catch (e) {
        result.fetch = e.name;
      }
      try {
        document.createElement('script').src = `${base}/x.js`;
        result.script = 'allowed';
      } catch (e) {
        result.script = e.name;
      }
      const img = document.createElement('img');
      result.image = await new Promise((resolve) => {
        img.onerror = () => resolve('blocked');
        img.onload = () => resolve('loaded');
        img.src = `${base}/x.png`;
        document.body.append(img);
      });
      return result;
    }, elsewhere);
    assert.deepEqual(outcome, { html: 'TypeError', fetch: 'TypeError', script: 'TypeError', image: 'blocked' });
    assert.equal(hits, 0, 'nothing reached the other origin');
    assert.ok(seen.consoleErrors.some((t) => /Content Security Policy|TrustedHTML/.test(t)));
    await page.context().close();
  } finally {
    other.close();
  }
});

test('amounts are read and written in exact minor units', async () => {
  const { page, seen } = await watchedPage(browser);
  await page.goto(`${server.url}/`);
  const got = await page.evaluate(async () => {
    const f = await import('/assets/format.js');
    return {
      parsed: ['0.29', '1,234.5', '42', '12.345', '-1', 'abc', '9999999999.99'].map((t) => f.parseAmount(t, 'USD')),
      yen: [f.parseAmount('500', 'JPY'), f.parseAmount('5.5', 'JPY')],
      dinar: f.parseAmount('1.234', 'KWD'),
      // (Intl separates a currency code with a no-break space)
      shown: [f.money(29, 'USD'), f.money(123456, 'USD'), f.money(999999999999, 'USD'), f.money(500, 'JPY'),
        f.money(1234, 'KWD')].map((s) => s.replace(/\u00a0/g, ' ')),
    };
  });
  assert.deepEqual(got, {
    parsed: [29, 123450, 4200, null, null, null, 999999999999],
    yen: [500, null],
    dinar: 1234,
    shown: ['$0.29', '$1,234.56', '$9,999,999,999.99', '¥500', 'KWD 1.234'],
  });
  assertClean(seen);
  await page.context().close();
});

// ---- the pages beside payments: webhook endpoints, events, API keys, search, export ----

const UUID = /^[0-9a-f-]{36}$/;
const goTo = (page, view) => page.click(`nav.views button[data-view=${view}]`);

// The secret the dialog shows once; closing it leaves nothing of it in the page.
async function takeSecret(page) {
  await page.locator('#secret-dialog').waitFor({ state: 'visible' });
  const secret = await page.textContent('#secret-value');
  await page.click('#secret-done');
  await page.locator('#secret-dialog').waitFor({ state: 'hidden' });
  // the dialog's close event, which empties it, is a task of its own after the dialog hides
  await page.waitForFunction(() => document.querySelector('#secret-value').textContent === '', null, { timeout: 2000 });
  assert.equal(await page.textContent('#secret-value'), '');
  return secret;
}

// The attempts table as the page shows it, reloaded until until(rows) holds.
async function attemptsUntil(page, until) {
  for (let i = 0; i < 100; i++) {
    await page.click('#reload-attempts');
    await page.waitForFunction(() => ['end', 'more', 'error'].includes(document.querySelector('#attempts-status').dataset.state));
    const rows = await page.$$eval('#attempts tr', (trs) => trs.map((tr) => ({
      id: tr.dataset.attempt, event_id: tr.dataset.event, outcome: tr.dataset.outcome, attempt: Number(tr.dataset.number),
    })));
    if (until(rows)) return rows;
    await sleep(100);
  }
  throw new Error('the attempts never showed what was expected');
}

describe('webhook endpoints, events and search', () => {
  let user, account, page, seen, receiver, endpoint, secret, eventId;

  before(async () => {
    receiver = await webhookReceiver();
    user = server.createUser('hooks');
    account = server.createAccount(user, 'USD', 'Hooks');
    ({ page, seen } = await watchedPage(browser));
    await signIn(page, server, user);
  });

  after(async () => {
    await page?.context().close();
    await receiver?.close();
  });

  test('adds an endpoint (its secret shown once, and it signs the deliveries), then sends a delivery again', async () => {
    await goTo(page, 'webhooks');
    await page.locator('#endpoints-status').filter({ hasText: 'No endpoints yet' }).waitFor();
    await page.click('#new-endpoint');
    assert.match(await page.textContent('#endpoint-key'), UUID);
    await page.fill('#endpoint-url', receiver.url);
    await page.check('#endpoint-events input[value="payment.succeeded"]');
    await page.fill('#endpoint-description', 'Orders service');
    await page.click('#endpoint-submit');
    secret = await takeSecret(page);
    assert.match(secret, /^whsec_/);

    const listed = await user.list('/v1/webhook_endpoints');
    assert.equal(listed.length, 1);
    endpoint = listed[0];
    assert.deepEqual([endpoint.url, endpoint.events, endpoint.description], [receiver.url, ['payment.succeeded'], 'Orders service']);
    assert.equal(await page.getAttribute('#endpoint-view', 'data-id'), endpoint.id);
    assert.equal(await page.textContent('#endpoint-title'), 'Orders service');
    assert.equal(await page.locator(`#endpoints button[data-endpoint="${endpoint.id}"]`).count(), 1);

    // a payment is delivered, signed with the secret the page showed
    const payment = await user.pay(account, 4200);
    await receiver.waitFor((d) => d.length >= 1, 'payment.succeeded');
    const first = receiver.deliveries[0];
    eventId = first.headers['webhook-id'];
    assert.equal(JSON.parse(first.body).data.object.id, payment.id);
    assert.ok(signedWith(secret, first), 'signed with the secret shown');

    // the attempt as the page shows it is the API's
    let rows = await attemptsUntil(page, (r) => r.some((a) => a.event_id === eventId && a.outcome === 'delivered'));
    const api = (list) => list.map((a) => ({ id: a.id, event_id: a.event_id, outcome: a.outcome, attempt: a.attempt }));
    assert.deepEqual(rows, api(await user.list(`/v1/webhook_endpoints/${endpoint.id}/deliveries`)));

    // "Send again": its own Idempotency-Key, and the receiver gets the event a second time
    await page.click(`#attempts tr[data-event="${eventId}"] button[data-resend]`);
    await page.locator('#resend-dialog').waitFor({ state: 'visible' });
    assert.match(await page.textContent('#resend-key'), UUID);
    assert.equal(await page.textContent('#resend-event'), eventId);
    await page.click('#resend-submit');
    await page.locator('#resend-dialog').waitFor({ state: 'hidden' });
    await receiver.waitFor(() => receiver.of(eventId).length >= 2, 'the redelivery');
    rows = await attemptsUntil(page, (r) => r.filter((a) => a.event_id === eventId && a.outcome === 'delivered').length === 2);
    assert.deepEqual(rows, api(await user.list(`/v1/webhook_endpoints/${endpoint.id}/deliveries`)));
    assert.deepEqual(rows.map((a) => a.attempt).sort(), [1, 2]);
    await page.screenshot({ path: screenshotPath('webhooks.png') });
    assertClean(seen);
  });

  test('edits, disables, enables the endpoint and rotates its secret', async () => {
    await page.click('#edit-endpoint');
    assert.equal(await page.inputValue('#endpoint-url'), receiver.url);
    assert.equal(await page.isChecked('#endpoint-events input[value="payment.succeeded"]'), true);
    assert.equal(await page.isVisible('#endpoint-description'), false, 'the description is set at creation only');
    await page.fill('#endpoint-url', `${receiver.url}?v=2`);
    await page.check('#endpoint-events input[value="*"]');
    await page.click('#endpoint-submit');
    await page.locator('#endpoint-dialog').waitFor({ state: 'hidden' });
    let got = (await user.request('GET', `/v1/webhook_endpoints/${endpoint.id}`)).data;
    assert.deepEqual([got.url, got.events], [`${receiver.url}?v=2`, ['*']]);
    assert.equal(await page.textContent('[data-field=events]'), '*');

    await page.click('#toggle-endpoint');
    await page.locator('#endpoint-view[data-disabled=true]').waitFor();
    assert.equal((await user.request('GET', `/v1/webhook_endpoints/${endpoint.id}`)).data.disabled, true);
    assert.equal(await page.textContent('#toggle-endpoint'), 'Enable');
    await page.click('#toggle-endpoint');
    await page.locator('#endpoint-view[data-disabled=false]').waitFor();
    assert.equal((await user.request('GET', `/v1/webhook_endpoints/${endpoint.id}`)).data.disabled, false);

    await page.click('#rotate-endpoint');
    assert.match(await page.textContent('#rotate-key'), UUID);
    await page.selectOption('#rotate-overlap', '3600');
    await page.click('#rotate-submit');
    const rotated = await takeSecret(page);
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, secret);
    got = (await user.request('GET', `/v1/webhook_endpoints/${endpoint.id}`)).data;
    const expires = Date.parse(got.previous_secret_expires_at) - Date.now();
    assert.ok(expires > 3500e3 && expires <= 3600e3, `the old secret signs for an hour more (${expires} ms)`);
    assert.equal(await page.getAttribute('[data-field=previous-secret]', 'datetime'), got.previous_secret_expires_at);

    // the next delivery is signed with the new secret, and with the old one beside it
    const before = receiver.deliveries.length;
    await user.pay(account, 4300);
    await receiver.waitFor((d) => d.length > before, 'a delivery after the rotation');
    const latest = receiver.deliveries.at(-1);
    assert.ok(signedWith(rotated, latest) && signedWith(secret, latest));
    assertClean(seen);
  });

  test('the events log: a type filter and its pages are the API\'s, and an event opens as its JSON', async () => {
    await pool(55, 8, (i) => user.pay(account, 100 + i, i % 11 === 3 ? 'tok_chargeDeclined' : 'tok_visa'));
    // the page's event types are the API's
    const served = (await (await fetch(`${server.url}/openapi.json`)).json()).components.schemas.EventType.enum;
    assert.deepEqual(await page.evaluate(async () => (await import('/assets/event_types.js')).EVENT_TYPES), served);
    await goTo(page, 'events');
    await page.locator('#events-status[data-state=more]').waitFor();
    const expectedAll = (await user.list('/v1/events')).map((e) => e.id);
    assert.deepEqual(await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.id)), expectedAll.slice(0, 50));

    await page.selectOption('#event-type', 'payment.succeeded');
    const want = (await user.list('/v1/events', { type: 'payment.succeeded' })).map((e) => e.id);
    assert.ok(want.length > 50, 'more than one page');
    await page.locator('#events-status[data-state=more]').waitFor();
    while ((await page.getAttribute('#events-status', 'data-state')) !== 'end') {
      const shown = await page.locator('#events li').count();
      await page.click('#events-more');
      await page.waitForFunction((n) => document.querySelectorAll('#events li').length > n
        || document.querySelector('#events-status').dataset.state === 'end', shown);
    }
    const shown = await page.$$eval('#events li', (lis) => lis.map((li) => [li.dataset.id, li.dataset.type]));
    assert.deepEqual(shown.map(([id]) => id), want);
    assert.ok(shown.every(([, type]) => type === 'payment.succeeded'));

    await page.selectOption('#event-type', 'payment.failed');
    await page.locator('#events-status[data-state=end]').waitFor();
    const failed = (await user.list('/v1/events', { type: 'payment.failed' })).map((e) => e.id);
    assert.equal(failed.length, 5);
    assert.deepEqual(await page.$$eval('#events li', (lis) => lis.map((li) => li.dataset.id)), failed);

    await page.click(`#events li[data-id="${failed[0]}"] button`);
    await page.locator('#object-dialog').waitFor({ state: 'visible' });
    const api = (await user.request('GET', `/v1/events/${failed[0]}`)).data;
    assert.deepEqual(JSON.parse(await page.textContent('#object-json')), api);
    await page.screenshot({ path: screenshotPath('events.png') });
    await page.keyboard.press('Escape');
    await page.locator('#object-dialog').waitFor({ state: 'hidden' });
    assertClean(seen);
  });

  test('the search box finds any object by its id, and says so clearly when there is none', async () => {
    const payment = (await user.payments(account)).find((p) => p.status === 'succeeded');
    const refund = (await user.request('POST', `/v1/payments/${payment.id}/refunds`,
      { idempotencyKey: crypto.randomUUID(), body: { amount: 10 } })).data;
    const find = async (id) => {
      await page.fill('#search-id', id);
      await page.press('#search-id', 'Enter');
    };

    await find(payment.id);
    await page.locator('#detail-dialog').waitFor({ state: 'visible' });
    await page.locator('#detail-fields code', { hasText: payment.id }).waitFor();
    await page.keyboard.press('Escape');

    for (const [id, title] of [[eventId, 'Event payment.succeeded'], [refund.id, `Refund ${refund.id}`]]) {
      await find(id);
      await page.locator('#object-dialog').waitFor({ state: 'visible' });
      assert.equal(await page.textContent('#object-h'), title);
      assert.equal(JSON.parse(await page.textContent('#object-json')).id, id);
      await page.keyboard.press('Escape');
      await page.locator('#object-dialog').waitFor({ state: 'hidden' });
    }

    await find(endpoint.id);
    await page.locator('#view-webhooks').waitFor({ state: 'visible' });
    await page.locator(`#endpoint-view[data-id="${endpoint.id}"]`).waitFor();

    await find(account.id);
    await page.locator('#view-payments').waitFor({ state: 'visible' });
    assert.equal(await page.getAttribute(`#accounts button[data-account="${account.id}"]`, 'aria-current'), 'true');

    const status = page.locator('#search-status');
    await find('pay_0000000000000');
    await page.locator('#search-status[data-state=not-found]').waitFor();
    assert.equal(await status.textContent(), 'No payment pay_0000000000000 found.');
    await find('re_0000000000000');
    await page.locator('#search-status[data-state=not-found]').filter({ hasText: 'No refund' }).waitFor();
    await find('sku_42');
    await page.locator('#search-status').filter({ hasText: 'is not an id payd knows' }).waitFor();
    assert.match(await status.textContent(), /pay_, re_, acct_, ord_, tr_, evt_, we_, key_/);
    assertClean(seen, [/status of 404/]);
  });

  test('API keys: the page marks its own, creates one (shown once, and it works), revokes one, and warns about its own', async () => {
    await goTo(page, 'keys');
    await page.locator('#keys-status[data-state=end]').waitFor();
    let listed = await user.list('/v1/api_keys');
    assert.equal(listed.length, 1);
    assert.equal(await page.getAttribute(`#keys tr[data-key="${listed[0].id}"]`, 'data-own'), 'true');

    await page.click('#new-key');
    assert.match(await page.textContent('#key-key'), UUID);
    await page.fill('#key-name', 'ci');
    await page.click('#key-submit');
    const made = await takeSecret(page);
    assert.match(made, /^sk_/);
    const me = await new User(server, user.id, made).request('GET', '/v1/users/me');
    assert.equal(me.status, 200, 'the key shown works');
    assert.equal(me.data.id, user.id);
    await page.waitForFunction(() => document.querySelectorAll('#keys tr').length === 2);
    listed = await user.list('/v1/api_keys');
    const shownKeys = () => page.$$eval('#keys tr', (trs) => trs.map((tr) => [tr.dataset.key, tr.dataset.status, tr.dataset.own ?? null]));
    const ci = listed.find((k) => k.name === 'ci');
    assert.deepEqual(await shownKeys(), listed.map((k) => [k.id, k.status, k.id === ci.id ? null : 'true']));
    await page.screenshot({ path: screenshotPath('api-keys.png') });

    await page.click(`#keys tr[data-key="${ci.id}"] button[data-revoke]`);
    await page.locator('#revoke-dialog').waitFor({ state: 'visible' });
    assert.equal(await page.isVisible('#revoke-own'), false);
    await page.click('#revoke-submit');
    await page.locator('#revoke-dialog').waitFor({ state: 'hidden' });
    await page.locator(`#keys tr[data-key="${ci.id}"][data-status=revoked]`).waitFor();
    assert.equal((await user.list('/v1/api_keys', { status: 'revoked' })).map((k) => k.id).join(), ci.id);
    assert.equal((await new User(server, user.id, made).request('GET', '/v1/users/me')).status, 401);

    // the page's own key: the dialog warns, and the server's refusal is shown
    const own = listed.find((k) => k.id !== ci.id);
    await page.click(`#keys tr[data-key="${own.id}"] button[data-revoke]`);
    await page.locator('#revoke-own').waitFor({ state: 'visible' });
    await page.click('#revoke-submit');
    await page.locator('#revoke-problem code', { hasText: 'api_key_in_use' }).waitFor();
    assert.equal((await user.request('GET', '/v1/users/me')).status, 200);
    await page.click('#revoke-dialog [data-close]');
    await page.locator('#revoke-dialog').waitFor({ state: 'hidden' });
    assertClean(seen, [/status of 404/, /status of 409/]);
  });

  test('the CSV export holds every payment of the filter, quoted as RFC 4180 says and safe from formulas; the chart labels large amounts compactly', async () => {
    const exported = server.createAccount(user, 'USD', 'Export');
    const tricky = ['=HYPERLINK("http://127.0.0.1/x","click")', '+1 555', '-2', '@SUM(A1)', 'a, b and "c"\nnext line'];
    await pool(130, 8, (i) => user.pay(exported, 1000 + i, i % 10 === 7 ? 'tok_chargeDeclined' : 'tok_visa',
      i < tricky.length ? tricky[i] : `plain ${i}`));
    await user.pay(exported, 999999999999, 'tok_visa', 'the largest payment');
    // made after the page read the accounts: the search box finds it and shows it
    await page.fill('#search-id', exported.id);
    await page.press('#search-id', 'Enter');
    await page.locator(`#accounts button[data-account="${exported.id}"][aria-current=true]`).waitFor();
    await page.locator('#payments li').first().waitFor();
    await page.selectOption('#filter-status', 'succeeded');
    await page.locator('#payments li').first().waitFor();

    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-csv')]);
    assert.match(download.suggestedFilename(), new RegExp(`^payments-${exported.id}-.*\\.csv$`));
    const text = fs.readFileSync(await download.path(), 'utf8');
    await page.locator('#export-status[data-state=done]').waitFor();
    const [header, ...rows] = parseCsv(text);
    assert.deepEqual(header, ['id', 'created_at', 'status', 'currency', 'amount', 'refunded_amount', 'source',
      'description', 'order_id', 'processor_charge_id', 'capture_method', 'amount_captured', 'amount_released',
      'canceled_at', 'metadata']);
    const want = await user.payments(exported, { status: 'succeeded' });
    assert.equal(want.length, 131 - 13);
    assert.equal(rows.length, want.length);
    const guarded = (s) => (/^[=+\-@]/.test(s) ? `'${s}` : s);
    assert.deepEqual(rows, want.map((p) => [p.id, p.created_at, p.status, p.currency, String(p.amount),
      String(p.refunded_amount), p.source, guarded(p.description ?? ''), p.order_id ?? '', p.processor_charge_id ?? '',
      p.capture_method, String(p.amount_captured), String(p.amount_released), p.canceled_at ?? '', '']));
    // the quoting as bytes: quotes doubled inside a quoted field, the guard inside the quotes
    assert.ok(text.includes('"\'=HYPERLINK(""http://127.0.0.1/x"",""click"")"'));
    assert.ok(text.includes('"a, b and ""c""\nnext line"'));
    assert.ok(text.includes(",'+1 555,") && text.includes(",'-2,") && text.includes(",'@SUM(A1),"));
    assert.equal(await page.getAttribute('#export-status', 'data-rows'), String(want.length));

    // the chart: a $10B axis reads compactly and no label is cut at the left edge
    await page.selectOption('#chart-range', 'all');
    await page.locator('#chart-totals[data-state=ready]').waitFor();
    const labels = await page.$$eval('#chart text.y-label', (ts) => ts.map((t) => ({ text: t.textContent, x: t.getBBox().x })));
    assert.equal(labels.length, 3);
    for (const { text: label, x } of labels) {
      assert.match(label, /^\$(0\.00|\d+(\.\d)?[KMBT])$/, label);
      assert.ok(x >= 0, `"${label}" starts at ${x}, inside the chart`);
    }
    await page.locator('#chart').screenshot({ path: screenshotPath('volume-chart-large.png') });
    assertClean(seen, [/status of 404/, /status of 409/]);
  });
});

describe('test mode and live mode', () => {
  test('a test key shows the test-mode banner on every page, and the switch changes keys', async () => {
    const user = server.createUser('two-modes');
    const live = server.createAccount(user, 'USD', 'Live account');
    const testAccount = server.createAccount(user, 'EUR', 'Test account', 'test');
    const { page, seen } = await watchedPage(browser);
    await signIn(page, server, { key: user.testKey });
    const banner = page.locator('#mode-banner');
    const accountNames = () => page.$$eval('#accounts li', (lis) => lis.map((li) => li.textContent));
    await page.locator('#accounts li').first().waitFor();
    assert.ok((await accountNames()).every((t) => t.includes('Test account')), await accountNames());
    for (const view of ['payments', 'webhooks', 'events', 'keys']) {
      await goTo(page, view);
      await page.locator(`#view-${view}`).waitFor({ state: 'visible' });
      assert.ok(await banner.isVisible(), `the banner on ${view}`);
    }
    assert.equal(await page.textContent('#mode-label'), 'Test mode');
    await page.screenshot({ path: screenshotPath('test-mode.png') });

    // switching to live asks for a live key, refusing another test key
    await goTo(page, 'payments');
    await page.click('#mode-switch');
    await page.locator('#sign-in').waitFor({ state: 'visible' });
    await page.locator('#api-key').focus();
    await page.keyboard.type(user.testKey);
    await page.keyboard.press('Enter');
    await page.locator('#sign-in-error:has-text("paste a live key")').waitFor();
    await page.fill('#api-key', '');
    await page.locator('#api-key').focus();
    await page.keyboard.type(user.key);
    await page.keyboard.press('Enter');
    await page.locator('#dashboard').waitFor({ state: 'visible' });
    await banner.waitFor({ state: 'hidden' });
    assert.equal(await page.textContent('#mode-label'), 'Live mode');
    await page.locator('#accounts li').first().waitFor();
    assert.ok((await accountNames()).every((t) => t.includes('Live account')), await accountNames());
    for (const view of ['webhooks', 'events', 'keys']) {
      await goTo(page, view);
      assert.ok(!(await banner.isVisible()), `no banner on ${view} in live mode`);
    }

    // and back to test without a key: the tab kept it
    await page.click('#mode-switch');
    await banner.waitFor({ state: 'visible' });
    assert.equal(await page.textContent('#mode-label'), 'Test mode');
    await goTo(page, 'payments');
    await page.locator('#accounts li').first().waitFor();
    assert.ok((await accountNames()).every((t) => t.includes('Test account')), await accountNames());
    assert.ok(live.id && testAccount.id);
    assertClean(seen);
    await page.context().close();
  });
});
