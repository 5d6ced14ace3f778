/* The retry-delay policy of docs/api.md §14, shared by the client library and anything else that
 * retries: exponential backoff with ±30 % jitter, floored by the server's Retry-After.
 * Pure: the caller supplies the random number and the current time, so every rule here is
 * testable without a clock or a dice. */
#ifndef PAYD_CORE_BACKOFF_H
#define PAYD_CORE_BACKOFF_H

#include <stdint.h>

#define BACKOFF_JITTER               0.30 /* each delay is nominal * [1 - JITTER, 1 + JITTER] */
#define BACKOFF_DEFAULT_BASE_MS      1000
#define BACKOFF_DEFAULT_MAX_DELAY_MS 30000

typedef struct backoff_policy {
    int64_t base_ms;      /* nominal delay before the first retry */
    int64_t max_delay_ms; /* cap on the nominal delay; a longer Retry-After means give up */
} backoff_policy;

/* min(base * 2^(retry-1), max_delay) for retry = 1, 2, ...; never overflows. */
int64_t backoff_nominal_ms(const backoff_policy *p, int retry);

/* The nominal delay with jitter applied: nominal * (1 + JITTER * (2u - 1)), u in [0, 1).
 * Jitter is applied after the cap on purpose: clients that all reached max_delay still spread
 * out instead of returning in lockstep. */
int64_t backoff_jittered_ms(const backoff_policy *p, int retry, double u);

/* The whole rule for retry n: the jittered delay, but never less than the server's Retry-After
 * (retry_after_ms < 0: none was sent). 0 and *delay_ms set: retry after that delay.
 * -1: give up, because the server asks for a wait longer than max_delay. */
int backoff_next_delay_ms(const backoff_policy *p, int retry, double u, int64_t retry_after_ms,
                          int64_t *delay_ms);

/* A Retry-After value (RFC 9110 §10.2.3): delta-seconds ("120") or an HTTP-date in any of the
 * three forms a recipient must accept (IMF-fixdate, RFC 850, asctime). now_unix_ms is the current
 * wall-clock time, for the date form; a date in the past gives 0. 0 ok / -1 unparseable. */
int backoff_parse_retry_after(const char *value, int64_t now_unix_ms, int64_t *delay_ms);

/* A uniform double in [0, 1) from 64 random bits (the top 53 are used). */
double backoff_unit_from_bits(uint64_t bits);

#endif
