// The dashboard in a real browser (§16): Debian's Chromium, headless, driven by playwright-core
// against the real payd on a fresh database. Every page checks that no request left for another
// origin and that the console showed no error, except the browser's own line for a failed
// response a test provokes on purpose (a 402 decline, a 409 refusal, a 429, a cut connection).
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import {
  Payd, launchBrowser, screenshotPath, signIn, sleep, watchedPage,
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
