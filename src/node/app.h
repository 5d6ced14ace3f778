#ifndef PAYD_NODE_APP_H
#define PAYD_NODE_APP_H
/* The running server's shared state, reachable from every request as req->app. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/gcra.h"
#include "core/ids.h"
#include "node/config.h"
#include "store/store.h"

struct auth_cache;
struct metrics;
struct worker_pool;
struct http_server;
struct rate_store;
struct node_lease;
struct holder_count;

typedef struct app {
    payd_config cfg;
    store *store;
    id_generator ids;
    struct node_lease *lease; /* this node's id; not held while the database was away at start */
    void *processor; /* processor/'s handle (processor *, processor/processor.h), set at start-up
                      * by main.c: processor/ sits above node/, so node/ holds it untyped */
    void *test_processor; /* test mode's (docs/modes.md): always the builtin simulator; the same
                           * handle as processor when that is the builtin one */
    struct auth_cache *auth;
    gcra_table *limiter;
    struct rate_store *rate_store; /* NULL: rate limits are this node's own */
    gcra_policy default_rate;
    struct holder_count *keys_in_progress; /* requests in progress per API key */
    struct metrics *metrics;
    uint8_t cursor_key[32];
    struct worker_pool *workers;
    struct http_server *http;
    atomic_bool shutting_down;
    atomic_int in_flight; /* requests that waited (suspended) and have not completed: answered
                           * and sent, or left by their client */
} app;

/* Whether this node holds its node id and its lease has not lapsed, so it can issue ids (and
 * so write). */
bool app_ids_ready(app *a);
/* Whether this node can take traffic (GET /readyz, and systemd's READY=1): it can get a
 * database connection now, the database answers on it, its writes succeed and it holds its
 * node id. When not, *why (if given) says which, in words for a 503's detail. */
bool app_ready(app *a, const char **why);
/* Whether an idempotent answer may be stored as a reference to the event holding it: events
 * outlive keys, and no node of an older release, which would replay it empty, is live. */
bool app_answers_by_event(const app *a);
/* Whether a new claim may take the time-ordered processor key scheme: no node of an older
 * release, which derives every processor key the old way, is live. */
bool app_orders_processor_keys(const app *a);
/* A new Snowflake id, or false while the node-id lease is lapsed: it never waits for the
 * renewal, which may be queued behind the very batch the caller runs in, or never come (the
 * database is away). Aborts only if the clock went back further than the generator absorbs. */
bool app_try_next_id(app *a, uint64_t *id);

#endif
