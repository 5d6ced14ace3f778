/* GCRA: a key may make a request at `now` if its TAT, advanced by one emission interval, is not
 * more than burst intervals ahead of now. The TAT is the whole state, so forgetting a key whose TAT
 * has passed changes nothing: that is what keeps the table small. */
#include "core/gcra.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_MS       1000000LL
#define INITIAL_BUCKETS 16

/* Saturating arithmetic: policies come from configuration, so extreme values must not wrap. */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r; /* only used with a, b >= 1 */
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

gcra_policy gcra_policy_from_rate(int64_t count, int64_t period_ms, int64_t burst)
{
    count = max64(count, 1);
    period_ms = max64(period_ms, 1);
    /* period_ms * 1e6 overflows only past 292 years; saturate rather than wrap. */
    int64_t interval = sat_mul(period_ms, NS_PER_MS) / count;
    if (burst <= 0) {
        /* One second's worth: count * 1000 / period_ms, computed without overflow. */
        __int128 per_second = (__int128)count * 1000 / period_ms;
        burst = per_second > INT64_MAX ? INT64_MAX : (int64_t)per_second;
    }
    gcra_policy p = {.emission_interval_ns = max64(interval, 1), .burst = max64(burst, 1)};
    return p;
}

gcra_decision gcra_apply(int64_t *tat, const gcra_policy *p, int64_t now_ns)
{
    int64_t interval = max64(p->emission_interval_ns, 1);
    int64_t burst = max64(p->burst, 1);
    int64_t window = sat_mul(burst, interval); /* how far ahead of now the TAT may run */
    int64_t base = max64(*tat, now_ns);        /* a TAT in the past means a full quota */
    int64_t new_tat = sat_add(base, interval);
    int64_t allow_at = new_tat - window; /* earliest time this request fits */

    gcra_decision d = {.limit = burst};
    if (now_ns < allow_at) {
        d.allowed = false;
        d.remaining = 0;
        d.reset_after_ns = base - now_ns;
        d.retry_after_ns = allow_at - now_ns;
        return d;
    }
    *tat = new_tat;
    d.allowed = true;
    /* Another request fits while new_tat + k * interval - window <= now. */
    d.remaining = (window - (new_tat - now_ns)) / interval;
    d.reset_after_ns = new_tat - now_ns;
    d.retry_after_ns = 0;
    return d;
}

/* ---- the table ---- */

typedef struct entry {
    struct entry *next;
    uint64_t hash;
    int64_t tat;
    char key[]; /* copied */
} entry;

typedef struct {
    pthread_spinlock_t lock; /* held for a hash lookup and a few arithmetic steps */
    entry **buckets;         /* a power of two of them, grown up to the stripe's key limit */
    size_t nbuckets;
    size_t count;
} stripe;

struct gcra_table {
    stripe *stripes;
    size_t nstripes;
    size_t max_keys; /* per stripe */
    uint64_t k0, k1; /* hash key: keys may be client addresses, so an attacker must not be able to
                        pick addresses that all land in one chain */
};

/* SipHash-2-4 (Aumasson and Bernstein), a keyed hash made for exactly that. */
#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                                  \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                                     \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                                     \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                                  \
    } while (0)

static uint64_t siphash24(const void *data, size_t len, uint64_t k0, uint64_t k1)
{
    const uint8_t *in = data;
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    uint64_t last = (uint64_t)len << 56;
    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = 0;
        for (int j = 7; j >= 0; j--)
            m = m << 8 | in[i + j]; /* little-endian, whatever the host */
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; j < len % 8; j++)
        last |= (uint64_t)in[whole + j] << (8 * j);
    v3 ^= last;
    SIPROUND;
    SIPROUND;
    v0 ^= last;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

gcra_table *gcra_table_create(size_t stripes, size_t max_keys_per_stripe)
{
    if (stripes == 0 || max_keys_per_stripe == 0)
        return NULL;
    gcra_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    uint8_t seed[16];
    t->stripes = calloc(stripes, sizeof *t->stripes);
    if (t->stripes == NULL || RAND_bytes(seed, sizeof seed) != 1) {
        free(t->stripes);
        free(t);
        return NULL;
    }
    memcpy(&t->k0, seed, 8);
    memcpy(&t->k1, seed + 8, 8);
    t->max_keys = max_keys_per_stripe;
    for (; t->nstripes < stripes; t->nstripes++) {
        stripe *s = &t->stripes[t->nstripes];
        s->nbuckets = INITIAL_BUCKETS;
        s->buckets = calloc(s->nbuckets, sizeof *s->buckets);
        if (s->buckets == NULL || pthread_spin_init(&s->lock, PTHREAD_PROCESS_PRIVATE) != 0) {
            free(s->buckets);
            gcra_table_free(t);
            return NULL;
        }
    }
    return t;
}

void gcra_table_free(gcra_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nstripes; i++) {
        stripe *s = &t->stripes[i];
        for (size_t b = 0; b < s->nbuckets; b++) {
            for (entry *e = s->buckets[b], *next; e; e = next) {
                next = e->next;
                free(e);
            }
        }
        free(s->buckets);
        pthread_spin_destroy(&s->lock);
    }
    free(t->stripes);
    free(t);
}

/* The high half of the hash picks the stripe, the low half the bucket, so the two are unrelated. */
static stripe *stripe_of(gcra_table *t, uint64_t hash)
{
    return &t->stripes[(hash >> 32) % t->nstripes];
}

static entry **bucket_of(stripe *s, uint64_t hash)
{
    return &s->buckets[hash & (s->nbuckets - 1)];
}

/* Doubles the buckets while they are fewer than the keys; on failure chains just get longer. */
static void maybe_grow(stripe *s)
{
    if (s->count <= s->nbuckets || s->nbuckets > SIZE_MAX / 2 / sizeof(entry *))
        return;
    size_t n = s->nbuckets * 2;
    entry **buckets = calloc(n, sizeof *buckets);
    if (buckets == NULL)
        return;
    for (size_t b = 0; b < s->nbuckets; b++) {
        for (entry *e = s->buckets[b], *next; e; e = next) {
            next = e->next;
            e->next = buckets[e->hash & (n - 1)];
            buckets[e->hash & (n - 1)] = e;
        }
    }
    free(s->buckets);
    s->buckets = buckets;
    s->nbuckets = n;
}

/* Drops the stripe's idle keys. With evict_oldest and none idle, drops the key with the oldest TAT
 * instead: that key's next request is then treated as a new key's, so a full table can only make
 * the limiter more lenient for that one key, never stricter for anyone. */
static size_t evict(stripe *s, int64_t now_ns, bool evict_oldest)
{
    size_t dropped = 0;
    entry **oldest = NULL;
    for (size_t b = 0; b < s->nbuckets; b++) {
        for (entry **link = &s->buckets[b]; *link;) {
            entry *e = *link;
            if (e->tat <= now_ns) {
                *link = e->next;
                free(e);
                dropped++;
                continue;
            }
            if (oldest == NULL || e->tat < (*oldest)->tat)
                oldest = link;
            link = &e->next;
        }
    }
    if (dropped == 0 && evict_oldest && oldest) {
        entry *e = *oldest;
        *oldest = e->next;
        free(e);
        dropped++;
    }
    s->count -= dropped;
    return dropped;
}

gcra_decision gcra_check(gcra_table *t, const char *key, const gcra_policy *p, int64_t now_ns)
{
    if (key == NULL)
        key = "";
    size_t len = strlen(key);
    uint64_t hash = siphash24(key, len, t->k0, t->k1);
    stripe *s = stripe_of(t, hash);

    pthread_spin_lock(&s->lock);
    entry *found = NULL;
    for (entry *e = *bucket_of(s, hash); e && !found; e = e->next)
        if (e->hash == hash && strcmp(e->key, key) == 0)
            found = e;
    int64_t tat = found ? found->tat : 0;
    gcra_decision d = gcra_apply(&tat, p, now_ns);
    if (found) {
        found->tat = tat;
    } else if (d.allowed) {
        /* Only an allowed request leaves state behind. If memory runs out the key goes
         * unremembered: the limiter fails open rather than refusing everyone. */
        if (s->count >= t->max_keys)
            evict(s, now_ns, true);
        entry *e = malloc(sizeof *e + len + 1);
        if (e) {
            e->hash = hash;
            e->tat = tat;
            memcpy(e->key, key, len + 1);
            entry **head = bucket_of(s, hash);
            e->next = *head;
            *head = e;
            s->count++;
            maybe_grow(s);
        }
    }
    pthread_spin_unlock(&s->lock);
    return d;
}

size_t gcra_evict_idle(gcra_table *t, int64_t now_ns)
{
    size_t dropped = 0;
    for (size_t i = 0; i < t->nstripes; i++) {
        stripe *s = &t->stripes[i];
        pthread_spin_lock(&s->lock);
        dropped += evict(s, now_ns, false);
        pthread_spin_unlock(&s->lock);
    }
    return dropped;
}

size_t gcra_size(gcra_table *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nstripes; i++) {
        stripe *s = &t->stripes[i];
        pthread_spin_lock(&s->lock);
        n += s->count;
        pthread_spin_unlock(&s->lock);
    }
    return n;
}
