/* Snowflake ids (§1): 41-bit ms since PAYD_EPOCH_MS, 10-bit node id, 12-bit sequence, written as
 * "<prefix>_<13 lowercase Crockford base32 chars>" so that string order equals numeric order. */
#ifndef PAYD_CORE_IDS_H
#define PAYD_CORE_IDS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAYD_EPOCH_MS 1767225600000LL /* 2026-01-01T00:00:00Z */
#define ID_STR_MAX    24
#define ID_PREFIX_MAX 9 /* ID_STR_MAX - '_' - 13 digits - NUL */

typedef int64_t (*ids_clock_fn)(void *ctx); /* ms since the Unix epoch */

typedef struct id_generator {
    pthread_mutex_t lock;
    int node_id;
    int64_t last_ms; /* timestamp of the last id issued (may run ahead of a clock that went back) */
    int sequence;
    ids_clock_fn clock;
    void *clock_ctx;
    int64_t max_drift_ms; /* how far ahead of the clock we may run before refusing (default 5000) */
    int64_t lease_until_ms; /* 0: no bound; else no id is issued once the clock reaches it */
    int64_t mark_ms; /* 0: no bound; else no id carries a later ms (the node id's stored mark) */
} id_generator;

/* clock NULL = realtime; node 0..1023 else -1 */
int id_generator_init(id_generator *g, int node_id, ids_clock_fn clock, void *clock_ctx);

/* Thread-safe; 0 ok. -1 when issuing would need a timestamp more than max_drift_ms ahead of the
 * clock (the clock went back that far, or the sequence ran out too often), or when the clock is
 * outside the 41-bit range (before 2026 or after 2095). ID_LEASE_LAPSED past the lease or the
 * mark (below). Never issues a duplicate or smaller id. */
int id_next(id_generator *g, uint64_t *out);
/* Issues a node id's ids for the generator (0..1023), for a lease taken after init. */
void id_generator_set_node(id_generator *g, int node_id);

#define ID_LEASE_LAPSED (-2)
/* The node id is leased (docs/concurrency.md): ids are issued only while the clock is before
 * until_ms, which the lease's renewals move forward. id_next answers ID_LEASE_LAPSED after it. */
void id_generator_set_lease_until(id_generator *g, int64_t until_ms);
/* Whether id_next would issue now as far as the lease goes: the clock is before its bound and
 * before the mark (below). */
bool id_generator_leased(id_generator *g);

/* The node id's high-water mark (docs/concurrency.md): every id issued under it, by this
 * process or one before, carries a millisecond at or before the mark kept in the database.
 * set_mark: the mark just stored; id_next answers ID_LEASE_LAPSED rather than issue an id
 * stamped later (0: no bound). floor: the mark found when the id was taken; every id from now
 * on is stamped after it, borrowing milliseconds ahead of a clock behind it within
 * max_drift_ms as id_next always does. last_ms: the newest id's millisecond, INT64_MIN if
 * none was issued and no floor set. */
void id_generator_set_mark(id_generator *g, int64_t mark_ms);
void id_generator_floor(id_generator *g, int64_t mark_ms);
int64_t id_generator_last_ms(id_generator *g);

/* prefix must be 1..ID_PREFIX_MAX chars; otherwise out is set to "". Returns the length. */
size_t id_format(uint64_t id, const char *prefix, char out[ID_STR_MAX]);
/* The 13 digits of an id after its "<prefix>_", at out (no NUL); returns their end. */
char *id_digits(uint64_t id, char *out);

/* 0 ok; -1 if malformed, wrong prefix, wrong length, uppercase or invalid chars */
int id_parse(const char *s, const char *prefix, uint64_t *out);

typedef struct {
    int64_t unix_ms;
    int node_id;
    int sequence;
} id_parts;
id_parts id_decode(uint64_t id);
/* The first id of a millisecond (since the Unix epoch): every id of an earlier one is smaller,
 * every id of it or of a later one is at least this. Clamped to the ids that can exist: 0
 * before PAYD_EPOCH_MS, INT64_MAX past the last. An id range is a time range (partitions,
 * retention). */
int64_t id_first_of_ms(int64_t unix_ms);

#endif
