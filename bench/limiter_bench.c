/* The rate limiter's per-request cost, measured in isolation (bench/run.sh also compares payd
 * with --rate-limiting true and false, but wrk's run-to-run noise is larger than the effect):
 *   gcra_check           the limiter's state update: hash, stripe lock, GCRA step
 *   rate_limit_or_reply  what payd runs per request: gcra_check plus the six rate-limit headers
 * each on one thread, and gcra_check on two threads sharing one key (two HTTP threads serving one
 * user, the contended case) and on two distinct keys.
 *
 *   cc -O2 -Isrc bench/limiter_bench.c build/libpaydserver.a build/libpaydcore.a \
 *      -lmicrohttpd -ljansson -lsqlite3 -lpq -lcurl -lssl -lcrypto -lpthread -o limiter_bench
 * prints one JSON object of nanoseconds per call.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/gcra.h"
#include "node/app.h"
#include "server/limits.h"

#define ITERATIONS 2000000L

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct {
    gcra_table *table;
    const char *key;
    gcra_policy policy;
    long allowed;
} worker_arg;

static void *gcra_worker(void *p)
{
    worker_arg *a = p;
    for (long i = 0; i < ITERATIONS; i++)
        a->allowed += gcra_check(a->table, a->key, &a->policy, now_ns()).allowed;
    return NULL;
}

/* ns per check as one thread sees it (wall time / its checks) */
static double gcra_run(int threads, const char *keys[])
{
    gcra_table *t = gcra_table_create(64, 16384); /* payd's own sizes */
    worker_arg args[2];
    pthread_t tids[2];
    gcra_policy policy = gcra_policy_from_rate(100000000, 1000, 0); /* the bench user's limit */
    int64_t start = now_ns();
    for (int i = 0; i < threads; i++) {
        args[i] = (worker_arg){.table = t, .key = keys[i], .policy = policy};
        pthread_create(&tids[i], NULL, gcra_worker, &args[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    double ns = (double)(now_ns() - start) / ITERATIONS;
    gcra_table_free(t);
    return ns;
}

/* payd's own middleware on a request like the one it builds per connection; the baseline loop
 * does the same arena work without the limiter, and is subtracted. */
static double middleware_run(bool with_limiter)
{
    static app a;
    a.cfg.rate_limiting = true;
    a.limiter = gcra_table_create(64, 16384);
    a.default_rate = gcra_policy_from_rate(100, 1000, 0);
    long allowed = 0;
    int64_t start = now_ns();
    for (long i = 0; i < ITERATIONS; i++) {
        request req;
        memset(&req, 0, offsetof(request, resp_headers));
        req.resp_header_count = 0;
        arena_init(&req.arena);
        req.app = &a;
        req.authenticated = true;
        req.user = (user_info){
            .id = 120615903632027648ULL, .rate_count = 100000000, .rate_period_ms = 1000};
        if (with_limiter)
            allowed += rate_limit_or_reply(&req);
        arena_free(&req.arena);
    }
    double ns = (double)(now_ns() - start) / ITERATIONS;
    gcra_table_free(a.limiter);
    return allowed || !with_limiter ? ns : -1;
}

int main(void)
{
    const char *one[] = {"u:120615903632027648"};
    const char *same[] = {"u:120615903632027648", "u:120615903632027648"};
    const char *distinct[] = {"u:120615903632027648", "u:120615903632027649"};
    gcra_run(1, one); /* warm up */
    double g1 = gcra_run(1, one), g2 = gcra_run(2, same), g3 = gcra_run(2, distinct);
    double base = middleware_run(false), full = middleware_run(true);
    printf("{\"ns_1t\": %.1f, \"ns_2t_same\": %.1f, \"ns_2t_distinct\": %.1f, "
           "\"ns_middleware\": %.1f}\n",
           g1, g2, g3, full - base);
    return 0;
}
