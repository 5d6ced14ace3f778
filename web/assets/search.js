// The search box: an id's prefix says which route reads it, so one request finds the object (or
// a clear "not found"). What each kind opens is up to the page (app.js passes the openers).
import { ApiError, api, listAll } from './api.js';
import { $ } from './dom.js';

// A refund has no route of its own: it is found in the refund.succeeded events (kept for the
// event retention, 30 days by default), reading at most this many pages of 100.
const REFUND_EVENT_PAGES = 20;

const KINDS = [
  { prefix: 'pay_', name: 'payment', path: (id) => `/v1/payments/${id}` },
  { prefix: 're_', name: 'refund', find: findRefund },
  { prefix: 'acct_', name: 'account', path: (id) => `/v1/accounts/${id}` },
  { prefix: 'ord_', name: 'order', path: (id) => `/v1/orders/${id}` },
  { prefix: 'tr_', name: 'transfer', path: (id) => `/v1/transfers/${id}` },
  { prefix: 'evt_', name: 'event', path: (id) => `/v1/events/${id}` },
  { prefix: 'we_', name: 'webhook endpoint', path: (id) => `/v1/webhook_endpoints/${id}` },
  { prefix: 'key_', name: 'API key', find: findKey },
  { prefix: 'txn_', name: 'balance transaction', path: (id) => `/v1/balance_transactions/${id}` },
];

export const ID_PREFIXES = KINDS.map((k) => k.prefix);

async function findRefund(id) {
  let cursor = null;
  for (let pages = 0; pages < REFUND_EVENT_PAGES; pages++) {
    const { data } = await api('GET', '/v1/events', { query: { type: 'refund.succeeded', limit: 100, cursor } });
    const hit = data.data.find((e) => e.data?.object?.id === id);
    if (hit) return hit.data.object;
    if (!data.has_more) return null;
    cursor = data.next_cursor;
  }
  return null;
}

async function findKey(id) {
  return (await listAll('/v1/api_keys')).find((k) => k.id === id) || null;
}

// Resolves with {kind, object}, or throws Error with a message to show.
export async function lookUp(text) {
  const id = text.trim();
  const kind = KINDS.find((k) => id.startsWith(k.prefix));
  if (!kind) throw new Error(`"${id}" is not an id payd knows: ids start with ${ID_PREFIXES.join(', ')}`);
  let object = null;
  try {
    object = kind.find ? await kind.find(id) : (await api('GET', kind.path(id))).data;
  } catch (err) {
    // a malformed id is refused 400 by the route; to the reader both mean the same
    if (!(err instanceof ApiError) || (err.status !== 404 && err.status !== 400)) throw err;
  }
  if (!object) throw new Error(`No ${kind.name} ${id} found.`);
  return { kind: kind.name, object };
}

// Opens an object by its id as the search box would (a balance transaction's source), showing
// the id in the box and, when it cannot be found, the search's own message.
let find = async () => {};
export function openById(id) {
  $('#search-id').value = id;
  return find(id);
}

export function wireSearch(openers) {
  const form = $('#search');
  const status = $('#search-status');
  const say = (text, state) => {
    status.textContent = text;
    status.dataset.state = state;
    status.hidden = !text;
  };
  $('#search-id').addEventListener('input', () => say('', 'idle'));
  // the answer floats over the page below it: any click elsewhere, or Escape, puts it away
  document.addEventListener('pointerdown', (event) => {
    if (!form.contains(event.target)) say('', 'idle');
  });
  form.addEventListener('keydown', (event) => {
    if (event.key === 'Escape') say('', 'idle');
  });
  find = async (text) => {
    say('Looking…', 'looking');
    try {
      const found = await lookUp(text);
      say('', 'found');
      openers[found.kind](found.object);
    } catch (err) {
      say(err.message, 'not-found');
    }
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const text = $('#search-id').value;
    if (!text.trim()) return;
    await find(text);
  });
}
