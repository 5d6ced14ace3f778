#include "http/conn_guard.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "core/timefmt.h"

struct guarded_conn {
    int fd;
    atomic_llong deadline_ns; /* 0: headers complete, not watched */
    guarded_conn *prev, *next;
};

struct conn_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    guarded_conn *head;
    int64_t timeout_ns;
    bool stopping;
    pthread_t thread;
};

static void *watchdog(void *arg)
{
    conn_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        int64_t now = monotonic_ns();
        for (guarded_conn *c = g->head; c; c = c->next) {
            int64_t d = atomic_load(&c->deadline_ns);
            if (d && now > d) {
                /* the event loop sees the socket fail and closes the connection itself */
                shutdown(c->fd, SHUT_RDWR);
                atomic_store(&c->deadline_ns, 0);
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

conn_guard *conn_guard_start(int64_t header_timeout_ms)
{
    conn_guard *g = calloc(1, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->timeout_ns = header_timeout_ms * 1000000;
    pthread_create(&g->thread, NULL, watchdog, g);
    return g;
}

void conn_guard_stop(conn_guard *g)
{
    if (!g)
        return;
    pthread_mutex_lock(&g->lock);
    g->stopping = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    while (g->head) {
        guarded_conn *next = g->head->next;
        free(g->head);
        g->head = next;
    }
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->wake);
    free(g);
}

guarded_conn *conn_guard_open(conn_guard *g, int fd)
{
    guarded_conn *c = calloc(1, sizeof *c);
    c->fd = fd;
    atomic_store(&c->deadline_ns, monotonic_ns() + g->timeout_ns);
    pthread_mutex_lock(&g->lock);
    c->next = g->head;
    if (g->head)
        g->head->prev = c;
    g->head = c;
    pthread_mutex_unlock(&g->lock);
    return c;
}

void conn_guard_close(conn_guard *g, guarded_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&g->lock);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&g->lock);
    free(c);
}

void conn_guard_headers_done(guarded_conn *c)
{
    if (c)
        atomic_store(&c->deadline_ns, 0);
}

void conn_guard_rearm(conn_guard *g, guarded_conn *c)
{
    if (c)
        atomic_store(&c->deadline_ns, monotonic_ns() + g->timeout_ns);
}
