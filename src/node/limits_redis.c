#include "node/limits_redis.h"

#include "core/log.h"

#include <hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define IO_TIMEOUT_MS    200 /* a limiter that waits longer than this costs more than it saves */
#define BACKOFF_FIRST_MS 200
#define BACKOFF_MAX_MS   5000
#define MAX_THREAD_CONNS 64

/* KEYS[1]: the key's TAT (µs, Redis clock). ARGV: emission interval (µs), burst.
 * Returns {allowed, remaining, reset_after_us, retry_after_us}; the same step as gcra_apply. */
static const char gcra_script[] =
    "local interval = tonumber(ARGV[1])\n"
    "local burst = tonumber(ARGV[2])\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local tat = tonumber(redis.call('GET', KEYS[1]) or '0')\n"
    "local base = math.max(tat, now)\n"
    "local new_tat = base + interval\n"
    "local window = burst * interval\n"
    "local allow_at = new_tat - window\n"
    "if now < allow_at then return {0, 0, base - now, allow_at - now} end\n"
    "redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX',\n"
    "           math.floor((new_tat - now) / 1000) + 1)\n"
    "return {1, math.floor((window - (new_tat - now)) / interval), new_tat - now, 0}\n";

struct rate_store {
    char host[256];
    int port;
    char sha[41]; /* SCRIPT LOAD's answer, set once */
    pthread_mutex_t lock;
    atomic_int up;
    atomic_bool probing;
    atomic_llong next_try_ns;
    int64_t backoff_ms;
    atomic_int generation; /* bumped on a failure: every thread reconnects */
    pthread_key_t conn_key;
};

typedef struct thread_conn {
    redisContext *ctx;
    int generation;
} thread_conn;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void free_thread_conn(void *p)
{
    thread_conn *tc = p;
    if (tc->ctx)
        redisFree(tc->ctx);
    free(tc);
}

rate_store *rate_store_create(const char *url, char *err, size_t errlen)
{
    const char *prefix = "redis://";
    if (strncmp(url, prefix, strlen(prefix)) != 0) {
        snprintf(err, errlen, "--rate-limit-store: expected redis://HOST:PORT, got '%s'", url);
        return NULL;
    }
    const char *hostport = url + strlen(prefix);
    const char *colon = strrchr(hostport, ':');
    rate_store *r = calloc(1, sizeof *r);
    size_t hostlen = colon ? (size_t)(colon - hostport) : strlen(hostport);
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 6379;
    if (hostlen == 0 || hostlen >= sizeof r->host || (colon && (*end && *end != '/')) || port < 1 ||
        port > 65535) {
        snprintf(err, errlen, "--rate-limit-store: expected redis://HOST:PORT, got '%s'", url);
        free(r);
        return NULL;
    }
    memcpy(r->host, hostport, hostlen);
    r->port = (int)port;
    pthread_mutex_init(&r->lock, NULL);
    pthread_key_create(&r->conn_key, free_thread_conn);
    atomic_store(&r->up, 1); /* until shown otherwise: the first check connects */
    r->backoff_ms = BACKOFF_FIRST_MS;
    return r;
}

void rate_store_free(rate_store *r)
{
    if (!r)
        return;
    thread_conn *tc = pthread_getspecific(r->conn_key);
    if (tc)
        free_thread_conn(tc);
    pthread_key_delete(r->conn_key);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

int rate_store_up(rate_store *r)
{
    return atomic_load(&r->up);
}

static void mark_failed(rate_store *r, const char *error)
{
    pthread_mutex_lock(&r->lock);
    atomic_fetch_add(&r->generation, 1);
    if (atomic_exchange(&r->up, 0)) {
        r->backoff_ms = BACKOFF_FIRST_MS;
        log_error("error", "rate-limit store unreachable; limiting locally until it is back",
                  error);
    } else {
        r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
    }
    atomic_store(&r->next_try_ns, mono_ns() + r->backoff_ms * 1000000);
    pthread_mutex_unlock(&r->lock);
}

static void mark_ok(rate_store *r)
{
    if (!atomic_load(&r->up)) {
        pthread_mutex_lock(&r->lock);
        if (!atomic_exchange(&r->up, 1))
            log_msg("info", "rate-limit store reachable again");
        pthread_mutex_unlock(&r->lock);
    }
}

/* This thread's connection, (re)connected when needed; NULL with the error noted. */
static redisContext *thread_context(rate_store *r, char *err, size_t errlen)
{
    thread_conn *tc = pthread_getspecific(r->conn_key);
    if (!tc) {
        tc = calloc(1, sizeof *tc);
        pthread_setspecific(r->conn_key, tc);
    }
    int generation = atomic_load(&r->generation);
    if (tc->ctx && tc->generation == generation)
        return tc->ctx;
    if (tc->ctx)
        redisFree(tc->ctx);
    struct timeval tv = {0, IO_TIMEOUT_MS * 1000};
    tc->ctx = redisConnectWithTimeout(r->host, r->port, tv);
    tc->generation = generation;
    if (!tc->ctx || tc->ctx->err) {
        snprintf(err, errlen, "%s", tc->ctx ? tc->ctx->errstr : "out of memory");
        if (tc->ctx)
            redisFree(tc->ctx);
        tc->ctx = NULL;
        return NULL;
    }
    redisSetTimeout(tc->ctx, tv);
    if (!r->sha[0]) {
        redisReply *rep = redisCommand(tc->ctx, "SCRIPT LOAD %s", gcra_script);
        if (rep && rep->type == REDIS_REPLY_STRING && rep->len == 40) {
            pthread_mutex_lock(&r->lock);
            memcpy(r->sha, rep->str, 41);
            pthread_mutex_unlock(&r->lock);
        }
        freeReplyObject(rep);
    }
    return tc->ctx;
}

static bool read_decision(redisReply *rep, const gcra_policy *p, gcra_decision *out)
{
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 4)
        return false;
    for (size_t i = 0; i < 4; i++)
        if (rep->element[i]->type != REDIS_REPLY_INTEGER)
            return false;
    *out = (gcra_decision){
        .allowed = rep->element[0]->integer == 1,
        .limit = p->burst,
        .remaining = rep->element[1]->integer,
        .reset_after_ns = rep->element[2]->integer * 1000,
        .retry_after_ns = rep->element[3]->integer * 1000,
    };
    return true;
}

bool rate_store_check(rate_store *r, const char *key, const gcra_policy *p, gcra_decision *out)
{
    bool probe = false;
    if (!atomic_load(&r->up)) {
        /* down: one caller at a time, once the backoff has passed, tries again */
        if (mono_ns() < atomic_load(&r->next_try_ns) || atomic_exchange(&r->probing, true))
            return false;
        probe = true;
    }
    char err[256] = "";
    bool decided = false;
    redisContext *c = thread_context(r, err, sizeof err);
    if (c) {
        char interval[24], burst[24], redis_key[128];
        long long interval_us = p->emission_interval_ns / 1000;
        snprintf(interval, sizeof interval, "%lld", interval_us < 1 ? 1 : interval_us);
        snprintf(burst, sizeof burst, "%lld", (long long)p->burst);
        snprintf(redis_key, sizeof redis_key, "payd:rl:%s", key);
        redisReply *rep =
            r->sha[0] ? redisCommand(c, "EVALSHA %s 1 %s %s %s", r->sha, redis_key, interval, burst)
                      : NULL;
        if (!rep || (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOSCRIPT", 8))) {
            freeReplyObject(rep); /* not loaded (Redis restarted, or flushed): send it whole */
            rep = redisCommand(c, "EVAL %s 1 %s %s %s", gcra_script, redis_key, interval, burst);
        }
        decided = read_decision(rep, p, out);
        if (!decided)
            snprintf(err, sizeof err, "%s",
                     c->err                                  ? c->errstr
                     : rep && rep->type == REDIS_REPLY_ERROR ? rep->str
                                                             : "unexpected reply");
        freeReplyObject(rep);
    }
    if (decided)
        mark_ok(r);
    else
        mark_failed(r, err);
    if (probe)
        atomic_store(&r->probing, false);
    return decided;
}
