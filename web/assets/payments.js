// The payments list: pages follow next_cursor as the user scrolls (§4), so a page is always the
// next slice of the list as it stood when the first page was read. Payments made since then
// never slip into it; a poll of the first page counts them, and a notice offers to show them at
// the top, so the list neither jumps under the reader nor shows a payment twice.
import { api } from './api.js';
import { h } from './dom.js';
import { money, statusLabel, when } from './format.js';

const PAGE_SIZE = 50;
const POLL_PAGE_SIZE = 100;
const POLL_MAX_PAGES = 5; // past 500 new payments the notice offers a reload instead

// (created_at, id), the list's order: RFC 3339 times with milliseconds and fixed-width ids both
// compare as strings.
function newer(a, b) {
  return a.created_at > b.created_at || (a.created_at === b.created_at && a.id > b.id);
}

export class PaymentList {
  constructor({ listEl, statusEl, sentinelEl, noticeEl, onOpen, onNewShown, pollMs }) {
    Object.assign(this, { listEl, statusEl, sentinelEl, noticeEl, onOpen, onNewShown, pollMs });
    this.generation = 0;
    this.account = null;
    this.filters = {};
    this.rows = new Map(); // id -> li
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.loadMore();
    }, { rootMargin: '600px 0px' });
    this.observer.observe(sentinelEl);
    noticeEl.addEventListener('click', () => this.showNew());
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden) this.poll();
    });
  }

  // A new list: another account or other filters.
  reset(account, filters = this.filters) {
    this.generation++;
    clearTimeout(this.pollTimer);
    this.account = account;
    this.filters = filters;
    this.rows.clear();
    this.newest = null;
    this.cursor = null;
    this.hasMore = true;
    this.loading = false;
    this.pending = [];
    this.pendingOverflow = false;
    this.listEl.replaceChildren();
    this.listEl.setAttribute('aria-busy', 'true');
    this.renderNotice();
    this.setStatus('Loading…', 'loading');
    if (account) {
      this.loadMore();
      this.schedulePoll();
    }
  }

  stop() {
    this.generation++;
    clearTimeout(this.pollTimer);
  }

  query(extra) {
    return { ...this.filters, ...extra };
  }

  get path() {
    return `/v1/accounts/${this.account.id}/payments`;
  }

  setStatus(text, state, ...extra) {
    this.statusEl.replaceChildren(text, ...extra);
    this.statusEl.dataset.state = state;
  }

  sentinelNearView() {
    const r = this.sentinelEl.getBoundingClientRect();
    return r.top < window.innerHeight + 600;
  }

  async loadMore() {
    if (this.loading || !this.hasMore || !this.account) return;
    const generation = this.generation;
    this.loading = true;
    this.setStatus('Loading…', 'loading');
    let page;
    try {
      ({ data: page } = await api('GET', this.path, {
        query: this.query({ limit: PAGE_SIZE, cursor: this.cursor }),
      }));
    } catch (err) {
      if (generation !== this.generation) return;
      this.loading = false;
      this.setStatus(`The next page could not be loaded: ${err.message}${err.code ? ` (${err.code})` : ''}.`, 'error',
        h('button', { type: 'button', onclick: () => this.loadMore() }, 'Try again'));
      return;
    }
    if (generation !== this.generation) return; // the list was reset meanwhile
    this.loading = false;
    for (const p of page.data) {
      if (this.rows.has(p.id)) continue; // keyset pages never overlap; never show one twice anyway
      if (!this.newest) this.newest = p;
      this.listEl.append(this.row(p));
    }
    this.cursor = page.next_cursor;
    this.hasMore = Boolean(page.has_more && page.next_cursor);
    this.listEl.removeAttribute('aria-busy');
    if (this.hasMore) {
      this.setStatus(`${this.rows.size} payments shown; more load as you scroll.`, 'more',
        h('button', { type: 'button', class: 'quiet', onclick: () => this.loadMore() }, 'Load more'));
      // a short page may leave the sentinel in view, where the observer will not fire again
      if (this.sentinelNearView()) setTimeout(() => this.loadMore(), 0);
    } else {
      this.setStatus(this.rows.size ? `All ${this.rows.size} payments shown.` : 'No payments yet.', 'end');
    }
  }

  row(p, fresh = false) {
    const li = h('li', { class: fresh ? 'fresh' : undefined });
    this.rows.set(p.id, li);
    this.fill(li, p);
    return li;
  }

  fill(li, p) {
    li.dataset.id = p.id;
    li.dataset.status = p.status;
    li.dataset.amount = p.amount;
    li.dataset.refunded = p.refunded_amount;
    li.dataset.createdAt = p.created_at;
    const refunded = p.refunded_amount ? h('small', {}, `${money(p.refunded_amount, p.currency)} refunded`) : null;
    li.replaceChildren(h('button', {
      type: 'button',
      class: 'row',
      'aria-label': `${money(p.amount, p.currency)}, ${statusLabel(p.status)}, ${when(p.created_at)}, ${p.id}`,
      onclick: () => this.onOpen(p.id),
    },
    h('span', { class: 'amount' }, money(p.amount, p.currency), refunded),
    h('span', { class: `badge ${p.status}` }, statusLabel(p.status)),
    h('span', { class: 'what' }, p.description || p.source, ' ', h('code', {}, p.id)),
    h('time', { datetime: p.created_at }, when(p.created_at))));
  }

  // After a refund: the row shows the payment's new status and refunded amount.
  update(p) {
    const li = this.rows.get(p.id);
    if (li) this.fill(li, p);
  }

  // ---- payments made since the first page was read ----

  schedulePoll() {
    clearTimeout(this.pollTimer);
    const generation = this.generation;
    this.pollTimer = setTimeout(async () => {
      if (generation !== this.generation) return;
      if (!document.hidden) await this.poll();
      if (generation === this.generation) this.schedulePoll();
    }, this.pollMs);
  }

  // Reads from the top of the list down to the newest payment shown; what lies above it is new.
  // One poll at a time: a caller that needs a poll started after its own write (the payment
  // form) waits for the one in flight, then polls again.
  async poll({ fresh = false } = {}) {
    if (this.polling) {
      await this.polling;
      if (!fresh) return;
    }
    if (!this.account || (!this.newest && this.hasMore)) return;
    this.polling = this.readNew();
    try {
      await this.polling;
    } finally {
      this.polling = null;
    }
  }

  async readNew() {
    const generation = this.generation;
    const top = this.newest;
    try {
      const found = [];
      let cursor = null, pages = 0, reachedTop = false;
      do {
        const { data: page } = await api('GET', this.path, {
          query: this.query({ limit: POLL_PAGE_SIZE, cursor }),
        });
        for (const p of page.data) {
          if (top && !newer(p, top)) {
            reachedTop = true;
            break;
          }
          if (!this.rows.has(p.id)) found.push(p);
        }
        cursor = page.has_more ? page.next_cursor : null;
        pages++;
      } while (!reachedTop && cursor && pages < POLL_MAX_PAGES);
      if (generation !== this.generation || top !== this.newest) return;
      this.pending = found;
      this.pendingOverflow = !reachedTop && Boolean(cursor);
      this.renderNotice();
    } catch {
      // a failed poll is only a missed notice; the next one tries again
    }
  }

  renderNotice() {
    const n = this.pending.length;
    this.noticeEl.hidden = n === 0;
    this.noticeEl.dataset.count = n;
    this.noticeEl.textContent = this.pendingOverflow
      ? `More than ${n} new payments — reload the list`
      : `${n} new payment${n === 1 ? '' : 's'} — show ${n === 1 ? 'it' : 'them'}`;
  }

  // The notice was clicked: the new payments go on top, newest first, where the reader looks.
  showNew() {
    if (this.pendingOverflow) {
      this.reset(this.account, this.filters);
      this.onNewShown?.();
      return;
    }
    const fresh = this.pending.filter((p) => !this.rows.has(p.id));
    const first = this.listEl.firstChild;
    for (const p of fresh) this.listEl.insertBefore(this.row(p, true), first);
    if (fresh.length) this.newest = fresh[0];
    this.pending = [];
    this.renderNotice();
    if (!this.hasMore) this.setStatus(`All ${this.rows.size} payments shown.`, 'end');
    this.listEl.firstChild?.querySelector('button')?.focus({ preventScroll: true });
    this.listEl.scrollIntoView({ block: 'start', behavior: 'instant' });
    this.onNewShown?.();
  }
}
