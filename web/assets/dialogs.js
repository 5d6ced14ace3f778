// Dialogs shared by the pages: a secret shown once, and an object's JSON.
import { $, h } from './dom.js';

const secretDialog = $('#secret-dialog');
// the secret leaves the page when the dialog closes, however it is closed
secretDialog.addEventListener('close', () => {
  $('#secret-value').textContent = '';
});

// A secret (an API key, a signing secret) the server shows only in this answer.
export function showSecret(what, secret) {
  $('#secret-what').textContent = what;
  $('#secret-value').textContent = secret ?? '(not shown: this answer was a replay, and a replay never shows the secret again)';
  secretDialog.showModal();
  $('#secret-done').focus();
}

// Any object as the API answered it, indented; actions are buttons shown above it.
export function showObject(title, object, actions = []) {
  $('#object-h').textContent = title;
  $('#object-json').textContent = JSON.stringify(object, null, 2);
  $('#object-actions').replaceChildren(...actions.map(({ label, run }) => h('button', {
    type: 'button',
    onclick: () => {
      $('#object-dialog').close();
      run();
    },
  }, label)));
  $('#object-actions').hidden = !actions.length;
  const dialog = $('#object-dialog');
  if (!dialog.open) dialog.showModal();
}
