// The payments list as CSV (RFC 4180): every page of the current filter, read through the same
// keyset pagination as the list (so a payment made during the export neither shifts nor repeats
// a row), one row per payment in the API's order, with the API's field names and values.
import { api } from './api.js';

const PAGE_SIZE = 100;

export const PAYMENT_COLUMNS = ['id', 'created_at', 'status', 'currency', 'amount', 'refunded_amount',
  'source', 'description', 'order_id', 'processor_charge_id', 'capture_method', 'amount_captured',
  'amount_released', 'canceled_at', 'metadata'];

// A spreadsheet runs a cell that starts with = + - @ (or a tab or carriage return, which some
// strip first) as a formula, and a description is text anyone paying can choose:
// "=HYPERLINK(...)" would become a live link or worse on the reader's machine. Such a cell is
// prefixed with an apostrophe, which spreadsheets show as text (OWASP's "CSV injection").
const FORMULA_START = /^[=+\-@\t\r]/;

export function csvCell(value) {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  // RFC 4180: a field holding a quote, comma or line break is quoted, its quotes doubled
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function csvRow(values) {
  return `${values.map(csvCell).join(',')}\r\n`;
}

function paymentCells(p) {
  return PAYMENT_COLUMNS.map((c) => (c === 'metadata' && p.metadata && !Object.keys(p.metadata).length ? '' : p[c]));
}

// Reads every page and resolves with the CSV as a Blob; onPage(rowsSoFar) after each page.
export async function exportPayments(accountId, filters, onPage = () => {}) {
  const parts = [csvRow(PAYMENT_COLUMNS)];
  let cursor = null, rows = 0;
  do {
    const { data: page } = await api('GET', `/v1/accounts/${accountId}/payments`, {
      query: { ...filters, limit: PAGE_SIZE, cursor },
    });
    for (const p of page.data) parts.push(csvRow(paymentCells(p)));
    rows += page.data.length;
    onPage(rows);
    cursor = page.has_more ? page.next_cursor : null;
  } while (cursor);
  return { blob: new Blob(parts, { type: 'text/csv;charset=utf-8' }), rows };
}

// Hands a Blob to the browser as a download (a blob: URL of this origin, forgotten right after).
export function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
