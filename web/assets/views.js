// The dashboard's pages: one nav button (data-view) and one section (data-view) each. Showing a
// page hides the others and tells the page, so it loads when first seen and reloads when shown
// again. The page shown lives in the fragment (#view=webhooks), like the page's other settings.
import { $ } from './dom.js';

const pages = new Map(); // name -> {onShow}
let current = null;

export function registerView(name, onShow) {
  pages.set(name, { onShow });
}

export function currentView() {
  return current;
}

export function showView(name, fragment) {
  if (!pages.has(name)) name = 'payments';
  current = name;
  for (const section of document.querySelectorAll('#dashboard section[data-view], #dashboard div[data-view]')) {
    section.hidden = section.dataset.view !== name;
  }
  for (const button of document.querySelectorAll('nav.views button')) {
    if (button.dataset.view === name) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  if (fragment) {
    if (name === 'payments') fragment.delete('view');
    else fragment.set('view', name);
    history.replaceState(null, '', `#${fragment}`);
  }
  pages.get(name).onShow?.();
}

export function wireNavigation(fragment) {
  for (const button of document.querySelectorAll('nav.views button')) {
    button.addEventListener('click', () => showView(button.dataset.view, fragment));
  }
  $('nav.views').addEventListener('keydown', (event) => {
    // arrow keys move between the pages' buttons, as in a tab list
    if (event.key !== 'ArrowRight' && event.key !== 'ArrowLeft') return;
    const buttons = [...document.querySelectorAll('nav.views button')];
    const at = buttons.indexOf(document.activeElement);
    if (at < 0) return;
    const next = buttons[(at + (event.key === 'ArrowRight' ? 1 : buttons.length - 1)) % buttons.length];
    next.focus();
  });
}
