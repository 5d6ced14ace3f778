// Makes the screenshots of docs/dashboard.md: the real payd on a fresh database, a scene set
// through the API (an account with payments, a webhook endpoint with a delivery sent twice, a
// second API key, then a transfer to a second account, then a test account seen with the test
// key), and each page of the dashboard in
// Debian's Chromium. Run it again after a
// change to the page:
//
//   cmake --build build && node tests/browser/screenshots.mjs     (writes docs/images/dashboard-*.png)
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Payd, launchBrowser, signIn, sleep, watchedPage, webhookReceiver } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const OUT = process.env.SCREENSHOTS_DIR || path.resolve(here, '../../docs/images');
const shot = (name) => path.join(OUT, `dashboard-${name}.png`);

const server = await new Payd(['--rate-limit', '100000/s']).start();
const receiver = await webhookReceiver();
const browser = await launchBrowser();
try {
  fs.mkdirSync(OUT, { recursive: true });
  const user = server.createUser('demo');
  const account = server.createAccount(user, 'USD', 'Main');
  const hook = (await user.request('POST', '/v1/webhook_endpoints', {
    idempotencyKey: crypto.randomUUID(),
    body: { url: receiver.url, events: ['payment.succeeded', 'refund.succeeded'], description: 'Orders service' },
  })).data;
  const descriptions = ['Annual plan', 'Team seats', 'Order 1042', 'Order 1043', 'Consulting', 'Hardware'];
  for (let i = 0; i < 36; i++) {
    await user.pay(account, 125000 + ((i * 7919) % 40) * 250000, i % 9 === 4 ? 'tok_chargeDeclined' : 'tok_visa',
      descriptions[i % descriptions.length]);
  }
  const paid = (await user.payments(account)).find((p) => p.status === 'succeeded');
  await user.request('POST', `/v1/payments/${paid.id}/refunds`, { idempotencyKey: crypto.randomUUID(), body: { amount: 50000 } });
  await user.request('POST', '/v1/api_keys', { idempotencyKey: crypto.randomUUID(), body: { name: 'ci' } });
  await receiver.waitFor((d) => d.length >= 30, 'the deliveries');
  const firstEvent = receiver.deliveries[0].headers['webhook-id'];
  await user.request('POST', `/v1/events/${firstEvent}/redeliver`, { idempotencyKey: crypto.randomUUID(), body: { endpoint_id: hook.id } });
  await receiver.waitFor(() => receiver.of(firstEvent).length >= 2, 'the redelivery');

  const { page } = await watchedPage(browser);
  await page.goto(`${server.url}/`);
  await page.locator('#api-key').waitFor();
  await page.screenshot({ path: shot('sign-in') });

  await signIn(page, server, user);
  await page.locator('#chart-totals[data-state=ready]').waitFor();
  await page.locator('#list-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('payments') });

  await page.click(`#payments li[data-id="${paid.id}"] button`);
  await page.locator('#detail-refunds li[data-refund]').waitFor();
  await page.screenshot({ path: shot('payment-detail') });
  await page.keyboard.press('Escape');

  await page.click('nav.views button[data-view=webhooks]');
  await page.locator('#attempts-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('webhooks') });
  await page.click('#rotate-endpoint');
  await page.screenshot({ path: shot('webhook-rotate') });
  await page.keyboard.press('Escape');

  await page.click('nav.views button[data-view=events]');
  await page.locator('#events-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('events') });
  await page.click('#events li:first-child button');
  await page.locator('#object-dialog').waitFor({ state: 'visible' });
  await page.screenshot({ path: shot('event-json') });
  await page.keyboard.press('Escape');

  await page.click('nav.views button[data-view=keys]');
  await page.locator('#keys-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('api-keys') });

  await page.fill('#search-id', 'pay_0000000000000');
  await page.press('#search-id', 'Enter');
  await page.locator('#search-status[data-state=not-found]').waitFor();
  await page.screenshot({ path: shot('search'), clip: { x: 0, y: 0, width: 1280, height: 160 } });

  // balances, last, so the scenes above stay as they were: a second account and a transfer to it
  const reserve = server.createAccount(user, 'USD', 'Reserve');
  const moved = await user.request('POST', '/v1/transfers',
    { body: { biz_seq: 'reserve-2026-12', from_account: account.id, to_account: reserve.id, amount: 2500000, currency: 'USD' } });
  if (moved.status !== 201) throw new Error(`transfer: ${moved.status}`);
  await page.goto(`${server.url}/#account=${account.id}`);
  await page.reload();
  await page.locator('#account-balance[data-state=ready]').waitFor();
  await page.locator('#list-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('account-balance'), clip: { x: 0, y: 0, width: 1280, height: 420 } });
  await page.click('#balance-transactions');
  await page.locator('#txns-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('balance-transactions') });
  // test mode: the same user's test key, with a test account and one test payment
  const testAccount = server.createAccount(user, 'USD', 'Sandbox', 'test');
  const testPay = await user.request('POST', '/v1/payments', {
    key: user.testKey, idempotencyKey: crypto.randomUUID(),
    body: { account_id: testAccount.id, amount: 4200, currency: 'USD', source: 'tok_visa', description: 'Test order' },
  });
  if (testPay.status !== 201) throw new Error(`test payment: ${testPay.status}`);
  await page.click('#mode-switch');
  await page.locator('#sign-in').waitFor({ state: 'visible' });
  await page.fill('#api-key', user.testKey);
  await page.keyboard.press('Enter');
  await page.locator('#mode-banner').waitFor({ state: 'visible' });
  await page.click('nav.views button[data-view=payments]');
  await page.locator('#list-status[data-state=end]').waitFor();
  await page.screenshot({ path: shot('test-mode'), clip: { x: 0, y: 0, width: 1280, height: 560 } });
  await sleep(0);
  console.log(`screenshots in ${OUT}`);
} finally {
  await browser.close();
  await receiver.close();
  await server.stop();
}
