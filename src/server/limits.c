#include "server/limits.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/decimal.h"
#include "core/gcra.h"
#include "core/holder_count.h"
#include "core/timefmt.h"
#include "http/server.h"
#include "node/app.h"
#include "node/limits_redis.h"
#include "node/metrics.h"

/* Decimal digits of v into out (at least 24 bytes). */
static void format_int(char *out, int64_t v)
{
    *decimal_put(out, v) = '\0';
}

static void client_key(request *req, char *out, size_t cap)
{
    if (req->authenticated) {
        out[0] = 'u';
        out[1] = ':';
        format_int(out + 2, (int64_t)req->user.id);
        return;
    }
    char addr[64];
    if (!req->exchange || !http_exchange_client_address(req->exchange, addr, sizeof addr))
        snprintf(addr, sizeof addr, "unknown");
    snprintf(out, cap, "a:%s", addr);
}

/* a + b + c + d into out (at least 96 bytes; the parts are short and known). */
static void join(char *out, const char *a, const char *b, const char *c, const char *d)
{
    size_t n = 0;
    for (const char *parts[] = {a, b, c, d}, **p = parts; p < parts + 4; p++) {
        size_t len = strlen(*p);
        memcpy(out + n, *p, len);
        n += len;
    }
    out[n] = '\0';
}

static int64_t ceil_seconds(int64_t ns)
{
    return (ns + 999999999) / 1000000000;
}

bool in_progress_or_reply(request *req)
{
    app *a = req->app;
    uint64_t key = req->user.key_id;
    req->counted_in_progress = true;
    if (holder_count_take(a->keys_in_progress, &key, sizeof key) <= a->cfg.max_in_progress_per_key)
        return true;
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_TOO_MANY_IN_PROGRESS,
                "this API key has --max-in-progress-per-key requests in progress; retry when one "
                "has been answered");
    return false;
}

void in_progress_release(request *req)
{
    if (!req->counted_in_progress)
        return;
    uint64_t key = req->user.key_id;
    holder_count_give(req->app->keys_in_progress, &key, sizeof key);
    req->counted_in_progress = false;
}

bool rate_limit_or_reply(request *req)
{
    app *a = req->app;
    if (!a->cfg.rate_limiting)
        return true;
    gcra_policy own;
    const gcra_policy *policy = &a->default_rate;
    if (req->authenticated && req->user.rate_count > 0) {
        own = gcra_policy_from_rate(req->user.rate_count, req->user.rate_period_ms, 0);
        policy = &own;
    }
    char key[80];
    client_key(req, key, sizeof key);
    int64_t now = monotonic_ns();
    /* shared in Redis when configured; the local table when not, or while Redis is away */
    gcra_decision d;
    if (!a->rate_store || !rate_store_check(a->rate_store, key, policy, &d))
        d = gcra_check(a->limiter, key, policy, now);

    /* six headers on every limited response: built by hand, this is the hot path */
    int64_t reset_after = ceil_seconds(d.reset_after_ns);
    int64_t window = ceil_seconds(policy->emission_interval_ns * policy->burst);
    char limit[24], remaining[24], reset_at[24], reset_in[24], v[96];
    format_int(limit, d.limit);
    format_int(remaining, d.remaining);
    format_int(reset_at, (int64_t)time(NULL) + reset_after);
    format_int(reset_in, reset_after);
    reply_header(req, "X-RateLimit-Limit", limit);
    reply_header(req, "X-RateLimit-Remaining", remaining);
    reply_header(req, "X-RateLimit-Reset", reset_at);
    reply_header(req, "X-RateLimit-Reset-After", reset_in);
    char window_s[24];
    format_int(window_s, window);
    join(v, "\"default\";q=", limit, ";w=", window_s);
    reply_header(req, "RateLimit-Policy", v);
    join(v, "\"default\";r=", remaining, ";t=", reset_in);
    reply_header(req, "RateLimit", v);
    if (d.allowed)
        return true;

    int64_t retry = ceil_seconds(d.retry_after_ns);
    snprintf(v, sizeof v, "%lld", (long long)(retry < 1 ? 1 : retry));
    reply_header(req, "Retry-After", v);
    reply_error(req, ERR_RATE_LIMITED, "rate limit exceeded; retry after Retry-After seconds");
    metrics_count_rate_limited(a->metrics);
    return false;
}
