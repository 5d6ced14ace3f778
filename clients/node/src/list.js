// Lists (docs/api.md §4): one page per call, or every item through an async iterator that
// follows next_cursor until has_more is false. Each page is one logical call with the full retry
// policy, so a page that fails after its retries rejects the iteration with a PaydError.

import { PaydError } from './errors.js';

/** An async iterable over every item of a list, with `.page()` for one page only. */
export class ListIterator {
  constructor(http, path, query = {}) {
    this.http = http;
    this.path = path;
    this.query = { ...query };
    /** Pages fetched so far by the iterator. */
    this.pages = 0;
  }

  /** One page: {object: 'list', data, has_more, next_cursor, prev_cursor}. */
  async page(cursor = this.query.cursor) {
    const { body } = await this.http.request({
      method: 'GET',
      path: this.path,
      query: { ...this.query, cursor },
    });
    if (!body || !Array.isArray(body.data))
      throw new PaydError(`${this.path}: a list page without data`, { status: 200, problem: body });
    return body;
  }

  async *[Symbol.asyncIterator]() {
    let cursor = this.query.cursor;
    for (;;) {
      const page = await this.page(cursor);
      this.pages++;
      yield* page.data;
      if (!page.has_more) return;
      if (!page.next_cursor)
        throw new PaydError(`${this.path}: has_more without next_cursor`, { status: 200, problem: page });
      cursor = page.next_cursor;
    }
  }

  /** Every item in an array (reads the whole list: mind its size). */
  async toArray() {
    const items = [];
    for await (const item of this) items.push(item);
    return items;
  }
}
