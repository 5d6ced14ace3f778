// Webhook signatures: Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature) and
// payd's own Payd-Signature beside it (docs/webhooks.md). A signature covers the exact bytes
// payd sent, so verify the raw body: JSON parsed and serialized again differs in spacing, key
// order or number form, and no longer matches.

import { createHmac, timingSafeEqual } from 'node:crypto';

export class WebhookVerificationError extends Error {
  constructor(message) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

export const DEFAULT_TOLERANCE_SECONDS = 300;

/** The signing key of a `whsec_<base64>` secret (the prefix is optional, padding restored). */
export function secretKey(secret) {
  if (typeof secret !== 'string' || secret === '') throw new TypeError('a webhook secret is a non-empty string');
  let base64 = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret;
  base64 = base64.replace(/-/g, '+').replace(/_/g, '/');
  base64 += '='.repeat((4 - (base64.length % 4)) % 4);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) throw new TypeError('a webhook secret is whsec_ and base64');
  return Buffer.from(base64, 'base64');
}

const bytes = (payload) => {
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8');
  if (payload instanceof Uint8Array) return Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  throw new TypeError('the payload must be the raw body: a string or a Buffer, not parsed JSON');
};

/** The Standard Webhooks signature `v1,<base64>` of one message. */
export function signWebhook({ secret, id, timestamp, payload }) {
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(bytes(payload));
  return `v1,${mac.digest('base64')}`;
}

/** The Payd-Signature value `t=<timestamp>,v1=<hex>` (the key is the whole secret, whsec_ included). */
export function signPaydSignature({ secret, timestamp, payload }) {
  const mac = createHmac('sha256', Buffer.from(secret, 'utf8'));
  mac.update(`${timestamp}.`);
  mac.update(bytes(payload));
  return `t=${timestamp},v1=${mac.digest('hex')}`;
}

// Reads a header from a plain object (any case; Node's IncomingMessage.headers) or a Headers.
function header(headers, name) {
  if (!headers) return undefined;
  if (typeof headers.get === 'function') return headers.get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers))
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(', ') : value;
  return undefined;
}

const nowSeconds = (now) =>
  now === undefined ? Math.floor(Date.now() / 1000) : now instanceof Date ? Math.floor(now.getTime() / 1000) : now;

function checkTimestamp(text, now, toleranceSeconds) {
  if (!/^\d{1,15}$/.test(text ?? '')) throw new WebhookVerificationError('invalid or missing timestamp');
  // A captured request replayed later, or one claiming to come from the future, is refused.
  if (Math.abs(nowSeconds(now) - Number(text)) > toleranceSeconds)
    throw new WebhookVerificationError('timestamp outside the tolerance window');
}

function sameBytes(a, b) {
  return a.length === b.length && timingSafeEqual(a, b);
}

function verifyStandard({ secret, headers, body, toleranceSeconds, now }) {
  const id = header(headers, 'webhook-id');
  const signatures = header(headers, 'webhook-signature');
  if (!id) throw new WebhookVerificationError('missing webhook-id');
  if (!signatures) throw new WebhookVerificationError('missing webhook-signature');
  const timestamp = header(headers, 'webhook-timestamp');
  checkTimestamp(timestamp, now, toleranceSeconds);
  // Signed as the header's own text: the bytes the sender signed.
  const expected = Buffer.from(signWebhook({ secret, id, timestamp, payload: body }).slice(3), 'base64');
  // Several signatures (a secret being rotated): any v1 one that matches will do.
  for (const entry of signatures.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    if (sameBytes(expected, Buffer.from(entry.slice(comma + 1), 'base64'))) return;
  }
  throw new WebhookVerificationError('no matching signature');
}

function verifyPayd({ secret, headers, body, toleranceSeconds, now }) {
  const fields = {};
  const signatures = [];
  for (const part of header(headers, 'payd-signature').split(',')) {
    const eq = part.indexOf('=');
    const [name, value] = [part.slice(0, eq).trim(), part.slice(eq + 1).trim()];
    if (name === 'v1') signatures.push(value);
    else fields[name] = value;
  }
  checkTimestamp(fields.t, now, toleranceSeconds);
  const timestamp = fields.t;
  const expected = Buffer.from(signPaydSignature({ secret, timestamp, payload: body }).split('v1=')[1], 'hex');
  for (const signature of signatures)
    if (/^[0-9a-f]{64}$/i.test(signature) && sameBytes(expected, Buffer.from(signature, 'hex'))) return;
  throw new WebhookVerificationError('no matching signature');
}

/**
 * Verifies a delivery and returns the event it carries. `headers` are the request's (a plain
 * object as Node gives them, or a Headers); `payload` is the raw body, a string or a Buffer.
 * The Standard Webhooks headers are checked when present, else Payd-Signature. `now` (Unix
 * seconds, or a Date) is for tests. Throws a WebhookVerificationError when anything is wrong.
 */
export function verifyWebhook({ secret, headers, payload, toleranceSeconds = DEFAULT_TOLERANCE_SECONDS, now }) {
  const body = bytes(payload);
  const args = { secret, headers, body, toleranceSeconds, now };
  if (header(headers, 'webhook-signature') !== undefined || header(headers, 'webhook-id') !== undefined ||
      header(headers, 'webhook-timestamp') !== undefined || header(headers, 'payd-signature') === undefined)
    verifyStandard(args);
  else verifyPayd(args);
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new WebhookVerificationError('the payload is not JSON');
  }
}
