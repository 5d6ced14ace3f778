// The webhook endpoints page: the list, one endpoint's settings and its delivery attempts, and
// the forms that add, edit, disable, rotate and send again. A POST carries the Idempotency-Key
// its form made when it opened (forms.js); a PATCH is idempotent by itself and carries none.
import { api, listAll } from './api.js';
import { $, h, show } from './dom.js';
import { statusLabel, when } from './format.js';
import { IdempotentForm, InputError, problemNodes } from './forms.js';
import { showObject, showSecret } from './dialogs.js';
import { typeCheckboxes } from './event_types.js';

const ATTEMPTS_PAGE = 50;

const state = { endpoints: [], endpoint: null, editing: false, attemptsCursor: null, attemptsGeneration: 0, resend: null };

function endpointPath(id = state.endpoint.id) {
  return `/v1/webhook_endpoints/${id}`;
}

function enabledLabel(e) {
  return e.disabled ? 'disabled' : 'enabled';
}

// ---- the list ----

function renderList() {
  $('#endpoints-status').textContent = state.endpoints.length ? ''
    : 'No endpoints yet: add one to be told of payments, refunds and the rest as they happen.';
  $('#endpoints').replaceChildren(...state.endpoints.map((e) => h('li', {},
    h('button', {
      type: 'button',
      'data-endpoint': e.id,
      'aria-current': state.endpoint?.id === e.id ? 'true' : 'false',
      onclick: () => selectEndpoint(e.id),
    },
    h('span', { class: 'name' }, e.url),
    h('span', {}, h('span', { class: `badge ${enabledLabel(e)}` }, enabledLabel(e)), ' ', h('span', { class: 'muted' }, e.events.join(', '))),
    h('code', { class: 'muted' }, e.id)))));
}

export async function loadEndpoints(wanted) {
  const status = $('#endpoints-status');
  status.textContent = 'Loading endpoints…';
  try {
    state.endpoints = await listAll('/v1/webhook_endpoints');
  } catch (err) {
    status.replaceChildren(...problemNodes(err));
    return;
  }
  const id = wanted || state.endpoint?.id;
  const pick = state.endpoints.find((e) => e.id === id) || state.endpoints[0];
  renderList();
  if (pick) await selectEndpoint(pick.id);
  else show($('#endpoint-view'), false);
}

function replaceInList(endpoint) {
  const at = state.endpoints.findIndex((e) => e.id === endpoint.id);
  if (at >= 0) state.endpoints[at] = endpoint;
  else state.endpoints.unshift(endpoint);
}

// ---- one endpoint ----

function field(name, value) {
  return [h('dt', {}, name), h('dd', {}, value ?? '—')];
}

function renderEndpoint(e) {
  state.endpoint = e;
  $('#endpoint-title').textContent = e.description || e.url;
  const view = $('#endpoint-view');
  view.dataset.id = e.id;
  view.dataset.disabled = e.disabled;
  $('#endpoint-fields').replaceChildren(
    ...field('URL', h('code', { 'data-field': 'url' }, e.url)),
    ...field('Events', h('span', { 'data-field': 'events' }, e.events.join(', '))),
    ...field('Status', h('span', { class: `badge ${enabledLabel(e)}`, 'data-field': 'status' }, enabledLabel(e))),
    ...field('Description', e.description),
    ...field('Previous secret signs until', e.previous_secret_expires_at
      ? h('time', { datetime: e.previous_secret_expires_at, 'data-field': 'previous-secret' }, when(e.previous_secret_expires_at)) : null),
    ...field('Created', when(e.created_at)),
    ...field('Id', h('code', {}, e.id)),
  );
  $('#toggle-endpoint').textContent = e.disabled ? 'Enable' : 'Disable';
  show($('#endpoint-problem'), false);
  show(view, true);
  replaceInList(e);
  renderList();
}

export async function selectEndpoint(id) {
  try {
    const { data } = await api('GET', endpointPath(id));
    renderEndpoint(data);
  } catch (err) {
    $('#endpoint-problem').replaceChildren(...problemNodes(err));
    show($('#endpoint-problem'), true);
    return;
  }
  await loadAttempts(true);
}

// ---- its delivery attempts, newest first, a page at a time ----

function attemptRow(a) {
  return h('tr', { 'data-attempt': a.id, 'data-event': a.event_id, 'data-outcome': a.outcome, 'data-number': a.attempt },
    h('td', {}, h('time', { datetime: a.created_at }, when(a.created_at))),
    h('td', {}, h('button', { type: 'button', class: 'quiet', onclick: () => openEvent(a.event_id) }, h('code', {}, a.event_id))),
    h('td', {}, String(a.attempt)),
    h('td', {}, h('span', { class: `badge ${a.outcome}` }, statusLabel(a.outcome)),
      a.next_attempt_at ? h('small', { class: 'muted' }, ` next ${when(a.next_attempt_at)}`) : null),
    h('td', {}, a.response_status === null ? 'no answer' : String(a.response_status)),
    h('td', {}, `${a.latency_ms} ms`),
    h('td', {}, a.error ? h('code', {}, a.error) : '—'),
    h('td', {}, h('button', { type: 'button', 'data-resend': a.event_id, onclick: () => openResend(a.event_id) }, 'Send again')));
}

export async function loadAttempts(fromStart) {
  const generation = fromStart ? ++state.attemptsGeneration : state.attemptsGeneration;
  const status = $('#attempts-status');
  if (fromStart) {
    state.attemptsCursor = null;
    $('#attempts').replaceChildren();
  }
  status.textContent = 'Loading attempts…';
  status.dataset.state = 'loading';
  let page;
  try {
    ({ data: page } = await api('GET', `${endpointPath()}/deliveries`, { query: { limit: ATTEMPTS_PAGE, cursor: state.attemptsCursor } }));
  } catch (err) {
    if (generation !== state.attemptsGeneration) return;
    status.replaceChildren(...problemNodes(err));
    status.dataset.state = 'error';
    return;
  }
  if (generation !== state.attemptsGeneration) return;
  $('#attempts').append(...page.data.map(attemptRow));
  state.attemptsCursor = page.has_more ? page.next_cursor : null;
  const shown = $('#attempts').children.length;
  if (state.attemptsCursor) {
    status.replaceChildren(`${shown} attempts shown. `, h('button', { type: 'button', class: 'quiet', onclick: () => loadAttempts(false) }, 'Load more'));
    status.dataset.state = 'more';
  } else {
    status.textContent = shown ? `All ${shown} attempts shown.` : 'No delivery attempts yet.';
    status.dataset.state = 'end';
  }
}

async function openEvent(id) {
  try {
    const { data } = await api('GET', `/v1/events/${id}`);
    showObject(`Event ${data.type}`, data, [{ label: 'Send again to this endpoint', run: () => openResend(id) }]);
  } catch (err) {
    showObject(`Event ${id}`, { error: err.message, code: err.code });
  }
}

// ---- add and edit ----

const endpointDialog = $('#endpoint-dialog');
$('#endpoint-events').append(...typeCheckboxes());

function checkedEvents() {
  return [...document.querySelectorAll('#endpoint-events input:checked')].map((c) => c.value);
}

const endpointForm = new IdempotentForm({
  form: $('#endpoint-form'),
  keyEl: $('#endpoint-key'),
  problemEl: $('#endpoint-form-problem'),
  submitButton: $('#endpoint-submit'),
  submit: async (key) => {
    const url = $('#endpoint-url').value.trim();
    const events = checkedEvents();
    if (!url) throw new InputError('Enter the URL payd should send events to.');
    if (!events.length) throw new InputError('Choose at least one event type, or every type (*).');
    const chosen = events.includes('*') ? ['*'] : events;
    if (state.editing) {
      const { data } = await api('PATCH', endpointPath(), { body: { url, events: chosen } });
      return { endpoint: data, created: false };
    }
    const description = $('#endpoint-description').value.trim();
    const { data } = await api('POST', '/v1/webhook_endpoints', {
      idempotencyKey: key,
      body: { url, events: chosen, ...(description ? { description } : {}) },
    });
    return { endpoint: data, created: true };
  },
  done: async ({ endpoint, created }) => {
    endpointDialog.close();
    const { secret, redacted, ...shown } = endpoint;
    renderEndpoint(shown);
    if (created) {
      showSecret(`The signing secret of ${endpoint.url}: check each delivery's signature with it.`, secret);
      await loadAttempts(true);
    }
  },
});

function openEndpointForm(editing) {
  state.editing = editing;
  $('#endpoint-form').reset();
  const e = editing ? state.endpoint : null;
  $('#endpoint-h').textContent = editing ? 'Edit the webhook endpoint' : 'Add a webhook endpoint';
  $('#endpoint-submit').textContent = editing ? 'Save' : 'Add endpoint';
  // the description is set when the endpoint is added; a PATCH has no Idempotency-Key
  show($('#endpoint-description-field'), !editing);
  show($('#endpoint-key-line'), !editing);
  if (e) {
    $('#endpoint-url').value = e.url;
    for (const box of document.querySelectorAll('#endpoint-events input')) box.checked = e.events.includes(box.value);
  }
  endpointForm.open();
  endpointDialog.showModal();
  $('#endpoint-url').focus();
}

$('#new-endpoint').addEventListener('click', () => openEndpointForm(false));
$('#edit-endpoint').addEventListener('click', () => openEndpointForm(true));
$('#reload-attempts').addEventListener('click', () => loadAttempts(true));

$('#toggle-endpoint').addEventListener('click', async () => {
  const button = $('#toggle-endpoint');
  button.disabled = true;
  try {
    const { data } = await api('PATCH', endpointPath(), { body: { disabled: !state.endpoint.disabled } });
    renderEndpoint(data);
  } catch (err) {
    $('#endpoint-problem').replaceChildren(...problemNodes(err));
    show($('#endpoint-problem'), true);
  } finally {
    button.disabled = false;
  }
});

// ---- rotate the secret ----

const rotateDialog = $('#rotate-dialog');
const rotateForm = new IdempotentForm({
  form: $('#rotate-form'),
  keyEl: $('#rotate-key'),
  problemEl: $('#rotate-problem'),
  submitButton: $('#rotate-submit'),
  submit: async (key) => {
    const { data } = await api('POST', `${endpointPath()}/rotate_secret`, {
      idempotencyKey: key,
      body: { expire_previous_in: Number($('#rotate-overlap').value) },
    });
    return data;
  },
  done: (endpoint) => {
    rotateDialog.close();
    const { secret, redacted, ...shown } = endpoint;
    renderEndpoint(shown);
    showSecret(`The new signing secret of ${endpoint.url}.`, secret);
  },
});

$('#rotate-endpoint').addEventListener('click', () => {
  $('#rotate-form').reset();
  rotateForm.open();
  rotateDialog.showModal();
});

// ---- send an event again ----

const resendDialog = $('#resend-dialog');
const resendForm = new IdempotentForm({
  form: $('#resend-form'),
  keyEl: $('#resend-key'),
  problemEl: $('#resend-problem'),
  submitButton: $('#resend-submit'),
  submit: async (key) => {
    const { data } = await api('POST', `/v1/events/${state.resend.eventId}/redeliver`, {
      idempotencyKey: key,
      body: { endpoint_id: state.resend.endpointId },
    });
    return data;
  },
  done: async () => {
    resendDialog.close();
    await loadAttempts(true);
  },
});

function openResend(eventId) {
  state.resend = { eventId, endpointId: state.endpoint.id };
  $('#resend-event').textContent = eventId;
  $('#resend-endpoint').textContent = state.endpoint.url;
  resendForm.open();
  resendDialog.showModal();
  $('#resend-submit').focus();
}
