"""The retry policy as pure functions (no clock, no randomness of their own), the same
rules as the C client's src/core/backoff.c, so their bounds can be tested exactly.

Delay before retry n (n = 1, 2, ...):

    nominal = min(base * 2**(n-1), max_delay)
    delay   = nominal * (1 + 0.3 * (2u - 1))       u uniform in [0, 1): +-30 % jitter
    if delay <= Retry-After:                         the server's wish is a floor,
        delay = Retry-After * (1 + 0.3 * u)          spread above it

and a Retry-After larger than max_delay means give up (None).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

JITTER = 0.3
# A server can ask for anything; a day is already far beyond any sane max_delay.
RETRY_AFTER_CAP_SECONDS = 86400.0


def nominal_delay(retry: int, base: float, max_delay: float) -> float:
    """The un-jittered wait before retry number `retry` (1-based), capped at max_delay."""
    base, cap = max(base, 0.0), max(max_delay, 0.0)
    nominal = base
    for _ in range(1, retry):
        if nominal >= cap:
            break
        nominal *= 2
    return min(nominal, cap)


def jittered_delay(retry: int, base: float, max_delay: float, u: float) -> float:
    u = min(max(u, 0.0), 1.0 - 1e-16) if u == u else 0.0  # u == u is False only for NaN
    return nominal_delay(retry, base, max_delay) * (1.0 + JITTER * (2.0 * u - 1.0))


def next_delay(retry: int, base: float, max_delay: float, u: float,
               retry_after: float | None) -> float | None:
    """Seconds to wait before retry `retry`, or None to give up because the server asked
    for longer than max_delay."""
    if retry_after is not None and retry_after > max_delay:
        return None
    delay = jittered_delay(retry, base, max_delay, u)
    if retry_after is not None and retry_after > 0 and delay <= retry_after:
        spread = min(max(u, 0.0), 1.0)
        delay = retry_after + retry_after * JITTER * spread
    return delay


_MONTHS = {name: number for number, name in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
# RFC 9110 section 5.6.7: IMF-fixdate, the obsolete RFC 850 form and asctime's.
_IMF_FIXDATE = re.compile(
    r"[A-Za-z]{3}, (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT")
_RFC850 = re.compile(
    r"[A-Za-z]{6,9}, (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT")
_ASCTIME = re.compile(
    r"[A-Za-z]{3} ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})")


def _http_date(value: str) -> float | None:
    """An HTTP-date as Unix seconds, or None when it is not one. The day name is not
    checked: the date alone fixes the instant."""
    if m := _IMF_FIXDATE.fullmatch(value):
        day, month, year, hour, minute, second = m.groups()
    elif m := _RFC850.fullmatch(value):
        day, month, year, hour, minute, second = m.groups()
        year = str(int(year) + (2000 if int(year) < 70 else 1900))  # 70-99 are 19xx
    elif m := _ASCTIME.fullmatch(value):
        month, day, hour, minute, second, year = m.groups()
    else:
        return None
    if month not in _MONTHS:
        return None
    try:
        when = datetime(int(year), _MONTHS[month], int(day), int(hour), int(minute),
                        min(int(second), 59), tzinfo=timezone.utc)
    except ValueError:
        return None
    return when.timestamp()


def parse_retry_after(value: str | None, now: float) -> float | None:
    """A Retry-After header as seconds to wait from `now` (Unix seconds), or None when there is
    none or it cannot be read (then the client's own backoff alone decides). A date in the past
    is 0; anything beyond a day is a day."""
    if value is None:
        return None
    value = value.strip(" \t")
    if value[:1].isdigit():
        if not value.isdigit() or not value.isascii():
            return None
        return min(float(int(value)), RETRY_AFTER_CAP_SECONDS)
    when = _http_date(value)
    if when is None:
        return None
    return min(max(when - now, 0.0), RETRY_AFTER_CAP_SECONDS)
