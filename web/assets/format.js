// Money in integer minor units and times in RFC 3339, as the API speaks them. Amounts are
// converted with strings, never floating point, so 0.29 is 29 cents and not 28.999….

// ISO 4217 currencies whose minor unit is not the cent: the server's table (src/core/
// currency_table.h) less its exponent-2 codes; tests/lint/test_currencies.py holds them equal.
// Codes without a minor unit (metals, funds units, XTS, XXX) count whole units.
const EXPONENTS = {
  BIF: 0, CLP: 0, DJF: 0, GNF: 0, ISK: 0, JPY: 0, KMF: 0, KRW: 0, PYG: 0, RWF: 0, UGX: 0,
  UYI: 0, VND: 0, VUV: 0, XAF: 0, XOF: 0, XPF: 0, BHD: 3, IQD: 3, JOD: 3, KWD: 3, LYD: 3,
  OMR: 3, TND: 3, CLF: 4, UYW: 4,
  XAG: 0, XAU: 0, XBA: 0, XBB: 0, XBC: 0, XBD: 0, XDR: 0, XPD: 0, XPT: 0, XSU: 0, XTS: 0,
  XUA: 0, XXX: 0,
};

export function exponent(currency) {
  return EXPONENTS[currency] ?? 2;
}

// 123456 USD -> "1234.56" (an exact decimal string)
function decimal(minor, currency) {
  const e = exponent(currency);
  const sign = minor < 0 ? '-' : '';
  const digits = String(Math.abs(minor)).padStart(e + 1, '0');
  return e ? `${sign}${digits.slice(0, -e)}.${digits.slice(-e)}` : `${sign}${digits}`;
}

export function money(minor, currency) {
  const e = exponent(currency);
  try {
    // Intl formats a decimal string exactly
    return new Intl.NumberFormat('en-US', {
      style: 'currency', currency, minimumFractionDigits: e, maximumFractionDigits: e,
    }).format(decimal(minor, currency));
  } catch {
    return `${decimal(minor, currency)} ${currency}`;
  }
}

// An axis label: exact up to 1,000 units of the currency, then compact ($1.2K, $12M, $3.4B), so
// a label stays a few characters wide however large the volume. A label is a rounded reading,
// never an amount to compute with, so the floating-point division here is harmless.
export function compactMoney(minor, currency) {
  const major = minor / 10 ** exponent(currency);
  if (Math.abs(major) < 1000) return money(minor, currency);
  try {
    return new Intl.NumberFormat('en-US', {
      style: 'currency', currency, notation: 'compact', maximumFractionDigits: 1,
    }).format(major);
  } catch {
    return `${new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 }).format(major)} ${currency}`;
  }
}

// "42", "42.5", "1,234.56" -> minor units; null when it is not an amount in this currency.
export function parseAmount(text, currency) {
  const e = exponent(currency);
  const s = String(text).trim().replace(/[,\s]/g, '');
  const m = /^(\d+)(?:\.(\d*))?$/.exec(s);
  if (!m || (m[2] || '').length > e) return null;
  const minor = Number(m[1] + (m[2] || '').padEnd(e, '0'));
  return Number.isSafeInteger(minor) ? minor : null;
}

// "2026-11-30T22:46:37.085Z" -> "2026-11-30 22:46:37 UTC"
export function when(iso) {
  return iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC` : '';
}

export const HOUR_MS = 3600 * 1000;
export const DAY_MS = 24 * HOUR_MS;

// RFC 3339 with milliseconds, as the API writes times
export function rfc3339(ms) {
  return new Date(ms).toISOString();
}

export function statusLabel(status) {
  return String(status).replace(/_/g, ' ');
}
