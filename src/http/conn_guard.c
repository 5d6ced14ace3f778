#include "http/conn_guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/holder_count.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/timefmt.h"

/* How many connections over its cap a client gets answered (429 too_many_connections) in one
 * second; its others in that second are closed at accept. Enough for any client that backs off
 * to learn why; a flood gets the cheap close. */
#define REFUSALS_ANSWERED_PER_SECOND 16
#define REFUSAL_SLOTS                256 /* clients over their cap tracked at once (lossy) */

/* One client's refusals in one second. Slots are shared by hash: two flooding clients in one
 * slot reset each other's count, which only lets a few more refusals be answered. */
typedef struct refusal_slot {
    char client[64];
    int64_t second;
    int answered;
    bool dropping;
} refusal_slot;

enum phase { PHASE_HEADERS, PHASE_BODY, PHASE_ANSWERING, PHASE_TIMED_OUT };

struct guarded_conn {
    int fd;
    bool over_limit;        /* past --max-connections */
    bool over_client_limit; /* past --max-connections-per-client */
    bool counted;           /* holds a place under --max-connections */
    char client[64];        /* whom it is counted for per client; "" for none */
    atomic_int phase;
    atomic_llong deadline_ns; /* 0: not watched */
    int64_t request_start_ns;
    char request_id[130];
    guarded_conn *prev, *next;
};

struct conn_guard {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    guarded_conn *head;
    int64_t header_ns, body_ns, request_ns;
    int64_t max_connections, max_per_client;
    atomic_llong open_connections;
    holder_count *per_client; /* open connections per client address */
    pthread_mutex_t refusal_lock;
    refusal_slot refusals[REFUSAL_SLOTS];
    bool stopping;
    pthread_t thread;
};

static int64_t earlier(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The 408, written straight to the socket: libmicrohttpd is waiting for body bytes on this
 * connection and writes nothing until they come, so the bytes cannot interleave with its own. */
static void answer_timeout(guarded_conn *c)
{
    jsonw body;
    jw_init(&body);
    jw_object_begin(&body);
    jw_key(&body, "type");
    jw_string(&body, "about:blank");
    jw_key(&body, "title");
    jw_string(&body, "Request not received in time");
    jw_key(&body, "status");
    jw_int(&body, 408);
    jw_key(&body, "detail");
    jw_string(&body, "the request body did not arrive within the deadline");
    jw_key(&body, "code");
    jw_string(&body, "request_timeout");
    jw_key(&body, "request_id");
    jw_string(&body, c->request_id);
    jw_object_end(&body);
    size_t body_len;
    char *json = jw_take(&body, &body_len);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n"
                     "Content-Type: application/problem+json\r\nX-Request-Id: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     c->request_id, body_len);
    /* best effort on a non-blocking socket: a client that does not read loses the answer */
    if (send(c->fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n)
        (void)send(c->fd, json, body_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    free(json);
}

static void *watchdog(void *arg)
{
    conn_guard *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->stopping) {
        int64_t now = monotonic_ns();
        for (guarded_conn *c = g->head; c; c = c->next) {
            int64_t d = atomic_load(&c->deadline_ns);
            if (!d || now <= d)
                continue;
            atomic_store(&c->deadline_ns, 0);
            int body = PHASE_BODY;
            if (atomic_compare_exchange_strong(&c->phase, &body, PHASE_TIMED_OUT)) {
                answer_timeout(c);
                shutdown(c->fd, SHUT_RDWR);
            } else if (atomic_load(&c->phase) == PHASE_HEADERS) {
                /* the event loop sees the socket fail and closes the connection itself */
                shutdown(c->fd, SHUT_RDWR);
            }
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&g->wake, &g->lock, &until);
    }
    pthread_mutex_unlock(&g->lock);
    return NULL;
}

conn_guard *conn_guard_start(const conn_guard_limits *limits)
{
    conn_guard *g = calloc(1, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->wake, NULL);
    g->header_ns = limits->header_timeout_ms * 1000000;
    g->body_ns = limits->body_timeout_ms * 1000000;
    g->request_ns = limits->request_timeout_ms * 1000000;
    g->max_connections = limits->max_connections;
    g->max_per_client = limits->max_connections_per_client;
    g->per_client = holder_count_new();
    pthread_mutex_init(&g->refusal_lock, NULL);
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
    holder_count_free(g->per_client);
    pthread_mutex_destroy(&g->refusal_lock);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->wake);
    free(g);
}

/* Stops counting the connection for its client. */
static void release_client(conn_guard *g, guarded_conn *c)
{
    if (c->client[0])
        holder_count_give(g->per_client, c->client, strlen(c->client));
    c->client[0] = '\0';
}

static void count_for_client(conn_guard *g, guarded_conn *c, const char *client)
{
    snprintf(c->client, sizeof c->client, "%s", client);
    c->over_client_limit =
        holder_count_take(g->per_client, c->client, strlen(c->client)) > g->max_per_client;
}

/* A refused connection has a second to send the request that gets its answer: it must not hold
 * its place for the whole header deadline. */
static void shorten_header_deadline(conn_guard *g, guarded_conn *c)
{
    atomic_store(&c->deadline_ns, c->request_start_ns + earlier(g->header_ns, 1000000000LL));
}

guarded_conn *conn_guard_open(conn_guard *g, int fd, const char *client)
{
    guarded_conn *c = calloc(1, sizeof *c);
    c->fd = fd;
    if (client && g->max_per_client > 0)
        count_for_client(g, c, client);
    if (!c->over_client_limit) {
        c->counted = true;
        c->over_limit = atomic_fetch_add(&g->open_connections, 1) >= g->max_connections;
    }
    conn_guard_rearm(g, c);
    if (c->over_limit || c->over_client_limit)
        shorten_header_deadline(g, c);
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
    if (c->counted)
        atomic_fetch_sub(&g->open_connections, 1);
    release_client(g, c);
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

static size_t slot_of(const char *client)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = client; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % REFUSAL_SLOTS;
}

static void log_dropping(const char *client)
{
    jsonw line;
    log_begin(&line, "warn", "closing a client's connections at accept: over its cap");
    jw_key(&line, "client");
    jw_string(&line, client);
    jw_key(&line, "answered_this_second");
    jw_int(&line, REFUSALS_ANSWERED_PER_SECOND);
    log_end(&line);
}

bool conn_guard_admit(conn_guard *g, const char *client)
{
    if (g->max_per_client <= 0 ||
        holder_count_of(g->per_client, client, strlen(client)) < g->max_per_client)
        return true;
    int64_t second = monotonic_ns() / 1000000000;
    bool answer, first_drop = false;
    pthread_mutex_lock(&g->refusal_lock);
    refusal_slot *slot = &g->refusals[slot_of(client)];
    if (slot->second != second || strcmp(slot->client, client) != 0) {
        snprintf(slot->client, sizeof slot->client, "%s", client);
        slot->second = second;
        slot->answered = 0;
        slot->dropping = false;
    }
    answer = slot->answered < REFUSALS_ANSWERED_PER_SECOND;
    if (answer) {
        slot->answered++;
    } else if (!slot->dropping) {
        slot->dropping = first_drop = true;
    }
    pthread_mutex_unlock(&g->refusal_lock);
    if (first_drop)
        log_dropping(client);
    return answer;
}

bool conn_guard_over_limit(const guarded_conn *c)
{
    return c && c->over_limit;
}

void conn_guard_attribute(conn_guard *g, guarded_conn *c, const char *client)
{
    if (!c || g->max_per_client <= 0 || !strcmp(c->client, client))
        return;
    release_client(g, c);
    count_for_client(g, c, client);
}

bool conn_guard_over_client_limit(const guarded_conn *c)
{
    return c && c->over_client_limit;
}

void conn_guard_headers_done(conn_guard *g, guarded_conn *c, const char *request_id)
{
    if (!c)
        return;
    snprintf(c->request_id, sizeof c->request_id, "%s", request_id);
    /* the new deadline first: the watchdog must never see the body phase with the old one */
    atomic_store(&c->deadline_ns,
                 earlier(monotonic_ns() + g->body_ns, c->request_start_ns + g->request_ns));
    atomic_store(&c->phase, PHASE_BODY);
}

bool conn_guard_body_done(guarded_conn *c)
{
    if (!c)
        return true;
    int body = PHASE_BODY;
    if (atomic_compare_exchange_strong(&c->phase, &body, PHASE_ANSWERING)) {
        atomic_store(&c->deadline_ns, 0);
        return true;
    }
    return atomic_load(&c->phase) != PHASE_TIMED_OUT;
}

bool conn_guard_timed_out(const guarded_conn *c)
{
    return c && atomic_load(&c->phase) == PHASE_TIMED_OUT;
}

void conn_guard_rearm(conn_guard *g, guarded_conn *c)
{
    if (!c)
        return;
    int64_t now = monotonic_ns();
    c->request_start_ns = now;
    atomic_store(&c->phase, PHASE_HEADERS);
    atomic_store(&c->deadline_ns, now + earlier(g->header_ns, g->request_ns));
}
