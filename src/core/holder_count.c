#include "core/holder_count.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS 1024 /* a power of two; chains stay short up to tens of thousands of holders */

typedef struct entry {
    struct entry *next;
    int64_t count;
    size_t len;
    unsigned char key[HOLDER_KEY_MAX];
} entry;

struct holder_count {
    pthread_mutex_t lock;
    size_t holders;
    entry *buckets[BUCKETS];
};

/* FNV-1a: keys are short and chosen by clients, but a chain only costs a comparison each */
static size_t bucket_of(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return (size_t)(h & (BUCKETS - 1));
}

static entry **find(holder_count *t, const void *key, size_t len)
{
    entry **e = &t->buckets[bucket_of(key, len)];
    while (*e && ((*e)->len != len || memcmp((*e)->key, key, len)))
        e = &(*e)->next;
    return e;
}

holder_count *holder_count_new(void)
{
    holder_count *t = calloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

void holder_count_free(holder_count *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < BUCKETS; i++)
        while (t->buckets[i]) {
            entry *next = t->buckets[i]->next;
            free(t->buckets[i]);
            t->buckets[i] = next;
        }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

int64_t holder_count_take(holder_count *t, const void *holder, size_t len)
{
    if (len > HOLDER_KEY_MAX)
        len = HOLDER_KEY_MAX;
    pthread_mutex_lock(&t->lock);
    entry **e = find(t, holder, len);
    if (!*e) {
        *e = calloc(1, sizeof **e);
        (*e)->len = len;
        memcpy((*e)->key, holder, len);
        t->holders++;
    }
    int64_t count = ++(*e)->count;
    pthread_mutex_unlock(&t->lock);
    return count;
}

void holder_count_give(holder_count *t, const void *holder, size_t len)
{
    if (len > HOLDER_KEY_MAX)
        len = HOLDER_KEY_MAX;
    pthread_mutex_lock(&t->lock);
    entry **e = find(t, holder, len);
    if (*e && --(*e)->count <= 0) {
        entry *gone = *e;
        *e = gone->next;
        free(gone);
        t->holders--;
    }
    pthread_mutex_unlock(&t->lock);
}

int64_t holder_count_of(holder_count *t, const void *holder, size_t len)
{
    if (len > HOLDER_KEY_MAX)
        len = HOLDER_KEY_MAX;
    pthread_mutex_lock(&t->lock);
    entry **e = find(t, holder, len);
    int64_t count = *e ? (*e)->count : 0;
    pthread_mutex_unlock(&t->lock);
    return count;
}

size_t holder_count_holders(holder_count *t)
{
    pthread_mutex_lock(&t->lock);
    size_t n = t->holders;
    pthread_mutex_unlock(&t->lock);
    return n;
}
