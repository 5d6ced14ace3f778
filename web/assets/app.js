// The dashboard (§16): sign in with an API key, accounts with balances, the payments list, a
// payment's detail with its refunds, forms to pay and refund, the volume chart and the CSV
// export; the other pages (webhooks, events, API keys) live in their own modules, and the search
// box finds any object by id.
import { api, listAll, onRateLimitWaits, session, setUnauthorizedHandler } from './api.js';
import { $, h, show } from './dom.js';
import { money, parseAmount, statusLabel, when, rfc3339, DAY_MS } from './format.js';
import { IdempotentForm, InputError, problemNodes } from './forms.js';
import { PaymentList } from './payments.js';
import { rangeFor, renderChart } from './chart.js';
import { download, exportPayments } from './csv.js';
import { showObject } from './dialogs.js';
import { registerView, showView, wireNavigation } from './views.js';
import { loadEndpoints } from './webhooks.js';
import { showEvents } from './events.js';
import { loadKeys } from './keys.js';
import { openById, wireSearch } from './search.js';
import { loadBalance, presetAccount, showBalanceTransactions, sourceKind, wireBalanceTransactions } from './balances.js';

// The page's own settings live in the fragment, which never reaches the server:
// #account=acct_… (the account shown), view=webhooks|events|balances|keys (the page shown) and poll=MS (how often the list looks for new payments,
// at least 500 ms; default 5 s).
const fragment = new URLSearchParams(location.hash.slice(1));
const POLL_MS = Math.max(500, Number(fragment.get('poll')) || 5000);

const state = { user: null, accounts: [], account: null, payment: null };

// ---- the page-wide notice: 429 waits ----

const notice = $('#notice');
let noticeTimer = null;
onRateLimitWaits((waits) => {
  clearInterval(noticeTimer);
  const render = () => {
    if (!waits.length) {
      notice.hidden = true;
      delete notice.dataset.kind;
      return;
    }
    const until = Math.max(...waits.map((w) => w.until));
    const seconds = Math.max(0, Math.ceil((until - Date.now()) / 1000));
    notice.dataset.kind = 'rate-limited';
    notice.textContent = `Rate limited (429 ${waits[0].code}): waiting ${seconds} s before retrying, as the server's Retry-After asks`
      + (waits.length > 1 ? ` (${waits.length} requests waiting).` : '.');
    notice.hidden = false;
  };
  render();
  if (waits.length) noticeTimer = setInterval(render, 250);
});

// ---- sign in and out ----

const signInForm = $('#sign-in-form');
const signInError = $('#sign-in-error');

// Sign-in asks for a key of this mode when set (a switch to a mode whose key the tab lacks).
let wantedMode = null;

function showSignIn(message) {
  list.stop();
  show($('#mode-banner'), false);
  state.user = null;
  state.account = null;
  show($('#dashboard'), false);
  show($('#who'), false);
  show($('#search'), false);
  show($('#sign-in'), true);
  signInError.replaceChildren(...(message || []));
  show(signInError, Boolean(message));
  $('#api-key').value = '';
  $('#api-key').focus();
}

signInForm.addEventListener('submit', async (event) => {
  event.preventDefault();
  const key = $('#api-key').value.trim();
  if (!key) {
    signInError.replaceChildren('Paste an API key (payd user create prints one).');
    show(signInError, true);
    return;
  }
  const button = signInForm.querySelector('button[type=submit]');
  button.disabled = true;
  try {
    const { data } = await api('GET', '/v1/users/me', { key });
    const mode = data.livemode === false ? 'test' : 'live';
    if (wantedMode && mode !== wantedMode) {
      signInError.replaceChildren(`That is a ${mode} key; paste a ${wantedMode} key to switch to ${wantedMode} mode.`);
      show(signInError, true);
      return;
    }
    wantedMode = null;
    session.key = key;
    enter(data);
  } catch (err) {
    signInError.replaceChildren(...problemNodes(err));
    show(signInError, true);
  } finally {
    button.disabled = false;
  }
});

$('#sign-out').addEventListener('click', () => {
  wantedMode = null;
  session.clear();
  showSignIn(null);
});

// The mode switch (docs/modes.md): the mode is the key's, so switching is switching keys. The
// key left behind is kept for the tab; without a key of the other mode, sign-in asks for one.
$('#mode-switch').addEventListener('click', async () => {
  const other = state.user?.livemode === false ? 'live' : 'test';
  const current = session.key;
  const kept = session.otherKey;
  session.otherKey = current;
  if (kept) {
    try {
      const { data } = await api('GET', '/v1/users/me', { key: kept });
      session.key = kept;
      enter(data);
      return;
    } catch {
      // revoked, or the server away: ask for a key instead
    }
  }
  wantedMode = other;
  showSignIn([`Paste a ${other} key (sk_${other}_…) to switch to ${other} mode.`]);
});

setUnauthorizedHandler((err) => {
  session.clear();
  showSignIn(['Signed out: ', ...problemNodes(err)]);
});

function enter(user) {
  state.user = user;
  state.accounts = [];
  state.account = null;
  $('#user-name').textContent = user.name || user.email || user.id;
  const test = user.livemode === false;
  show($('#mode-banner'), test);
  const label = $('#mode-label');
  label.dataset.mode = test ? 'test' : 'live';
  label.textContent = test ? 'Test mode' : 'Live mode';
  $('#mode-switch').textContent = test ? 'Switch to live' : 'Switch to test';
  document.body.dataset.mode = label.dataset.mode;
  list.stop(); // nothing of the other mode stays on screen
  show($('#account-view'), false);
  $('#accounts').replaceChildren();
  show($('#sign-in'), false);
  show($('#who'), true);
  show($('#search'), true);
  show($('#dashboard'), true);
  loadAccounts();
  showView(fragment.get('view') || 'payments', fragment);
}

// ---- the pages and the search box ----

registerView('payments');
registerView('webhooks', () => loadEndpoints());
registerView('events', () => showEvents());
registerView('keys', () => loadKeys());
registerView('balances', () => showBalanceTransactions());
wireBalanceTransactions(openById);
wireNavigation(fragment);

wireSearch({
  payment: (p) => openDetail(p.id),
  account: (a) => {
    showView('payments', fragment);
    if (!state.accounts.some((x) => x.id === a.id)) state.accounts.push(a);
    selectAccount(a.id);
  },
  'webhook endpoint': (e) => {
    showView('webhooks', fragment);
    loadEndpoints(e.id);
  },
  event: (e) => showObject(`Event ${e.type}`, e),
  refund: (r) => showObject(`Refund ${r.id}`, r, [{ label: 'Open its payment', run: () => openDetail(r.payment_id) }]),
  order: (o) => showObject(`Order ${o.id}`, o, o.payment_id ? [{ label: 'Open its payment', run: () => openDetail(o.payment_id) }] : []),
  transfer: (t) => showObject(`Transfer ${t.id}`, t),
  'balance transaction': (t) => showObject(`Balance transaction ${t.id}`, t,
    [{ label: `Open its ${sourceKind(t.source)}`, run: () => openById(t.source) }]),
  'API key': (k) => {
    showView('keys', fragment);
    showObject(`API key ${k.prefix}…`, k);
  },
});

// ---- accounts ----

function accountLabel(a) {
  return a.name || `${a.currency} account`;
}

function renderAccounts() {
  $('#accounts').replaceChildren(...state.accounts.map((a) => h('li', {},
    h('button', {
      type: 'button',
      'data-account': a.id,
      'aria-current': state.account?.id === a.id ? 'true' : 'false',
      onclick: () => selectAccount(a.id),
    },
    h('span', { class: 'name' }, accountLabel(a)),
    h('span', { class: 'balance', 'data-balance': a.balance }, money(a.balance, a.currency)),
    h('code', { class: 'muted' }, a.id)))));
}

async function loadAccounts() {
  const status = $('#accounts-status');
  status.textContent = 'Loading accounts…';
  try {
    state.accounts = await listAll('/v1/accounts');
  } catch (err) {
    status.replaceChildren(...problemNodes(err));
    return;
  }
  status.textContent = state.accounts.length ? '' : 'No accounts yet: create one with POST /v1/accounts or payctl accounts create.';
  renderAccounts();
  const wanted = fragment.get('account');
  const first = state.accounts.find((a) => a.id === wanted) || state.accounts[0];
  if (first) selectAccount(first.id);
}

function selectAccount(id) {
  const account = state.accounts.find((a) => a.id === id);
  if (!account) return;
  state.account = account;
  fragment.set('account', id);
  history.replaceState(null, '', `#${fragment}`);
  renderAccounts();
  $('#account-title').textContent = `${accountLabel(account)} · ${account.currency}`;
  show($('#account-view'), true);
  list.reset(account, currentFilters());
  loadChart();
  loadBalance(account, openAccountTransactions);
}

function openAccountTransactions(id) {
  presetAccount(id);
  showView('balances', fragment);
}

async function refreshAccount() {
  if (!state.account) return;
  try {
    const { data } = await api('GET', `/v1/accounts/${state.account.id}`);
    state.accounts = state.accounts.map((a) => (a.id === data.id ? data : a));
    if (state.account.id === data.id) state.account = data;
    renderAccounts();
    loadBalance(state.account, openAccountTransactions);
  } catch {
    // the balance shown stays as it was; the next change refreshes it
  }
}

// ---- the payments list ----

const list = new PaymentList({
  listEl: $('#payments'),
  statusEl: $('#list-status'),
  sentinelEl: $('#sentinel'),
  noticeEl: $('#new-payments'),
  pollMs: POLL_MS,
  onOpen: (id) => openDetail(id),
  onNewShown: () => {
    refreshAccount();
    loadChart();
  },
});

function currentFilters() {
  const status = $('#filter-status').value;
  const from = $('#filter-from').value;
  const to = $('#filter-to').value;
  return {
    status: status || undefined,
    created_gte: from ? `${from}T00:00:00Z` : undefined,
    // "to" names a whole day: the list ends where the next day starts
    created_lt: to ? rfc3339(Date.parse(`${to}T00:00:00Z`) + DAY_MS) : undefined,
  };
}

$('#filters').addEventListener('change', () => {
  if (state.account) list.reset(state.account, currentFilters());
});
$('#filters').addEventListener('submit', (event) => event.preventDefault());

// ---- the CSV export: the list's account and filters, every page ----

$('#export-csv').addEventListener('click', async () => {
  if (!state.account) return;
  const button = $('#export-csv');
  const status = $('#export-status');
  const account = state.account;
  button.disabled = true;
  show(status, true);
  status.dataset.state = 'exporting';
  status.textContent = 'Exporting…';
  try {
    const { blob, rows } = await exportPayments(account.id, currentFilters(), (n) => {
      status.textContent = `Exporting… ${n} payments read`;
    });
    download(blob, `payments-${account.id}-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}Z.csv`);
    status.textContent = `Exported ${rows} payments.`;
    status.dataset.state = 'done';
    status.dataset.rows = rows;
  } catch (err) {
    status.replaceChildren('The export stopped: ', ...problemNodes(err));
    status.dataset.state = 'error';
  } finally {
    button.disabled = false;
  }
});

// ---- the chart ----

let chartGeneration = 0;
let lastChart = null; // drawn again when the window changes size
async function loadChart() {
  if (!state.account) return;
  const generation = ++chartGeneration;
  const account = state.account;
  const range = rangeFor($('#chart-range').value);
  const totals = $('#chart-totals');
  totals.dataset.state = 'loading';
  try {
    const { data } = await api('GET', `/v1/accounts/${account.id}/payments/stats`, {
      query: {
        interval: range.interval,
        created_gte: range.gte === null ? undefined : rfc3339(range.gte),
        created_lt: range.lt === null ? undefined : rfc3339(range.lt),
      },
    });
    if (generation !== chartGeneration) return;
    lastChart = { data, range };
    renderChart($('#chart-plot'), totals, data, range);
    totals.dataset.state = 'ready';
  } catch (err) {
    if (generation !== chartGeneration) return;
    totals.dataset.state = 'error';
    totals.replaceChildren(h('span', { class: 'problem' }, ...problemNodes(err)));
  }
}
$('#chart-range').addEventListener('change', loadChart);

// the chart is drawn at the width it is shown at: drawn again when that changes
let resizeTimer = null;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (lastChart) renderChart($('#chart-plot'), $('#chart-totals'), lastChart.data, lastChart.range);
  }, 150);
});

// ---- dialogs ----

for (const button of document.querySelectorAll('dialog [data-close]')) {
  button.addEventListener('click', () => button.closest('dialog').close());
}

// ---- new payment ----

const payDialog = $('#pay-dialog');
const payForm = new IdempotentForm({
  form: $('#pay-form'),
  keyEl: $('#pay-key'),
  problemEl: $('#pay-problem'),
  submitButton: $('#pay-submit'),
  submit: async (key) => {
    const account = state.account;
    const amount = parseAmount($('#pay-amount').value, account.currency);
    if (!amount) throw new InputError(`Enter an amount in ${account.currency}, such as 42.00.`);
    const description = $('#pay-description').value.trim();
    const { data } = await api('POST', '/v1/payments', {
      idempotencyKey: key,
      body: {
        account_id: account.id,
        amount,
        currency: account.currency,
        source: $('#pay-source').value,
        ...(description ? { description } : {}),
        ...($('#pay-manual').checked ? { capture_method: 'manual' } : {}),
      },
    });
    return data;
  },
  done: async () => {
    payDialog.close();
    await list.poll({ fresh: true }); // the new payment, and any made meanwhile, go on top
    list.showNew();
  },
});

$('#new-payment').addEventListener('click', () => {
  if (!state.account) return;
  $('#pay-currency').textContent = `(${state.account.currency})`;
  $('#pay-form').reset();
  payForm.open();
  payDialog.showModal();
  $('#pay-amount').focus();
});

// ---- a payment's detail and its refunds ----

const detailDialog = $('#detail-dialog');

function field(name, value) {
  return [h('dt', {}, name), h('dd', {}, value ?? '—')];
}

function renderDetail(p, refunds) {
  state.payment = p;
  $('#detail-h').textContent = `Payment ${money(p.amount, p.currency)}`;
  const metadata = Object.entries(p.metadata || {});
  $('#detail-fields').replaceChildren(
    ...field('Status', h('span', { class: `badge ${p.status}`, 'data-status': p.status }, statusLabel(p.status))),
    ...field('Amount', money(p.amount, p.currency)),
    ...field('Refunded', h('span', { 'data-refunded': p.refunded_amount }, money(p.refunded_amount, p.currency))),
    ...(p.capture_method === 'manual' ? [
      ...field('Captured', h('span', { 'data-captured': p.amount_captured }, money(p.amount_captured, p.currency))),
      ...field('Capturable', h('span', { 'data-capturable': p.amount_capturable }, money(p.amount_capturable, p.currency))),
      ...field('Released', money(p.amount_released, p.currency)),
      ...field('Capture before', p.capture_before ? h('time', { datetime: p.capture_before }, when(p.capture_before)) : null),
      ...(p.cancellation_reason ? field('Canceled', `${statusLabel(p.cancellation_reason)} · ${when(p.canceled_at)}`) : []),
    ] : []),
    ...field('Card', h('code', {}, p.source)),
    ...field('Description', p.description),
    ...field('Created', h('time', { datetime: p.created_at }, when(p.created_at))),
    ...field('Id', h('code', {}, p.id)),
    ...field('Charge', p.processor_charge_id ? h('code', {}, p.processor_charge_id) : null),
    ...field('Order', p.order_id ? h('code', {}, p.order_id) : null),
    ...(metadata.length ? field('Metadata', metadata.map(([k, v]) => `${k}: ${v}`).join(', ')) : []),
  );
  $('#detail-refunds').replaceChildren(...(refunds.length
    ? refunds.map((r) => h('li', { 'data-refund': r.id },
      h('span', {}, money(r.amount, p.currency), r.reason ? ` · ${statusLabel(r.reason)}` : ''),
      h('span', { class: 'muted' }, `${statusLabel(r.status)} · ${when(r.created_at)}`),
      h('code', { class: 'muted' }, r.id)))
    : [h('li', { class: 'muted' }, 'No refunds.')]));
  const left = p.amount_captured - p.refunded_amount;
  $('#refund-left').textContent = `(${money(left, p.currency)} left to refund)`;
  show($('#refund-form'), p.status !== 'failed' && p.amount_captured > 0);
  // a manual payment's hold (§17): capture or cancel while it requires capture
  const holding = p.status === 'requires_capture';
  $('#capture-left').textContent = `(${money(p.amount_capturable, p.currency)} capturable)`;
  show($('#capture-form'), holding);
  show($('#cancel-form'), holding);
}

async function loadDetail(id) {
  const [{ data: payment }, refunds] = await Promise.all([
    api('GET', `/v1/payments/${id}`),
    listAll(`/v1/payments/${id}/refunds`),
  ]);
  renderDetail(payment, refunds);
  list.update(payment);
  return payment;
}

async function openDetail(id) {
  $('#detail-h').textContent = 'Payment';
  $('#detail-fields').replaceChildren(h('dt', {}, 'Loading…'));
  $('#detail-refunds').replaceChildren();
  show($('#refund-form'), false);
  $('#refund-form').reset();
  refundForm.open();
  for (const [form, idem] of [['#capture-form', captureForm], ['#cancel-form', cancelForm]]) {
    show($(form), false);
    $(form).reset();
    idem.open();
  }
  detailDialog.showModal();
  try {
    await loadDetail(id);
  } catch (err) {
    $('#detail-fields').replaceChildren(h('dd', { class: 'problem' }, ...problemNodes(err)));
  }
}

function refundProblem(err) {
  const nodes = problemNodes(err);
  const left = err.problem?.refundable_amount;
  if (left !== undefined && state.payment) {
    nodes.push(` — ${money(left, state.payment.currency)} can still be refunded`);
  }
  return nodes;
}

const refundForm = new IdempotentForm({
  form: $('#refund-form'),
  keyEl: $('#refund-key'),
  problemEl: $('#refund-problem'),
  submitButton: $('#refund-submit'),
  describeProblem: refundProblem,
  submit: async (key) => {
    const p = state.payment;
    const text = $('#refund-amount').value.trim();
    const amount = text ? parseAmount(text, p.currency) : undefined;
    if (text && !amount) throw new InputError(`Enter an amount in ${p.currency}, or nothing to refund all that is left.`);
    const reason = $('#refund-reason').value;
    const { data } = await api('POST', `/v1/payments/${p.id}/refunds`, {
      idempotencyKey: key,
      body: { ...(amount ? { amount } : {}), ...(reason ? { reason } : {}) },
    });
    return data;
  },
  done: async () => {
    $('#refund-form').reset();
    refundForm.open(); // the next refund is another attempt
    await loadDetail(state.payment.id).catch(() => {});
    refreshAccount();
    loadChart();
  },
});

// ---- a manual payment's hold (§17): capture and cancel, each with its own Idempotency-Key ----

function captureProblem(err) {
  const nodes = problemNodes(err);
  const left = err.problem?.amount_capturable;
  if (left !== undefined && state.payment) {
    nodes.push(` — ${money(left, state.payment.currency)} can still be captured`);
  }
  if (err.problem?.current_status) nodes.push(` — the payment is ${statusLabel(err.problem.current_status)}`);
  return nodes;
}

async function holdChanged(idemForm, selector) {
  $(selector).reset();
  idemForm.open(); // the next operation is another attempt
  await loadDetail(state.payment.id).catch(() => {});
  refreshAccount();
  loadChart();
}

const captureForm = new IdempotentForm({
  form: $('#capture-form'),
  keyEl: $('#capture-key'),
  problemEl: $('#capture-problem'),
  submitButton: $('#capture-submit'),
  describeProblem: captureProblem,
  submit: async (key) => {
    const p = state.payment;
    const text = $('#capture-amount').value.trim();
    const amount = text ? parseAmount(text, p.currency) : undefined;
    if (text && !amount) throw new InputError(`Enter an amount in ${p.currency}, or nothing to capture all that is capturable.`);
    const { data } = await api('POST', `/v1/payments/${p.id}/capture`, {
      idempotencyKey: key,
      body: { ...(amount ? { amount_to_capture: amount } : {}), final_capture: $('#capture-final').checked },
    });
    return data;
  },
  done: () => holdChanged(captureForm, '#capture-form'),
});

const cancelForm = new IdempotentForm({
  form: $('#cancel-form'),
  keyEl: $('#cancel-key'),
  problemEl: $('#cancel-problem'),
  submitButton: $('#cancel-submit'),
  describeProblem: captureProblem,
  submit: async (key) => {
    const p = state.payment;
    const reason = $('#cancel-reason').value;
    const { data } = await api('POST', `/v1/payments/${p.id}/cancel`, {
      idempotencyKey: key,
      body: reason ? { cancellation_reason: reason } : {},
    });
    return data;
  },
  done: () => holdChanged(cancelForm, '#cancel-form'),
});

// ---- start ----

if (session.key) {
  api('GET', '/v1/users/me').then(({ data }) => enter(data), (err) => {
    if (err.status !== 401) showSignIn(problemNodes(err));
  });
} else {
  showSignIn(null);
}
