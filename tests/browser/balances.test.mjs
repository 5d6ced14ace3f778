// Balances in the dashboard (§18) in a real browser: an account's available and pending books
// equal GET /v1/accounts/{id}/balance after payments, a refund and a transfer; the balance
// transactions page lists exactly the API's rows for each filter, page after page; each row
// opens its source; the search box finds a txn_ id. Debian's Chromium, headless, against the
// real payd on a fresh database (tests/browser/harness.mjs).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Payd, launchBrowser, screenshotPath, signIn, watchedPage } from './harness.mjs';

let server, browser;

before(async () => {
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
  assert.deepEqual(seen.requests.filter((u) => new URL(u).origin !== origin), [], 'requests to another origin');
  assert.deepEqual(seen.pageErrors, [], 'uncaught exceptions');
  assert.deepEqual(seen.consoleErrors.filter((text) => !allowedConsole.some((re) => re.test(text))), [], 'console errors');
}

async function pool(n, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

// What the page shows for an amount: Intl's currency format at the currency's exponent.
function money(minor, currency, exponent) {
  const sign = minor < 0 ? '-' : '';
  const digits = String(Math.abs(minor)).padStart(exponent + 1, '0');
  const decimal = exponent ? `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}` : `${sign}${digits}`;
  return new Intl.NumberFormat('en-US', {
    style: 'currency', currency, minimumFractionDigits: exponent, maximumFractionDigits: exponent,
  }).format(decimal);
}

const shownRows = (page) => page.$$eval('#txns li', (lis) => lis.map((li) => ({
  id: li.dataset.id, type: li.dataset.type, amount: Number(li.dataset.amount), account: li.dataset.account,
  source: li.dataset.source, text: li.querySelector('.amount').textContent,
})));

// Reads the list to its end the way a reader does: scrolling, and "Load more" when it is there.
async function readToEnd(page) {
  await page.locator('#txns-status[data-state=more], #txns-status[data-state=end]').waitFor();
  for (let step = 0; step < 40 && (await page.getAttribute('#txns-status', 'data-state')) !== 'end'; step++) {
    const shown = await page.locator('#txns li').count();
    if (step % 2) await page.click('#txns-more').catch(() => {});
    else await page.mouse.wheel(0, 5000);
    await page.waitForFunction((n) => document.querySelectorAll('#txns li').length > n
      || document.querySelector('#txns-status').dataset.state === 'end', shown);
  }
  assert.equal(await page.getAttribute('#txns-status', 'data-state'), 'end');
  return shownRows(page);
}

const apiRows = (rows) => rows.map((t) => ({ id: t.id, type: t.type, amount: t.amount, account: t.account_id, source: t.source }));
const withoutText = (rows) => rows.map(({ text, ...rest }) => rest); // eslint-disable-line no-unused-vars

describe('balances', () => {
  let user, main, reserve, kwd, page, seen, payments, refund, transfer;

  before(async () => {
    user = server.createUser('ledger');
    main = server.createAccount(user, 'USD', 'Main');
    reserve = server.createAccount(user, 'USD', 'Reserve');
    kwd = server.createAccount(user, 'KWD', 'Kuwait');
    // more than a page (50) of lines on Main: charges, a refund and a transfer's debit
    await pool(56, 8, (i) => user.pay(main, 1000 + i * 37, i % 14 === 5 ? 'tok_chargeDeclined' : 'tok_visa'));
    await pool(3, 3, (i) => user.pay(reserve, 500 + i));
    await user.pay(kwd, 1234);
    payments = (await user.payments(main)).filter((p) => p.status === 'succeeded');
    refund = (await user.request('POST', `/v1/payments/${payments[3].id}/refunds`,
      { idempotencyKey: crypto.randomUUID(), body: { amount: 250 } })).data;
    assert.equal(refund.object, 'refund');
    transfer = (await user.request('POST', '/v1/transfers', {
      body: { biz_seq: 'move-1', from_account: main.id, to_account: reserve.id, amount: 4321, currency: 'USD' },
    })).data;
    assert.equal(transfer.status, 'succeeded');
    ({ page, seen } = await watchedPage(browser));
    await signIn(page, server, user, `#account=${main.id}`);
  });

  after(async () => {
    await page?.context().close();
  });

  test("an account's available and pending balance are the API's, formatted by the currency's exponent", async () => {
    for (const [account, exponent] of [[main, 2], [reserve, 2], [kwd, 3]]) {
      await page.click(`#accounts button[data-account="${account.id}"]`);
      await page.locator(`#account-balance[data-state=ready][data-account="${account.id}"]`).waitFor();
      const api = (await user.request('GET', `/v1/accounts/${account.id}/balance`)).data;
      assert.equal(api.object, 'balance');
      assert.equal(Number(await page.getAttribute('#balance-available', 'data-amount')), api.available);
      assert.equal(Number(await page.getAttribute('#balance-pending', 'data-amount')), api.pending);
      assert.equal(await page.textContent('#balance-available'), money(api.available, api.currency, exponent));
      assert.equal(await page.textContent('#balance-pending'), money(api.pending, api.currency, exponent));
      if (account === kwd) assert.equal(api.available, 1234);
      if (account === main) {
        const charged = payments.reduce((sum, p) => sum + p.amount, 0);
        assert.equal(api.available, charged - 250 - 4321, 'payments − the refund − the transfer');
        await page.locator('#account-view').screenshot({ path: screenshotPath('account-balance.png') });
      }
      if (account === reserve) assert.equal(api.available, 500 + 501 + 502 + 4321);
    }
    // a refund made from the page moves the balance shown
    await page.click(`#accounts button[data-account="${main.id}"]`);
    await page.locator(`#account-balance[data-state=ready][data-account="${main.id}"]`).waitFor();
    const before = Number(await page.getAttribute('#balance-available', 'data-amount'));
    await page.click(`#payments li[data-id="${payments[0].id}"] button`);
    await page.locator('#refund-form').waitFor({ state: 'visible' });
    await page.fill('#refund-amount', '1.00');
    await page.click('#refund-submit');
    await page.waitForFunction((b) => Number(document.querySelector('#balance-available')?.dataset.amount) === b - 100, before);
    await page.keyboard.press('Escape');
    const api = (await user.request('GET', `/v1/accounts/${main.id}/balance`)).data;
    assert.equal(Number(await page.getAttribute('#balance-available', 'data-amount')), api.available);
    assertClean(seen);
  });

  test("the balance transactions page lists exactly the API's rows, for each filter", async () => {
    // from the account: its rows only
    await page.click(`#accounts button[data-account="${main.id}"]`);
    await page.locator(`#account-balance[data-state=ready][data-account="${main.id}"]`).waitFor();
    await page.click('#balance-transactions');
    await page.locator('#view-balances').waitFor({ state: 'visible' });
    assert.equal(await page.inputValue('#txn-account'), main.id);
    const wantMain = await user.list('/v1/balance_transactions', { account_id: main.id });
    assert.ok(wantMain.length > 50, 'more than one page');
    let shown = await readToEnd(page);
    assert.deepEqual(withoutText(shown), apiRows(wantMain));
    for (const [i, t] of wantMain.entries()) assert.equal(shown[i].text, money(t.amount, 'USD', 2));
    assert.ok(shown.some((r) => r.type === 'refund' && r.amount === -250 && r.source === refund.id));
    assert.ok(shown.some((r) => r.type === 'transfer' && r.amount === -4321 && r.source === transfer.id));

    // every account
    await page.selectOption('#txn-account', '');
    shown = await readToEnd(page);
    assert.deepEqual(withoutText(shown), apiRows(await user.list('/v1/balance_transactions')));
    assert.ok(shown.some((r) => r.account === kwd.id && r.text === money(1234, 'KWD', 3)));

    // by type: both sides of the transfer; the refunds; no authorizations yet
    for (const [type, count] of [['transfer', 2], ['refund', 2], ['authorization', 0]]) {
      await page.selectOption('#txn-type', type);
      shown = await readToEnd(page);
      const want = await user.list('/v1/balance_transactions', { type });
      assert.equal(want.length, count);
      assert.deepEqual(withoutText(shown), apiRows(want));
    }
    assert.equal(await page.textContent('#txns-status'), 'No balance transactions for these filters.');

    // type and account together
    await page.selectOption('#txn-type', 'transfer');
    await page.selectOption('#txn-account', reserve.id);
    shown = await readToEnd(page);
    assert.deepEqual(withoutText(shown), apiRows(await user.list('/v1/balance_transactions', { type: 'transfer', account_id: reserve.id })));
    assert.deepEqual(shown.map((r) => r.amount), [4321]);

    // UTC days: today holds every line; a To day before it, none
    await page.selectOption('#txn-type', '');
    await page.selectOption('#txn-account', '');
    const today = new Date().toISOString().slice(0, 10);
    await page.fill('#txn-from', today);
    shown = await readToEnd(page);
    assert.deepEqual(withoutText(shown), apiRows(await user.list('/v1/balance_transactions', { created_gte: `${today}T00:00:00Z` })));
    assert.ok(shown.length > 50);
    await page.fill('#txn-from', '');
    await page.fill('#txn-to', '2026-01-01');
    shown = await readToEnd(page);
    assert.deepEqual(shown, []);
    await page.fill('#txn-to', '');
    await page.locator('#txns-status[data-state=more]').waitFor();

    // a reload stays on the page
    await page.reload();
    await page.locator('#view-balances').waitFor({ state: 'visible' });
    await page.locator('#txns-status[data-state=more]').waitFor();
    assertClean(seen);
  });

  test('on a phone-sized screen the balance and the list fit, and a source opens from the keyboard', async () => {
    const phone = await watchedPage(browser, { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
    await signIn(phone.page, server, user, `#account=${main.id}`);
    await phone.page.locator(`#account-balance[data-state=ready][data-account="${main.id}"]`).waitFor();
    const wide = () => phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok((await wide()) <= 0, `no sideways scrolling on the payments page (${await wide()}px too wide)`);
    await phone.page.click('#balance-transactions');
    await phone.page.locator('#txns-status[data-state=more]').waitFor();
    assert.ok((await wide()) <= 0, `no sideways scrolling on the balance transactions page (${await wide()}px too wide)`);
    await phone.page.screenshot({ path: screenshotPath('balance-transactions-phone.png') });
    // Tab reaches the first row's source; Enter opens it
    const first = (await user.list('/v1/balance_transactions', { account_id: main.id }))[0];
    await phone.page.evaluate(() => document.querySelector('#txn-to').focus());
    for (let i = 0; i < 10 && !(await phone.page.evaluate(() => document.activeElement?.classList.contains('source'))); i++) {
      await phone.page.keyboard.press('Tab');
    }
    assert.equal(await phone.page.evaluate(() => document.activeElement.textContent), first.source);
    await phone.page.keyboard.press('Enter');
    await phone.page.locator('#object-dialog').waitFor({ state: 'visible' });
    assert.equal(JSON.parse(await phone.page.textContent('#object-json')).id, first.source);
    assertClean(phone.seen);
    await phone.page.context().close();
  });

  test('each row opens its source, and the search box finds a txn_ id', async () => {
    await page.selectOption('#txn-account', main.id);
    await page.selectOption('#txn-type', '');
    await readToEnd(page);
    await page.screenshot({ path: screenshotPath('balance-transactions.png') });
    const rows = await user.list('/v1/balance_transactions', { account_id: main.id });
    const charge = rows.find((t) => t.type === 'charge');
    const byRefund = rows.find((t) => t.source === refund.id);
    const byTransfer = rows.find((t) => t.source === transfer.id);

    await page.click(`#txns li[data-id="${charge.id}"] button.source`);
    await page.locator('#detail-dialog').waitFor({ state: 'visible' });
    await page.locator('#detail-fields code', { hasText: charge.source }).waitFor();
    await page.keyboard.press('Escape');
    await page.locator('#detail-dialog').waitFor({ state: 'hidden' });

    for (const [t, title] of [[byTransfer, `Transfer ${transfer.id}`], [byRefund, `Refund ${refund.id}`]]) {
      await page.click(`#txns li[data-id="${t.id}"] button.source`);
      await page.locator('#object-dialog').waitFor({ state: 'visible' });
      assert.equal(await page.textContent('#object-h'), title);
      assert.equal(JSON.parse(await page.textContent('#object-json')).id, t.source);
      await page.keyboard.press('Escape');
      await page.locator('#object-dialog').waitFor({ state: 'hidden' });
    }

    await page.fill('#search-id', byRefund.id);
    await page.press('#search-id', 'Enter');
    await page.locator('#object-dialog').waitFor({ state: 'visible' });
    assert.equal(await page.textContent('#object-h'), `Balance transaction ${byRefund.id}`);
    assert.deepEqual(JSON.parse(await page.textContent('#object-json')),
      (await user.request('GET', `/v1/balance_transactions/${byRefund.id}`)).data);
    await page.locator('#object-actions button', { hasText: 'Open its refund' }).click();
    await page.locator('#object-h', { hasText: `Refund ${refund.id}` }).waitFor();
    await page.keyboard.press('Escape');

    await page.fill('#search-id', 'txn_0000000000000');
    await page.press('#search-id', 'Enter');
    await page.locator('#search-status[data-state=not-found]').waitFor();
    assert.equal(await page.textContent('#search-status'), 'No balance transaction txn_0000000000000 found.');
    assertClean(seen, [/status of 404/]);
  });
});
