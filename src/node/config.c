#include "node/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "http/server.h"

typedef enum {
    OPT_STRING,
    OPT_INT,
    OPT_INT_OR_AUTO, /* an integer, or "auto" stored as -1 */
    OPT_DURATION,
    OPT_RATE,
    OPT_BOOL
} option_type;

typedef struct config_option {
    const char *flag; /* "rate-limit" → --rate-limit and PAYD_RATE_LIMIT */
    option_type type;
    size_t offset, size;
    const char *default_value;
    int64_t min, max; /* for OPT_INT, and OPT_DURATION in ms */
    const char *help;
} config_option;

#define FIELD(f) offsetof(payd_config, f), sizeof(((payd_config *)0)->f)
#define DAY_MS   (24LL * 3600 * 1000)

static const config_option options[] = {
    {"listen", OPT_STRING, FIELD(listen), "127.0.0.1:8080", 0, 0, "address to serve on, HOST:PORT"},
    {"db", OPT_STRING, FIELD(db), "./payd.db", 0, 0,
     "database: a file path, sqlite:PATH or postgres://..."},
    {"node-id", OPT_INT_OR_AUTO, FIELD(node_id), "auto", 0, 1023,
     "Snowflake node id 0..1023, or auto: lease a free one in the database (an id held by a "
     "live node is refused)"},
    {"processor", OPT_STRING, FIELD(processor), "builtin", 0, 0,
     "card processor: builtin (the simulator) or http://HOST:PORT"},
    {"live-test-tokens", OPT_BOOL, FIELD(live_test_tokens), "false", 0, 0,
     "true lets a live key send the simulator's test tokens (tok_visa, ...) to an http "
     "processor, for one that is `payd processor-sim`"},
    {"rate-limiting", OPT_BOOL, FIELD(rate_limiting), "true", 0, 0,
     "false turns the per-user limiter off (for benchmarks that measure its cost)"},
    {"rate-limit", OPT_RATE, FIELD(rate_limit), "100/s", 0, 0,
     "default per-user request rate, e.g. 100/s, 6000/m"},
    {"rate-burst", OPT_INT, FIELD(rate_burst), "0", 0, 1000000000,
     "burst quota; 0 means one second's worth of the rate"},
    {"idempotency-ttl", OPT_DURATION, FIELD(idempotency_ttl_ms), "24h", 1, 30 * DAY_MS,
     "how long an Idempotency-Key and its stored response live"},
    {"authorization-ttl", OPT_DURATION, FIELD(authorization_ttl_ms), "168h", 1000, 30 * DAY_MS,
     "a manual payment's hold is released and the payment canceled this long after it was "
     "authorized, unless captured (docs/api.md §17)"},
    {"idempotency-lock-timeout", OPT_DURATION, FIELD(idempotency_lock_timeout_ms), "60s", 1, DAY_MS,
     "after this a key still in flight may be taken over by a retry"},
    {"processor-timeout", OPT_DURATION, FIELD(processor_timeout_ms), "10s", 1, DAY_MS,
     "a processor call times out after this; must be below the lock timeout"},
    {"recovery-interval", OPT_DURATION, FIELD(recovery_interval_ms), "5s", 10, DAY_MS,
     "how often the recoverer and the expired-key sweeper run"},
    {"threads", OPT_INT, FIELD(threads), "0", 0, 256,
     "HTTP threads (epoll thread pool); 0 means one per CPU payd may run on (four per CPU on "
     "PostgreSQL, where reads wait on the network)"},
    {"workers", OPT_INT, FIELD(workers), "0", 0, 4096,
     "threads for the steps of requests that may block (a processor call, a read after a "
     "claim, a DNS lookup); 0: 64 (no request holds one while it waits for the database)"},
    {"max-queue", OPT_INT, FIELD(max_queue), "4096", 1, 10000000,
     "past this many waiting database jobs, writes get 503 overloaded"},
    {"max-batch", OPT_INT, FIELD(max_batch), "256", 1, 100000,
     "most write jobs committed in one transaction"},
    {"group-commit", OPT_BOOL, FIELD(group_commit), "true", 0, 0,
     "batch write jobs into one transaction; false commits each job alone (the naive way)"},
    {"shutdown-timeout", OPT_DURATION, FIELD(shutdown_timeout_ms), "10s", 0, DAY_MS,
     "on SIGTERM, how long requests in flight may take to finish"},
    {"idle-timeout", OPT_DURATION, FIELD(idle_timeout_ms), "30s", 1000, DAY_MS,
     "close a connection idle this long (slowloris guard)"},
    {"header-timeout", OPT_DURATION, FIELD(header_timeout_ms), "10s", 100, DAY_MS,
     "a request's headers must arrive within this, however slowly they trickle (slowloris)"},
    {"body-timeout", OPT_DURATION, FIELD(body_timeout_ms), "30s", 100, DAY_MS,
     "a request's body must arrive within this of its headers, else 408 and close"},
    {"request-timeout", OPT_DURATION, FIELD(request_timeout_ms), "60s", 100, DAY_MS,
     "a whole request (headers and body) must arrive within this, else 408 and close"},
    {"max-connections", OPT_INT, FIELD(max_connections), "4096", 1, 1000000,
     "most open client connections; one more is answered 503 overloaded and closed"},
    {"max-connections-per-client", OPT_INT, FIELD(max_connections_per_client), "256", 1, 1000000,
     "most open connections from one client address (behind --trust-proxy, the address its "
     "X-Forwarded-For names); one more is answered 429 too_many_connections and closed"},
    {"max-in-progress-per-key", OPT_INT, FIELD(max_in_progress_per_key), "128", 1, 1000000,
     "most requests of one API key in progress at once; one more is answered 429 "
     "too_many_requests_in_progress"},
    {"tls-cert", OPT_STRING, FIELD(tls_cert), "", 0, 0,
     "PEM certificate chain: serve HTTPS (TLS 1.2 and 1.3) with --tls-key; SIGHUP reads both "
     "files again"},
    {"tls-key", OPT_STRING, FIELD(tls_key), "", 0, 0,
     "PEM private key (unencrypted) of --tls-cert"},
    {"trust-proxy", OPT_STRING, FIELD(trust_proxy), "", 0, 0,
     "numeric addresses or CIDR ranges, comma-separated, of proxies (haproxy) whose "
     "X-Forwarded-For names the client, for the per-client limits and the access log (empty: "
     "the peer is the client)"},
    {"max-header-bytes", OPT_INT, FIELD(max_header_bytes), "8192", 1024, 1048576,
     "most bytes of request line and headers"},
    {"max-headers", OPT_INT, FIELD(max_headers), "64", 1, 10000, "most request headers"},
    {"auth-cache-ttl", OPT_DURATION, FIELD(auth_cache_ttl_ms), "30s", 0, DAY_MS,
     "how long a verified API key is cached"},
    {"access-log", OPT_BOOL, FIELD(access_log), "true", 0, 0,
     "one JSON line per request on stderr"},
    {"log-level", OPT_STRING, FIELD(log_level), "info", 0, 0,
     "debug, info, warn or error: lines below it are not written (the access log's are info, "
     "a 5xx's error)"},
    {"db-max-connections", OPT_INT, FIELD(db_max_connections), "20", 2, 10000,
     "PostgreSQL: most connections this node opens, readers and writers together (a quarter "
     "write, at most one more than the CPUs payd may run on); "
     "4 nodes at 20 leave 20 of PostgreSQL's default 100 for administrators"},
    {"db-pool-timeout", OPT_DURATION, FIELD(db_pool_timeout_ms), "10s", 1, DAY_MS,
     "PostgreSQL: longest wait for a free pooled connection, then 503 overloaded"},
    {"db-statement-timeout", OPT_DURATION, FIELD(db_statement_timeout_ms), "30s", 0, DAY_MS,
     "PostgreSQL: statement_timeout of payd's sessions (0s: the server's setting)"},
    {"db-lock-timeout", OPT_DURATION, FIELD(db_lock_timeout_ms), "5s", 0, DAY_MS,
     "PostgreSQL: lock_timeout of payd's sessions (0s: the server's setting); a write that waits "
     "longer for a row lock gets 503 overloaded"},
    {"db-prepare", OPT_BOOL, FIELD(db_prepare), "true", 0, 0,
     "PostgreSQL: prepare each statement once per connection; false behind pgbouncer in "
     "transaction mode"},
    {"db-idle-timeout", OPT_DURATION, FIELD(db_idle_timeout_ms), "60s", 100, DAY_MS,
     "PostgreSQL: a pooled connection idle this long is closed"},
    {"sqlite-cache-mb", OPT_INT, FIELD(sqlite_cache_mb), "16", 1, 1048576,
     "SQLite: page cache of each reader connection (one per thread that reads), in MB; the "
     "writer keeps 8 MB"},
    {"sqlite-mmap-mb", OPT_INT, FIELD(sqlite_mmap_mb), "0", 0, 1048576,
     "SQLite: how much of the database file every connection reads through a memory map, in MB "
     "(0: none; the kernel's page cache then serves reads by copying)"},
    {"rate-limit-store", OPT_STRING, FIELD(rate_limit_store), "", 0, 0,
     "redis://HOST:PORT keeps the rate limits in Redis, shared by every node (empty: in memory, "
     "per node); if Redis is unreachable the node limits locally until it is back"},
    /* events and webhooks (§15) */
    {"events", OPT_BOOL, FIELD(events), "true", 0, 0,
     "record events and queue webhook deliveries (false only to measure their cost)"},
    {"event-retention", OPT_DURATION, FIELD(event_retention_ms), "720h", 1000, 3650 * DAY_MS,
     "how long events and delivery attempts are kept"},
    {"event-retention-whole-months", OPT_BOOL, FIELD(event_retention_whole_months), "false", 0, 0,
     "PostgreSQL: events go only with their whole month's partition, dropped once all of it is "
     "older than --event-retention (kept up to a month longer, deleted row by row never)"},
    {"webhook-deny-private", OPT_BOOL, FIELD(webhook_deny_private), "false", 0, 0,
     "allow webhook targets on global unicast addresses only (turn on when merchants who do "
     "not trust each other share this server)"},
    {"webhook-retry-scale", OPT_STRING, FIELD(webhook_retry_scale), "1", 0, 0,
     "factor on the webhook retry schedule and its 3 days (tests: 0.001)"},
    {"webhook-disable-after", OPT_DURATION, FIELD(webhook_disable_after_ms), "120h", 1000,
     3650 * DAY_MS,
     "an endpoint whose every attempt failed for this long is disabled, with a "
     "webhook_endpoint.disabled event"},
    {"webhook-lease", OPT_DURATION, FIELD(webhook_lease_ms), "30s", 11000, DAY_MS,
     "how long a node holds a delivery attempt; longer than the 10 s request timeout"},
    {"webhook-max-in-flight", OPT_INT, FIELD(webhook_max_in_flight), "512", 1, 100000,
     "delivery requests one node keeps in flight"},
    {"webhook-endpoint-concurrency", OPT_INT, FIELD(webhook_endpoint_concurrency), "64", 1, 100000,
     "delivery requests in flight to one endpoint from one node"},
    /* caps per user, so one user cannot make a payment fan out without bound */
    {"max-webhook-endpoints", OPT_INT, FIELD(max_webhook_endpoints), "16", 1, 100000,
     "most webhook endpoints one user may have, disabled ones included; one more is refused "
     "409 webhook_endpoint_limit_reached"},
    {"max-webhook-fanout", OPT_INT, FIELD(max_webhook_fanout), "16", 1, 100000,
     "most endpoints one event is delivered to (the user's oldest that want it)"},
    {"max-api-keys", OPT_INT, FIELD(max_api_keys), "20", 1, 100000,
     "most active API keys one user may have; one more is refused 409 api_key_limit_reached"},
};

#define OPTION_COUNT (sizeof options / sizeof options[0])

static int set_option(payd_config *cfg, const config_option *o, const char *value, char *err,
                      size_t errlen)
{
    char *field = (char *)cfg + o->offset;
    switch (o->type) {
    case OPT_STRING:
        if (strlen(value) >= o->size) {
            snprintf(err, errlen, "--%s: value too long", o->flag);
            return -1;
        }
        strcpy(field, value);
        return 0;
    case OPT_INT_OR_AUTO:
        if (!strcmp(value, "auto")) {
            *(int64_t *)field = -1;
            return 0;
        }
        /* fall through */
    case OPT_INT: {
        char *end;
        long long v = strtoll(value, &end, 10);
        if (!*value || *end || v < o->min || v > o->max) {
            snprintf(err, errlen, "--%s: expected an integer in %lld..%lld%s, got '%s'", o->flag,
                     (long long)o->min, (long long)o->max,
                     o->type == OPT_INT_OR_AUTO ? " or auto" : "", value);
            return -1;
        }
        *(int64_t *)field = v;
        return 0;
    }
    case OPT_DURATION: {
        int64_t ms;
        if (parse_duration_ms(value, &ms) != 0 || ms < o->min || ms > o->max) {
            snprintf(err, errlen,
                     "--%s: expected a duration such as 500ms, 60s, 5m or 24h, got '%s'", o->flag,
                     value);
            return -1;
        }
        *(int64_t *)field = ms;
        return 0;
    }
    case OPT_RATE:
        if (parse_rate(value, (rate_spec *)field) != 0) {
            snprintf(err, errlen, "--%s: expected a rate such as 100/s, 6000/m or 1000/h, got '%s'",
                     o->flag, value);
            return -1;
        }
        return 0;
    case OPT_BOOL:
        if (!strcmp(value, "true") || !strcmp(value, "1") || !strcmp(value, "on")) {
            *(bool *)field = true;
        } else if (!strcmp(value, "false") || !strcmp(value, "0") || !strcmp(value, "off")) {
            *(bool *)field = false;
        } else {
            snprintf(err, errlen, "--%s: expected true or false, got '%s'", o->flag, value);
            return -1;
        }
        return 0;
    }
    return -1;
}

static void env_name(const char *flag, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "PAYD_%s", flag);
    for (size_t i = 5; i < n && i < cap; i++)
        out[i] =
            out[i] == '-' ? '_' : (char)(out[i] >= 'a' && out[i] <= 'z' ? out[i] - 32 : out[i]);
}

static const config_option *find_option(const char *flag, size_t len)
{
    for (size_t i = 0; i < OPTION_COUNT; i++)
        if (strlen(options[i].flag) == len && !strncmp(options[i].flag, flag, len))
            return &options[i];
    return NULL;
}

int config_load(payd_config *cfg, int argc, char **argv, config_getenv_fn getenv_fn, char *err,
                size_t errlen)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        if (set_option(cfg, &options[i], options[i].default_value, err, errlen) != 0)
            return -1;
        char name[64];
        env_name(options[i].flag, name, sizeof name);
        const char *v = getenv_fn ? getenv_fn(name) : NULL;
        if (v && set_option(cfg, &options[i], v, err, errlen) != 0) {
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, " (from %s)", name);
            return -1;
        }
    }
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            config_print_help();
            return 1;
        }
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, errlen, "unexpected argument '%s'", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        const config_option *o = find_option(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!o) {
            snprintf(err, errlen, "unknown flag '%s' (see payd serve --help)", arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (!value && o->type == OPT_BOOL) {
            /* --flag alone means true; --flag true|false also reads */
            bool explicit_value =
                i + 1 < argc && (!strcmp(argv[i + 1], "true") || !strcmp(argv[i + 1], "false"));
            value = explicit_value ? argv[++i] : "true";
        }
        if (!value) {
            if (i + 1 >= argc) {
                snprintf(err, errlen, "--%s needs a value", o->flag);
                return -1;
            }
            value = argv[++i];
        }
        if (set_option(cfg, o, value, err, errlen) != 0)
            return -1;
    }
    if (!http_listen_address_valid(cfg->listen, err, errlen) ||
        !http_trusted_proxies_valid(cfg->trust_proxy, err, errlen))
        return -1;
    if (!log_level_known(cfg->log_level)) {
        snprintf(err, errlen, "--log-level: expected debug, info, warn or error, got '%s'",
                 cfg->log_level);
        return -1;
    }
    if (!cfg->tls_cert[0] != !cfg->tls_key[0]) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -1;
    }
    char *scale_end;
    double scale = strtod(cfg->webhook_retry_scale, &scale_end);
    if (*scale_end || !(scale > 0 && scale <= 1)) {
        snprintf(err, errlen, "--webhook-retry-scale: expected a number in (0, 1], got '%s'",
                 cfg->webhook_retry_scale);
        return -1;
    }
    if (cfg->processor_timeout_ms >= cfg->idempotency_lock_timeout_ms) {
        snprintf(err, errlen,
                 "--processor-timeout (%lldms) must be shorter than --idempotency-lock-timeout "
                 "(%lldms), so a live request is never taken over",
                 (long long)cfg->processor_timeout_ms, (long long)cfg->idempotency_lock_timeout_ms);
        return -1;
    }
    return 0;
}

void config_print_help(void)
{
    printf("usage: payd serve [flags]\n\nEvery flag can also be set by the environment variable "
           "shown; a flag wins over the environment.\n\n");
    for (size_t i = 0; i < OPTION_COUNT; i++) {
        char name[64];
        env_name(options[i].flag, name, sizeof name);
        printf("  --%-26s %s\n  %-28s [%s, default %s]\n", options[i].flag, options[i].help, "",
               name, options[i].default_value);
    }
}
