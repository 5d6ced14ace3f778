#include "server/limits.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <time.h>

#include "core/gcra.h"
#include "core/timefmt.h"
#include "server/app.h"
#include "server/metrics.h"

static void client_key(request *req, char *out, size_t cap)
{
    if (req->authenticated) {
        snprintf(out, cap, "u:%llu", (unsigned long long)req->user.id);
        return;
    }
    const union MHD_ConnectionInfo *info =
        req->conn ? MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    char addr[INET6_ADDRSTRLEN] = "unknown";
    if (info && info->client_addr) {
        const struct sockaddr *sa = info->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, addr, sizeof addr);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, addr, sizeof addr);
    }
    snprintf(out, cap, "a:%s", addr);
}

static int64_t ceil_seconds(int64_t ns)
{
    return (ns + 999999999) / 1000000000;
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
    gcra_decision d = gcra_check(a->limiter, key, policy, now);

    int64_t reset_after = ceil_seconds(d.reset_after_ns);
    int64_t window = ceil_seconds(policy->emission_interval_ns * policy->burst);
    char v[160];
    snprintf(v, sizeof v, "%lld", (long long)d.limit);
    reply_header(req, "X-RateLimit-Limit", v);
    snprintf(v, sizeof v, "%lld", (long long)d.remaining);
    reply_header(req, "X-RateLimit-Remaining", v);
    snprintf(v, sizeof v, "%lld", (long long)(time(NULL) + reset_after));
    reply_header(req, "X-RateLimit-Reset", v);
    snprintf(v, sizeof v, "%lld", (long long)reset_after);
    reply_header(req, "X-RateLimit-Reset-After", v);
    snprintf(v, sizeof v, "\"default\";q=%lld;w=%lld", (long long)d.limit, (long long)window);
    reply_header(req, "RateLimit-Policy", v);
    snprintf(v, sizeof v, "\"default\";r=%lld;t=%lld", (long long)d.remaining,
             (long long)reset_after);
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
