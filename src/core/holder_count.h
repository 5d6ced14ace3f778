#ifndef PAYD_CORE_HOLDER_COUNT_H
#define PAYD_CORE_HOLDER_COUNT_H
/* How many things each holder has open right now (connections per client address, requests in
 * progress per API key), for caps on one holder. A hash table of counters under one mutex: a
 * take and its give may race on any threads and the count stays exact, and a holder's entry is
 * freed when its count returns to zero, so the table holds only the holders with something open
 * (a client that connects once from each of a million addresses leaves nothing behind). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct holder_count holder_count;

holder_count *holder_count_new(void);
void holder_count_free(holder_count *t);
/* One more for `holder` (any bytes, at most HOLDER_KEY_MAX); returns its count including this
 * one. Every take is paired with one give, whatever the count it returned. */
#define HOLDER_KEY_MAX 64
int64_t holder_count_take(holder_count *t, const void *holder, size_t len);
void holder_count_give(holder_count *t, const void *holder, size_t len);
/* The holder's count now (0: none open). */
int64_t holder_count_of(holder_count *t, const void *holder, size_t len);
/* How many holders have a count above zero. */
size_t holder_count_holders(holder_count *t);

#endif
