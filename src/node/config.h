#ifndef PAYD_NODE_CONFIG_H
#define PAYD_NODE_CONFIG_H
/* `payd serve` configuration: one declarative table (config.c) gives every option its flag,
 * its PAYD_* environment variable, its default, its bounds and its help line. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/units.h"

typedef struct payd_config {
    char listen[128];
    char db[512];
    int64_t node_id; /* -1: auto (leased) */
    char processor[256];
    bool rate_limiting;
    bool live_test_tokens; /* a live key may send test tokens to an http processor */
    rate_spec rate_limit;
    int64_t rate_burst;
    int64_t idempotency_ttl_ms;
    int64_t idempotency_lock_timeout_ms;
    int64_t authorization_ttl_ms; /* --authorization-ttl (§17) */
    int64_t processor_timeout_ms;
    int64_t recovery_interval_ms;
    int64_t threads;
    int64_t workers;
    int64_t max_queue;
    int64_t max_batch;
    bool group_commit;
    int64_t shutdown_timeout_ms;
    int64_t idle_timeout_ms;
    int64_t header_timeout_ms;
    int64_t body_timeout_ms;
    int64_t request_timeout_ms;
    int64_t max_connections;
    int64_t max_connections_per_client;
    int64_t max_in_progress_per_key;
    char trust_proxy[256];
    char log_level[16];
    char tls_cert[512]; /* PEM chain and key: HTTPS when set (both or neither) */
    char tls_key[512];
    int64_t max_header_bytes;
    int64_t max_headers;
    int64_t auth_cache_ttl_ms;
    bool access_log;
    int64_t db_max_connections;
    int64_t db_pool_timeout_ms;
    int64_t db_statement_timeout_ms;
    int64_t db_lock_timeout_ms;
    int64_t db_idle_timeout_ms;
    bool db_prepare;
    int64_t sqlite_cache_mb; /* SQLite: each reader connection's page cache */
    int64_t sqlite_mmap_mb;  /* SQLite: how much of the file each connection maps */
    char rate_limit_store[256];
    /* events and webhooks (§15) */
    bool events; /* false: no events, no outbox (only to measure their cost) */
    int64_t event_retention_ms;
    bool event_retention_whole_months;
    bool webhook_deny_private;
    char webhook_retry_scale[32]; /* a factor on the retry schedule and the 3 days; tests shrink it
                                   */
    int64_t webhook_disable_after_ms; /* an endpoint failing that long is disabled */
    int64_t webhook_lease_ms;
    int64_t webhook_max_in_flight;
    int64_t webhook_endpoint_concurrency;
    int64_t max_webhook_endpoints; /* per user, disabled ones included */
    int64_t max_webhook_fanout;    /* endpoints one event is delivered to */
    int64_t max_api_keys;          /* active keys per user */
} payd_config;

typedef const char *(*config_getenv_fn)(const char *name);

/* Fills cfg from defaults, then the environment, then argv (flags win over the environment, which
 * wins over defaults). argv holds only flags. Returns 0, 1 when --help was asked (help printed to
 * stdout), or -1 with a message in err. */
int config_load(payd_config *cfg, int argc, char **argv, config_getenv_fn getenv_fn, char *err,
                size_t errlen);
void config_print_help(void);

#endif
