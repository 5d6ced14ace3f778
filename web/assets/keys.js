// The API keys page: every key (active and revoked) by name and prefix, the one this page signs
// in with marked, a form that makes a key (shown once) and one that revokes a key. The server
// refuses to revoke the key a request is made with (409 api_key_in_use), so the page says so
// before it is tried.
import { api, listAll, session } from './api.js';
import { $, h, show } from './dom.js';
import { when } from './format.js';
import { IdempotentForm, problemNodes } from './forms.js';
import { showSecret } from './dialogs.js';

const state = { keys: [], revoking: null };

// The list shows a key's first characters only (`sk_` and 8 more); the page's own key starts
// with them. A key made before keys were listed has the bare prefix `sk_`, which tells nothing.
export function isOwnKey(k, key = session.key) {
  return Boolean(key) && k.prefix.length > 3 && key.startsWith(k.prefix);
}

function keyRow(k) {
  const own = isOwnKey(k);
  return h('tr', { 'data-key': k.id, 'data-status': k.status, class: own ? 'own' : undefined, 'data-own': own ? 'true' : undefined },
    h('td', {}, k.name || h('span', { class: 'muted' }, 'unnamed')),
    h('td', {}, h('code', {}, `${k.prefix}…`), own ? h('span', { class: 'badge own' }, 'this page') : null),
    h('td', {}, h('span', { class: `badge ${k.status}` }, k.status)),
    h('td', {}, when(k.created_at)),
    h('td', {}, k.revoked_at ? when(k.revoked_at) : '—'),
    h('td', {}, k.status === 'active'
      ? h('button', { type: 'button', 'data-revoke': k.id, onclick: () => openRevoke(k) }, 'Revoke') : null));
}

export async function loadKeys() {
  const status = $('#keys-status');
  status.textContent = 'Loading keys…';
  status.dataset.state = 'loading';
  try {
    state.keys = await listAll('/v1/api_keys');
  } catch (err) {
    status.replaceChildren(...problemNodes(err));
    status.dataset.state = 'error';
    return;
  }
  $('#keys').replaceChildren(...state.keys.map(keyRow));
  const active = state.keys.filter((k) => k.status === 'active').length;
  status.textContent = `${active} active, ${state.keys.length - active} revoked.`;
  status.dataset.state = 'end';
}

// ---- create ----

const keyDialog = $('#key-dialog');
const keyForm = new IdempotentForm({
  form: $('#key-form'),
  keyEl: $('#key-key'),
  problemEl: $('#key-problem'),
  submitButton: $('#key-submit'),
  submit: async (idempotencyKey) => {
    const name = $('#key-name').value.trim();
    const { data } = await api('POST', '/v1/api_keys', { idempotencyKey, body: name ? { name } : {} });
    return data;
  },
  done: async (created) => {
    keyDialog.close();
    showSecret(`The new API key${created.name ? ` "${created.name}"` : ''} (${created.prefix}…).`, created.api_key);
    await loadKeys();
  },
});

$('#new-key').addEventListener('click', () => {
  $('#key-form').reset();
  keyForm.open();
  keyDialog.showModal();
  $('#key-name').focus();
});

// ---- revoke (a DELETE: idempotent by itself) ----

const revokeDialog = $('#revoke-dialog');

function openRevoke(k) {
  state.revoking = k;
  $('#revoke-prefix').textContent = `${k.prefix}…${k.name ? ` (${k.name})` : ''}`;
  show($('#revoke-own'), isOwnKey(k));
  show($('#revoke-problem'), false);
  revokeDialog.showModal();
}

$('#revoke-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const button = $('#revoke-submit');
  button.disabled = true;
  try {
    await api('DELETE', `/v1/api_keys/${state.revoking.id}`);
    revokeDialog.close();
    await loadKeys();
  } catch (err) {
    $('#revoke-problem').replaceChildren(...problemNodes(err));
    show($('#revoke-problem'), true);
  } finally {
    button.disabled = false;
  }
});
