/* Clocks and RFC 3339 timestamps: the API's wire format for time (§1) and the list filters (§4).
 * Times are int64 microseconds since the Unix epoch (UTC), as stored in the database. */
#ifndef PAYD_CORE_TIMEFMT_H
#define PAYD_CORE_TIMEFMT_H

#include <stdint.h>

#define RFC3339_STR_MAX 32
#define RFC3339_MS_LEN  24 /* what format_rfc3339_ms writes, always */

int64_t now_us(void);       /* CLOCK_REALTIME */
int64_t monotonic_ns(void); /* CLOCK_MONOTONIC */

/* "2026-10-12T08:31:07.123Z": UTC, always milliseconds (truncated toward the past). Times outside
 * years 0000-9999 are clamped to that range, since RFC 3339 has four-digit years only. */
void format_rfc3339_ms(int64_t unix_us, char out[RFC3339_STR_MAX]);

/* Accepts "Z"/"z" or ±hh:mm, an optional fraction of 1-6 digits, 'T' or 't' between date and
 * time; rejects impossible dates (Feb 30), leap seconds (:60) and anything else. 0 ok / -1. */
int parse_rfc3339(const char *s, int64_t *out_us);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1-12, any year). */
int64_t days_from_civil(int64_t year, int month, int day);

#endif
