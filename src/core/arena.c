#include "core/arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct arena_block {
    arena_block *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

void arena_init(arena *a)
{
    a->head = NULL;
    a->inline_used = 0;
}

void *arena_alloc(arena *a, size_t size)
{
    size = ALIGN16(size ? size : 1);
    if (a->inline_used + size <= sizeof a->inline_space) {
        void *p = a->inline_space + a->inline_used;
        a->inline_used += size;
        memset(p, 0, size);
        return p;
    }
    if (!a->head || a->head->used + size > a->head->cap) {
        size_t cap = size > 8192 ? size : 8192;
        arena_block *b = malloc(sizeof *b + cap);
        if (!b)
            abort();
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(arena *a, const char *s)
{
    return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

char *arena_printf(arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = arena_alloc(a, (size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void arena_free(arena *a)
{
    while (a->head) {
        arena_block *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->inline_used = 0;
}
