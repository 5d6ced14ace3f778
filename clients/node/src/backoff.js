// The retry policy of docs/client.md as pure functions: no clock and no randomness of their own,
// so the bounds can be tested exactly. The loop that uses them is http.js.

/** Jitter band: a delay is spread over ±30 % of its nominal value. */
export const JITTER = 0.3;

// A server can ask for anything; a day is already far beyond any sane maxDelayMs.
const RETRY_AFTER_CAP_MS = 86_400_000;

/** Nominal wait before retry n (n = 1, 2, …): min(base · 2^(n-1), maxDelay). */
export function nominalDelayMs(retry, { baseDelayMs, maxDelayMs }) {
  const nominal = Math.max(0, baseDelayMs) * 2 ** Math.max(0, retry - 1);
  return Math.min(nominal, Math.max(0, maxDelayMs));
}

/**
 * The wait before retry n, or null to give up (Retry-After asks for more than maxDelayMs).
 * u is uniform in [0, 1); retryAfterMs is the server's floor, or null when it gave none.
 * Jitter is applied after the cap, so clients that all reached maxDelay still spread out; when
 * Retry-After decides, clients are spread over up to 30 % above it for the same reason.
 */
export function nextDelayMs(retry, policy, u, retryAfterMs = null) {
  if (retryAfterMs != null && retryAfterMs > policy.maxDelayMs) return null;
  const unit = u >= 0 && u < 1 ? u : u >= 1 ? 1 - Number.EPSILON : 0;
  let delay = Math.round(nominalDelayMs(retry, policy) * (1 + JITTER * (2 * unit - 1)));
  if (retryAfterMs != null && retryAfterMs > 0 && delay <= retryAfterMs)
    delay = retryAfterMs + Math.round(retryAfterMs * JITTER * unit);
  return delay;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

// The three HTTP-date forms of RFC 9110 §5.6.7. The day name is not checked (recipients are
// told to be lenient; the date alone fixes the instant). Date.parse is not used: it reads the
// asctime form in local time.
const IMF_FIXDATE = /^[A-Za-z]{3}, (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC_850 = /^[A-Za-z]{6,9}, (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^[A-Za-z]{3} ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** An HTTP-date as Unix milliseconds, or null when it is not one. */
export function parseHttpDate(text) {
  let day, month, year, hour, minute, second, m;
  if ((m = IMF_FIXDATE.exec(text))) {
    [, day, month, year, hour, minute, second] = m;
  } else if ((m = RFC_850.exec(text))) {
    [, day, month, year, hour, minute, second] = m;
    year = Number(year) + (Number(year) < 70 ? 2000 : 1900); // two-digit years: 70-99 are 19xx
  } else if ((m = ASCTIME.exec(text))) {
    [, month, day, hour, minute, second, year] = m;
  } else {
    return null;
  }
  const monthIndex = MONTHS.indexOf(month);
  [day, year, hour, minute, second] = [day, year, hour, minute, second].map(Number);
  if (monthIndex < 0 || year < 1970 || hour > 23 || minute > 59 || second > 60 || day < 1)
    return null;
  const daysInMonth = new Date(Date.UTC(year, monthIndex + 1, 0)).getUTCDate();
  if (day > daysInMonth) return null;
  return Date.UTC(year, monthIndex, day, hour, minute, second);
}

/**
 * A Retry-After value (delta-seconds or an HTTP-date) as milliseconds to wait from nowMs (Unix
 * milliseconds, for the date form), or null when it is absent or unreadable. A date in the past
 * is 0.
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  if (value == null) return null;
  const text = String(value).trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1000, RETRY_AFTER_CAP_MS);
  const when = parseHttpDate(text);
  if (when == null) return null;
  return Math.min(Math.max(0, when - nowMs), RETRY_AFTER_CAP_MS);
}

/**
 * Whether a failure is one docs/client.md retries: no answer at all (status 0), 5xx, 429 and
 * 409 request_in_progress. Any other 4xx is final: the same request gets the same answer.
 */
export function isRetryable(status, code) {
  if (status === 0 || status >= 500 || status === 429) return true;
  return status === 409 && code === 'request_in_progress';
}
