/* Snowflake id generation and its text form. */
#include "core/ids.h"

#include <stdbool.h>
#include <string.h>

#include "core/timefmt.h"

#define NODE_BITS     10
#define SEQ_BITS      12
#define TIME_BITS     41
#define MAX_NODE      ((1 << NODE_BITS) - 1)
#define MAX_SEQ       ((1 << SEQ_BITS) - 1)
#define MAX_TIME      ((1LL << TIME_BITS) - 1)
#define DEFAULT_DRIFT 5000
#define DIGITS        13 /* 13 * 5 = 65 bits: the first digit carries only the top 4 bits */

static const char ALPHABET[] = "0123456789abcdefghjkmnpqrstvwxyz";

static int64_t realtime_ms(void *ctx)
{
    return now_us() / 1000;
}

int id_generator_init(id_generator *g, int node_id, ids_clock_fn clock, void *clock_ctx)
{
    if (node_id < 0 || node_id > MAX_NODE)
        return -1;
    if (pthread_mutex_init(&g->lock, NULL) != 0)
        return -1;
    g->node_id = node_id;
    g->last_ms = INT64_MIN; /* nothing issued yet: any clock reading is ahead */
    g->sequence = 0;
    g->clock = clock ? clock : realtime_ms;
    g->clock_ctx = clock_ctx;
    g->max_drift_ms = DEFAULT_DRIFT;
    g->lease_until_ms = 0;
    g->mark_ms = 0;
    return 0;
}

void id_generator_set_lease_until(id_generator *g, int64_t until_ms)
{
    pthread_mutex_lock(&g->lock);
    g->lease_until_ms = until_ms;
    pthread_mutex_unlock(&g->lock);
}

bool id_generator_leased(id_generator *g)
{
    pthread_mutex_lock(&g->lock);
    int64_t now = g->clock(g->clock_ctx);
    bool leased =
        (!g->lease_until_ms || now < g->lease_until_ms) && (!g->mark_ms || now <= g->mark_ms);
    pthread_mutex_unlock(&g->lock);
    return leased;
}

void id_generator_set_mark(id_generator *g, int64_t mark_ms)
{
    pthread_mutex_lock(&g->lock);
    g->mark_ms = mark_ms;
    pthread_mutex_unlock(&g->lock);
}

void id_generator_floor(id_generator *g, int64_t mark_ms)
{
    pthread_mutex_lock(&g->lock);
    if (g->last_ms < mark_ms) {
        g->last_ms = mark_ms;
        g->sequence = MAX_SEQ; /* the mark's ms may be used up: the next id takes a later one */
    }
    pthread_mutex_unlock(&g->lock);
}

int64_t id_generator_last_ms(id_generator *g)
{
    pthread_mutex_lock(&g->lock);
    int64_t last = g->last_ms;
    pthread_mutex_unlock(&g->lock);
    return last;
}

void id_generator_set_node(id_generator *g, int node_id)
{
    pthread_mutex_lock(&g->lock);
    g->node_id = node_id & MAX_NODE;
    pthread_mutex_unlock(&g->lock);
}

int id_next(id_generator *g, uint64_t *out)
{
    pthread_mutex_lock(&g->lock);
    int64_t now = g->clock(g->clock_ctx);
    if (g->lease_until_ms && now >= g->lease_until_ms) {
        pthread_mutex_unlock(&g->lock);
        return ID_LEASE_LAPSED; /* another node may hold our id by now: issue nothing */
    }
    int64_t ms = g->last_ms;
    int seq = g->sequence + 1;
    if (now > ms) {
        ms = now;
        seq = 0;
    } else if (seq > MAX_SEQ) {
        /* This ms is used up (or the clock is behind us): borrow the next one. */
        ms++;
        seq = 0;
    }
    /* The one rule: never run more than max_drift_ms ahead of the clock. Ids stamped far in the
     * future would be stamped again by a restart without a mark once the clock reaches them. */
    int64_t ahead;
    bool in_range = ms >= PAYD_EPOCH_MS && ms - PAYD_EPOCH_MS <= MAX_TIME;
    bool near = in_range && !__builtin_sub_overflow(ms, now, &ahead) && ahead <= g->max_drift_ms;
    int rc = -1;
    if (near && g->mark_ms && ms > g->mark_ms) {
        rc = ID_LEASE_LAPSED; /* past the mark the database holds for us: until the renewal */
    } else if (near) {
        g->last_ms = ms;
        g->sequence = seq;
        *out = (uint64_t)(ms - PAYD_EPOCH_MS) << (NODE_BITS + SEQ_BITS) |
               (uint64_t)g->node_id << SEQ_BITS | (uint64_t)seq;
        rc = 0;
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

char *id_digits(uint64_t id, char *out)
{
    /* 5 bits a digit, the most significant first; written out, as every row of a list page has
     * an id or two */
#define DIGIT(i) out[i] = ALPHABET[id >> (5 * (DIGITS - 1 - (i))) & 31]
    DIGIT(0);
    DIGIT(1);
    DIGIT(2);
    DIGIT(3);
    DIGIT(4);
    DIGIT(5);
    DIGIT(6);
    DIGIT(7);
    DIGIT(8);
    DIGIT(9);
    DIGIT(10);
    DIGIT(11);
    DIGIT(12);
#undef DIGIT
    _Static_assert(DIGITS == 13, "one DIGIT line a digit");
    return out + DIGITS;
}

size_t id_format(uint64_t id, const char *prefix, char out[ID_STR_MAX])
{
    size_t plen = prefix ? strlen(prefix) : 0;
    if (plen == 0 || plen > ID_PREFIX_MAX) {
        out[0] = '\0';
        return 0;
    }
    memcpy(out, prefix, plen);
    out[plen] = '_';
    *id_digits(id, out + plen + 1) = '\0';
    return plen + 1 + DIGITS;
}

/* Value of one lowercase Crockford digit, or -1. Uppercase and the ambiguous i, l, o, u are
 * refused rather than folded so that every id has exactly one spelling. */
static int digit_value(char c)
{
    const char *hit = c ? strchr(ALPHABET, c) : NULL;
    return hit ? (int)(hit - ALPHABET) : -1;
}

int id_parse(const char *s, const char *prefix, uint64_t *out)
{
    if (s == NULL || prefix == NULL)
        return -1;
    size_t plen = strlen(prefix);
    if (plen == 0 || strncmp(s, prefix, plen) != 0 || s[plen] != '_')
        return -1;
    const char *digits = s + plen + 1;
    uint64_t v = 0;
    for (int i = 0; i < DIGITS; i++) {
        int d = digit_value(digits[i]);
        if (d < 0 || (i == 0 && d > 15)) /* a first digit above 15 would need a 65th bit */
            return -1;
        v = v << 5 | (uint64_t)d;
    }
    if (digits[DIGITS] != '\0')
        return -1;
    *out = v;
    return 0;
}

id_parts id_decode(uint64_t id)
{
    id_parts p = {
        .unix_ms = (int64_t)(id >> (NODE_BITS + SEQ_BITS)) + PAYD_EPOCH_MS,
        .node_id = (int)(id >> SEQ_BITS & MAX_NODE),
        .sequence = (int)(id & MAX_SEQ),
    };
    return p;
}

int64_t id_first_of_ms(int64_t unix_ms)
{
    int64_t ms = unix_ms - PAYD_EPOCH_MS;
    if (ms <= 0)
        return 0;
    if (ms > MAX_TIME)
        return INT64_MAX;
    return ms << (NODE_BITS + SEQ_BITS);
}
