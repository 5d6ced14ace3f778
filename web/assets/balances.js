// Balances (§18): an account's available and pending books (GET /v1/accounts/{id}/balance), and
// the balance transactions page, the ledger's lines on the user's accounts (GET
// /v1/balance_transactions), 50 at a time by following next_cursor as the reader scrolls, as the
// payments list does, filtered by account, type and UTC days. Each row opens its source (a
// payment, a refund or a transfer) the way the search box would.
import { api, listAll } from './api.js';
import { $, h } from './dom.js';
import { money, rfc3339, statusLabel, when, DAY_MS } from './format.js';
import { problemNodes } from './forms.js';

const PAGE_SIZE = 50;
// the ledger's line types (docs/ledger.md, "Postings")
export const TXN_TYPES = ['charge', 'authorization', 'capture', 'release', 'refund', 'transfer'];

// ---- an account's balance, on the payments page ----

let balanceGeneration = 0;

export async function loadBalance(account, onOpenTransactions) {
  const el = $('#account-balance');
  const generation = ++balanceGeneration;
  el.dataset.state = 'loading';
  el.dataset.account = account.id;
  try {
    const { data } = await api('GET', `/v1/accounts/${account.id}/balance`);
    if (generation !== balanceGeneration) return;
    el.dataset.available = data.available;
    el.dataset.pending = data.pending;
    el.replaceChildren(
      h('div', {}, h('dt', {}, 'Available'),
        h('dd', { id: 'balance-available', 'data-amount': data.available }, money(data.available, data.currency))),
      h('div', {}, h('dt', {}, 'Pending'),
        h('dd', { id: 'balance-pending', 'data-amount': data.pending }, money(data.pending, data.currency))),
      h('div', { class: 'balance-link' }, h('button', {
        type: 'button', id: 'balance-transactions', class: 'quiet', onclick: () => onOpenTransactions(account.id),
      }, 'Balance transactions')));
    el.dataset.state = 'ready';
  } catch (err) {
    if (generation !== balanceGeneration) return;
    el.replaceChildren(h('div', { class: 'problem' }, ...problemNodes(err)));
    el.dataset.state = 'error';
  }
}

// ---- the balance transactions page ----

const state = { generation: 0, cursor: null, hasMore: false, loading: false, accounts: new Map(), ids: new Set() };
let openSource = () => {};

function filters() {
  const from = $('#txn-from').value;
  const to = $('#txn-to').value;
  return {
    account_id: $('#txn-account').value || undefined,
    type: $('#txn-type').value || undefined,
    created_gte: from ? `${from}T00:00:00Z` : undefined,
    // "to" names a whole day: the list ends where the next day starts
    created_lt: to ? rfc3339(Date.parse(`${to}T00:00:00Z`) + DAY_MS) : undefined,
  };
}

export function sourceKind(id) {
  if (id.startsWith('pay_')) return 'payment';
  if (id.startsWith('re_')) return 'refund';
  if (id.startsWith('tr_')) return 'transfer';
  return 'source';
}

function txnRow(t) {
  const account = state.accounts.get(t.account_id);
  const sign = t.amount < 0 ? 'debit' : 'credit';
  return h('li', {
    'data-id': t.id, 'data-type': t.type, 'data-amount': t.amount, 'data-account': t.account_id, 'data-source': t.source,
  },
  h('div', { class: 'row txn' },
    h('span', { class: `amount ${sign}` }, money(t.amount, t.currency)),
    h('span', { class: `badge ${t.type}` }, statusLabel(t.type)),
    h('span', { class: 'what' },
      h('button', {
        type: 'button',
        class: 'link source',
        'aria-label': `Open the ${sourceKind(t.source)} ${t.source}`,
        onclick: () => openSource(t.source),
      }, t.source),
      ' ', account ? `${account.name || account.currency} · ` : '', h('code', {}, t.id)),
    h('time', { datetime: t.created_at }, when(t.created_at))));
}

function setStatus(text, stateName, ...extra) {
  const status = $('#txns-status');
  status.replaceChildren(text, ...extra);
  status.dataset.state = stateName;
}

function sentinelNearView() {
  const r = $('#txns-sentinel').getBoundingClientRect();
  return r.top < window.innerHeight + 600;
}

async function loadMore() {
  if (state.loading || !state.hasMore || $('#view-balances').hidden) return;
  const generation = state.generation;
  state.loading = true;
  setStatus('Loading…', 'loading');
  let page;
  try {
    ({ data: page } = await api('GET', '/v1/balance_transactions', {
      query: { ...filters(), limit: PAGE_SIZE, cursor: state.cursor },
    }));
  } catch (err) {
    if (generation !== state.generation) return;
    state.loading = false;
    setStatus('', 'error', ...problemNodes(err), ' ', h('button', { type: 'button', onclick: () => loadMore() }, 'Try again'));
    return;
  }
  if (generation !== state.generation) return; // the filters changed meanwhile
  state.loading = false;
  const list = $('#txns');
  for (const t of page.data) {
    if (state.ids.has(t.id)) continue; // keyset pages never overlap; never show one twice anyway
    state.ids.add(t.id);
    list.append(txnRow(t));
  }
  const shown = state.ids.size;
  state.cursor = page.next_cursor;
  state.hasMore = Boolean(page.has_more && page.next_cursor);
  list.removeAttribute('aria-busy');
  if (state.hasMore) {
    setStatus(`${shown} balance transactions shown; more load as you scroll.`, 'more',
      h('button', { type: 'button', id: 'txns-more', class: 'quiet', onclick: () => loadMore() }, 'Load more'));
    if (sentinelNearView()) setTimeout(() => loadMore(), 0);
  } else {
    setStatus(shown ? `All ${shown} balance transactions shown.` : 'No balance transactions for these filters.', 'end');
  }
}

function restart() {
  state.generation++;
  state.cursor = null;
  state.hasMore = true;
  state.loading = false;
  state.ids.clear();
  $('#txns').replaceChildren();
  $('#txns').setAttribute('aria-busy', 'true');
  loadMore();
}

async function loadAccountChoices() {
  const select = $('#txn-account');
  const chosen = select.value;
  let accounts;
  try {
    accounts = await listAll('/v1/accounts');
  } catch {
    return; // the filter keeps what it had; the list itself reports the problem
  }
  state.accounts = new Map(accounts.map((a) => [a.id, a]));
  select.replaceChildren(h('option', { value: '' }, 'All accounts'),
    ...accounts.map((a) => h('option', { value: a.id }, `${a.name || a.currency} (${a.id})`)));
  select.value = state.accounts.has(chosen) ? chosen : '';
}

// An account's "Balance transactions" button asks for its rows only: the next showing of the
// page starts with that account chosen and no type filter.
let wantedAccount = null;
export function presetAccount(accountId) {
  wantedAccount = accountId;
}

// The page is shown (from the nav, the fragment, or an account's button): a fresh first page.
export async function showBalanceTransactions() {
  await loadAccountChoices();
  if (wantedAccount !== null) {
    $('#txn-account').value = state.accounts.has(wantedAccount) ? wantedAccount : '';
    $('#txn-type').value = '';
    wantedAccount = null;
  }
  restart();
}

export function wireBalanceTransactions(opener) {
  openSource = opener;
  $('#txn-type').append(...TXN_TYPES.map((t) => h('option', { value: t }, statusLabel(t))));
  $('#txn-filters').addEventListener('change', restart);
  $('#txn-filters').addEventListener('submit', (event) => event.preventDefault());
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) loadMore();
  }, { rootMargin: '600px 0px' }).observe($('#txns-sentinel'));
}
