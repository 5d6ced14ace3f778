// The events page: the log of changes, newest first, filtered by type, a page at a time by
// following next_cursor (so events recorded meanwhile never shift the pages below); an event
// opens as the JSON the API and every webhook delivery carry.
import { api } from './api.js';
import { $, h } from './dom.js';
import { when } from './format.js';
import { problemNodes } from './forms.js';
import { showObject } from './dialogs.js';
import { typeOptions } from './event_types.js';

const PAGE_SIZE = 50;
const state = { generation: 0, cursor: null, loading: false };

export async function openEvent(id) {
  const { data } = await api('GET', `/v1/events/${id}`);
  showObject(`Event ${data.type}`, data);
}

function eventRow(e) {
  const object = e.data?.object || {};
  return h('li', { 'data-id': e.id, 'data-type': e.type },
    h('button', { type: 'button', class: 'row', onclick: () => showObject(`Event ${e.type}`, e) },
      h('span', {}, h('code', {}, e.type)),
      h('span', { class: 'what' }, object.id ? h('code', {}, object.id) : '', ' ', h('code', { class: 'muted' }, e.id)),
      h('time', { datetime: e.created_at }, when(e.created_at))));
}

async function loadPage(fromStart) {
  const status = $('#events-status');
  if (fromStart) {
    state.generation++;
    state.cursor = null;
    state.loading = false;
    $('#events').replaceChildren();
  }
  if (state.loading) return;
  const generation = state.generation;
  state.loading = true;
  status.textContent = 'Loading events…';
  status.dataset.state = 'loading';
  let page;
  try {
    ({ data: page } = await api('GET', '/v1/events', {
      query: { limit: PAGE_SIZE, cursor: state.cursor, type: $('#event-type').value || undefined },
    }));
  } catch (err) {
    if (generation !== state.generation) return;
    state.loading = false;
    status.replaceChildren(...problemNodes(err), ' ', h('button', { type: 'button', onclick: () => loadPage(false) }, 'Try again'));
    status.dataset.state = 'error';
    return;
  }
  if (generation !== state.generation) return; // the filter changed meanwhile
  state.loading = false;
  $('#events').append(...page.data.map(eventRow));
  state.cursor = page.has_more ? page.next_cursor : null;
  const shown = $('#events').children.length;
  if (state.cursor) {
    status.replaceChildren(`${shown} events shown. `,
      h('button', { type: 'button', id: 'events-more', class: 'quiet', onclick: () => loadPage(false) }, 'Load more'));
    status.dataset.state = 'more';
  } else {
    status.textContent = shown ? `All ${shown} events shown.` : 'No events of this type.';
    status.dataset.state = 'end';
  }
}

export function showEvents() {
  loadPage(true);
}

$('#event-type').append(...typeOptions());
$('#event-type').addEventListener('change', () => loadPage(true));
