// The browser tests' harness: the real payd on a fresh SQLite database and a free port, users
// made with `payd user create`, an HTTP client for setting the scene, and Debian's Chromium
// driven by playwright-core (never a downloaded browser). Everything listens on loopback only.
import { execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
export const BUILD = process.env.PAYD_BUILD || path.resolve(here, '../../build');
export const PAYD = process.env.PAYD_BIN || path.join(BUILD, 'payd');
export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
export const SCREENSHOTS = path.join(BUILD, 'browser-screenshots');

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Payd {
  constructor(args = []) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'payd-browser-'));
    this.db = path.join(this.dir, 'payd.db');
    this.args = args;
  }

  async start() {
    this.port = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.logPath = path.join(this.dir, 'payd.log');
    const log = fs.openSync(this.logPath, 'a');
    this.proc = spawn(PAYD, ['serve', '--listen', `127.0.0.1:${this.port}`, '--db', this.db, ...this.args],
      { stdio: ['ignore', log, log] });
    const deadline = Date.now() + 15000;
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`payd exited: ${this.log().slice(-2000)}`);
      try {
        if ((await fetch(`${this.url}/healthz`)).ok) return this;
      } catch {
        await sleep(50);
      }
    }
    throw new Error('payd did not become healthy');
  }

  log() {
    return fs.readFileSync(this.logPath, 'utf8');
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((resolve) => this.proc.once('exit', resolve));
      this.proc.kill('SIGTERM');
      await Promise.race([exited, sleep(15000)]);
      if (this.proc.exitCode === null) this.proc.kill('SIGKILL');
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  // `payd user create`, as the API tests do; rateLimit such as '1/s'.
  createUser(name, rateLimit) {
    const args = ['user', 'create', name, '--db', this.db];
    if (rateLimit) args.push('--rate-limit', rateLimit);
    const out = JSON.parse(execFileSync(PAYD, args, { encoding: 'utf8' }));
    const user = new User(this, out.user_id, out.api_key);
    user.testKey = out.test_api_key; // the same user's test mode (docs/modes.md)
    return user;
  }

  // `payd account create`: no HTTP, so no rate limit.
  createAccount(user, currency = 'USD', name = undefined, mode = 'live') {
    const args = ['account', 'create', '--user', user.id, '--currency', currency, '--db', this.db, '--mode', mode];
    if (name) args.push('--name', name);
    return JSON.parse(execFileSync(PAYD, args, { encoding: 'utf8' }));
  }
}

export class User {
  constructor(server, id, key) {
    Object.assign(this, { server, id, key });
  }

  // A 429 is waited out as its Retry-After says (a rate-limited user's checks share its limit).
  async request(method, urlPath, { body, idempotencyKey, key } = {}) {
    const headers = { Authorization: `Bearer ${key || this.key}` }; // key: another of the user's (its test key)
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (idempotencyKey) headers['Idempotency-Key'] = idempotencyKey;
    for (let attempt = 0; ; attempt++) {
      const resp = await fetch(`${this.server.url}${urlPath}`, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await resp.text();
      if (resp.status === 429 && attempt < 30) {
        await sleep(Number(resp.headers.get('Retry-After') || 1) * 1000);
        continue;
      }
      return { status: resp.status, headers: resp.headers, data: text ? JSON.parse(text) : null };
    }
  }

  async pay(account, amount, source = 'tok_visa', description = undefined) {
    const r = await this.request('POST', '/v1/payments', {
      idempotencyKey: crypto.randomUUID(),
      body: { account_id: account.id, amount, currency: account.currency, source, ...(description ? { description } : {}) },
    });
    if (r.status !== 201 && r.status !== 402) throw new Error(`payment: ${r.status} ${JSON.stringify(r.data)}`);
    return r.data;
  }

  // Every payment of the account, newest first, as the API lists them.
  async payments(account, query = {}) {
    return this.list(`/v1/accounts/${account.id}/payments`, query);
  }

  // Every item of a list, following next_cursor.
  async list(urlPath, query = {}) {
    const all = [];
    let cursor = null;
    do {
      const q = new URLSearchParams({ ...query, limit: '100' });
      if (cursor) q.set('cursor', cursor);
      const r = await this.request('GET', `${urlPath}?${q}`);
      if (r.status !== 200) throw new Error(`list ${urlPath}: ${r.status}`);
      all.push(...r.data.data);
      cursor = r.data.has_more ? r.data.next_cursor : null;
    } while (cursor);
    return all;
  }
}

// A webhook receiver on loopback: answers 200 and keeps every delivery (headers and raw body).
export async function webhookReceiver() {
  const deliveries = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      deliveries.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.end('ok');
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/hooks`,
    deliveries,
    // the deliveries of one event id
    of: (eventId) => deliveries.filter((d) => d.headers['webhook-id'] === eventId),
    async waitFor(predicate, what, ms = 15000) {
      const deadline = Date.now() + ms;
      while (!predicate(deliveries)) {
        if (Date.now() > deadline) throw new Error(`no delivery: ${what}`);
        await sleep(50);
      }
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

// Does the Standard Webhooks signature of a delivery match this secret (any of its v1 parts)?
export function signedWith(secret, delivery) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const h = delivery.headers;
  const expected = crypto.createHmac('sha256', key)
    .update(`${h['webhook-id']}.${h['webhook-timestamp']}.${delivery.body}`).digest('base64');
  return h['webhook-signature'].split(' ').some((part) => part === `v1,${expected}`);
}

// RFC 4180: rows of fields, quoted fields with doubled quotes, CRLF line ends.
export function parseCsv(text) {
  const rows = [];
  let row = [], field = '', i = 0, quoted = false;
  while (i < text.length) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i += 2;
        continue;
      }
      if (c === '"') quoted = false;
      else field += c;
      i++;
      continue;
    }
    if (c === '"') quoted = true;
    else if (c === ',') {
      row.push(field);
      field = '';
    } else if (c === '\r' && text[i + 1] === '\n') {
      row.push(field);
      rows.push(row);
      row = [];
      field = '';
      i++;
    } else field += c;
    i++;
  }
  if (field || row.length) throw new Error('the CSV does not end with CRLF');
  return rows;
}

export function launchBrowser() {
  // launch() gives every browser a fresh, temporary user-data-dir of its own
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}

// A page that records what the test must check on every page: each request's URL, console
// errors and uncaught exceptions.
export async function watchedPage(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, ...options });
  const page = await context.newPage();
  const seen = { requests: [], consoleErrors: [], pageErrors: [] };
  page.on('request', (r) => seen.requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') seen.consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => seen.pageErrors.push(String(e)));
  return { context, page, seen };
}

// Signs in the way a person does: type the key, press Enter.
export async function signIn(page, server, user, fragment = '') {
  await page.goto(`${server.url}/${fragment}`);
  await page.locator('#api-key').focus();
  await page.keyboard.type(user.key);
  await page.keyboard.press('Enter');
  await page.locator('#dashboard').waitFor({ state: 'visible' });
}

export function screenshotPath(name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, name);
}
