#ifndef PAYD_CORE_ARENA_H
#define PAYD_CORE_ARENA_H
/* A per-request bump allocator: everything a request allocates is freed at once when it ends,
 * so request code never frees by hand. */
#include <stddef.h>

typedef struct arena_block arena_block;
typedef struct arena {
    arena_block *head;
    char inline_space[2048]; /* most requests never touch malloc */
    size_t inline_used;
} arena;

void arena_init(arena *a);
void *arena_alloc(arena *a, size_t size); /* zeroed, 16-byte aligned; aborts on OOM */
char *arena_strdup(arena *a, const char *s);
char *arena_strndup(arena *a, const char *s, size_t n);
char *arena_printf(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void arena_free(arena *a);

#endif
