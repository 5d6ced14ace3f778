/* The payd command line: which command runs (the user, account, key and id commands are in
 * server/admin_commands.c), migrate, backup and serve. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api_keys.h"
#include "api/common.h"
#include "api/event_waiters.h"
#include "api/handlers.h"
#include "api/captures.h"
#include "api/routes.h"
#include "core/cpus.h"
#include "core/currency.h"
#include "core/ids.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "core/version.h"
#include "http/tls.h"
#include "idem/idem.h"
#include "node/app.h"
#include "node/auth.h"
#include "node/fault.h"
#include "node/lease.h"
#include "node/limits_redis.h"
#include "node/metrics.h"
#include "node/service.h"
#include "node/signals.h"
#include "processor/http_processor.h"
#include "processor/processor.h"
#include "server/admin_commands.h"
#include "server/command_line.h"
#include "server/dev.h"
#include "server/pipeline.h"
#include "server/ledger_verify.h"
#include "server/user_admin.h"
#include "store/backup.h"
#include "store/prune.h"
#include "webhook/delivery.h"

/* The usage goes to stdout when asked for (--help), to stderr after a mistake. */
static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: payd <command> [flags]\n\n"
        "  serve [--listen HOST:PORT] [--db URL] ...   serve the API (payd serve --help)\n"
        "  migrate --db URL                             create or upgrade the schema\n"
        "  migrate --status --db URL                    the schema's version, this binary's, "
        "pending\n"
        "  backup --to PATH --db URL                    a consistent copy of a SQLite database, "
        "online\n"
        "  user create NAME [--email E] [--rate-limit R] --db URL\n"
        "  user list [--format jsonl|table] --db URL    every user and its count of active keys\n"
        "  user disable|enable USER_ID --db URL         turn all of a user's keys off (401 within "
        "--auth-cache-ttl) or on\n"
        "  account create --user USER_ID --currency C [--name N] [--mode test|live] --db URL\n"
        "  key create --user USER_ID [--name N] [--mode test|live] --db URL   a new API key "
        "(default live), shown once\n"
        "  key list --user USER_ID --db URL             the user's keys of both modes (id, prefix "
        "and mode only)\n"
        "  key revoke KEY_ID --db URL                   revoke a key (401 within "
        "--auth-cache-ttl)\n"
        "  id decode ID                                 show an id's time, node and sequence\n"
        "  ledger verify --db URL [--processor builtin|none|URL]   check the books (exit 1: "
        "violations)\n"
        "  processor-sim [--listen HOST:PORT] [fault flags]   the external processor simulator\n"
        "  dev seed --account ACCOUNT_ID --count N --db URL   bulk payments for benchmarks\n"
        "  dev store-bench --db PATH [--threads T] [--jobs N] [--max-batch B]   the store alone\n"
        "  dev routes --json                            the route table, bodies and queries\n"
        "  --version                                    print the version and git revision\n\n"
        "--db takes a path, sqlite:PATH or postgres://...; default ./payd.db or $PAYD_DB.\n");
}

/* A tiny flag reader for the admin commands: --name value pairs after the positionals. */

/* --status: where the schema is and what this binary needs, changing nothing. */
static int migrate_status(int argc, char **argv)
{
    char err[512];
    db_conn *c = db_open(cli_db_url(argc, argv), true, err, sizeof err);
    if (!c) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    schema_status st;
    store_schema_status(c, &st);
    db_close(c);
    printf("{\"schema_version\":%d,\"binary_schema_version\":%d,\"pending\":%s}\n", st.at,
           st.needed, st.pending ? "true" : "false");
    return 0;
}

static int cmd_migrate(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--status"))
            return migrate_status(argc, argv);
    store *s = cli_open_store(argc, argv);
    if (!s)
        return 1;
    store_close(s);
    printf("{\"migrated\":true}\n");
    return 0;
}

/* backup --to PATH: a consistent copy of a SQLite database while payd serves it. */
static int cmd_backup(int argc, char **argv)
{
    const char *to = cli_flag(argc, argv, "--to");
    if (!to) {
        fprintf(stderr, "payd: backup needs --to PATH (a file that does not exist yet)\n");
        return 2;
    }
    char err[512];
    backup_report r;
    if (store_backup_sqlite(cli_db_url(argc, argv), to, &r, err, sizeof err) != 0) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    char last[ID_STR_MAX] = "";
    if (r.last_payment)
        id_format(r.last_payment, "pay", last);
    cli_print_json(json_pack("{s:s, s:I, s:I, s:s?, s:f}", "path", to, "bytes", (json_int_t)r.bytes,
                             "payments", (json_int_t)r.payments, "last_id",
                             r.last_payment ? last : NULL, "seconds", r.seconds));
    return 0;
}

/* ---- serve ---- */

/* The server secret (it signs cursors, and the keys that seal secrets at rest derive from it),
 * then the secrets stored in the clear before they were sealed. */
static int load_server_secret(db_conn *db, void *cursor_key)
{
    if (store_secret_on(db, "cursor", cursor_key) != 0)
        return -1;
    return webhook_secrets_seal_existing(db, cursor_key);
}

/* SIGHUP: the TLS files read again; new connections get the new pair, open ones keep theirs.
 * A pair that does not load leaves the one in use, with an error line. */
static void reload_tls(const payd_config *cfg)
{
    if (!cfg->tls_cert[0]) {
        log_msg("info", "SIGHUP: no --tls-cert to read again");
        return;
    }
    char err[512];
    jsonw line;
    bool loaded = http_tls_load(cfg->tls_cert, cfg->tls_key, err, sizeof err) == 0;
    log_begin(&line, loaded ? "info" : "error",
              loaded ? "TLS certificate reloaded" : "TLS certificate not reloaded");
    jw_key(&line, "cert");
    jw_string(&line, cfg->tls_cert);
    if (!loaded) {
        jw_key(&line, "error");
        jw_string(&line, err);
    }
    log_end(&line);
}

/* How often, before the node is ready, a service manager's wait for READY=1 asks again. */
#define READY_POLL_MS 200

/* The main thread's life while serving: waits for a stop signal, reads the TLS files again on
 * SIGHUP, and under systemd (deploy/payd.service) says READY=1 once the node can take traffic
 * (its listener is up and its database answers: on PostgreSQL that may come after the start)
 * and WATCHDOG=1 every half WatchdogSec after. Returns the stop signal. */
static int serve_until_stopped(app *a, const sigset_t *stop_signals)
{
    bool managed = service_manager_listens();
    int64_t watchdog_ms = service_watchdog_interval_ms();
    bool ready = false;
    for (;;) {
        if (managed && !ready && (ready = app_ready(a, NULL)))
            service_notify_ready();
        store_thread_done(a->store); /* the readiness check's connection goes back */
        int64_t wait_ms = !managed ? -1 : !ready ? READY_POLL_MS : watchdog_ms ? watchdog_ms : -1;
        int sig = wait_ms < 0 ? stop_signals_wait(stop_signals)
                              : stop_signals_wait_for(stop_signals, wait_ms);
        if (sig == SIGHUP) {
            service_notify_reloading();
            reload_tls(&a->cfg);
            if (ready)
                service_notify_ready();
        } else if (sig) {
            service_notify_stopping();
            return sig;
        } else if (ready && watchdog_ms) {
            service_watchdog_ping();
        }
    }
}

/* A refusal to start is one JSON line like every other (core/log.h), at level error. */
static void refuse_start(const char *error)
{
    log_error("error", "payd cannot start", error);
}

/* The node's store. On PostgreSQL the node starts even while the database is down (it answers
 * 503 and /readyz says so); the schema and the cursor secret are set up when it first answers. */
static store *open_node_store(app *a, char *err, size_t errlen)
{
    static char application_name[64]; /* names the node in pg_stat_activity; the pool keeps it */
    if (a->cfg.node_id >= 0)
        snprintf(application_name, sizeof application_name, "payd node %lld",
                 (long long)a->cfg.node_id);
    else
        snprintf(application_name, sizeof application_name, "payd pid %d", (int)getpid());
    store_options opt = {.url = a->cfg.db,
                         .max_batch = a->cfg.group_commit ? (int)a->cfg.max_batch : 1,
                         .max_connections = (int)a->cfg.db_max_connections,
                         .pool_timeout_ms = a->cfg.db_pool_timeout_ms,
                         .statement_timeout_ms = a->cfg.db_statement_timeout_ms,
                         .lock_timeout_ms = a->cfg.db_lock_timeout_ms,
                         .idle_timeout_ms = a->cfg.db_idle_timeout_ms,
                         .no_prepare = !a->cfg.db_prepare,
                         .sqlite_cache_mb = (int)a->cfg.sqlite_cache_mb,
                         .sqlite_mmap_mb = (int)a->cfg.sqlite_mmap_mb,
                         .application_name = application_name,
                         .wait_for_database = true,
                         .on_first_connect = load_server_secret,
                         .on_first_connect_arg = a->cursor_key};
    return store_open(&opt, err, errlen);
}

/* What a started node says of itself: the real address (port 0 replaced by the one picked). */
static void log_serving(const app *a, node_lease *lease)
{
    jsonw line;
    log_begin(&line, "info", "payd serving");
    jw_key(&line, "listen");
    jw_string(&line, a->cfg.listen);
    jw_key(&line, "db");
    jw_string(&line, store_kind(a->store) == DB_SQLITE ? a->cfg.db : "postgres");
    jw_key(&line, "tls");
    jw_bool(&line, http_tls_enabled());
    jw_key(&line, "group_commit");
    jw_bool(&line, a->cfg.group_commit);
    jw_key(&line, "node_id");
    jw_int(&line, lease_node_id(lease));
    log_end(&line);
}

/* The requests get --shutdown-timeout (pipeline_stop); the rest of the stop a moment more. */
static void stop_serving(app *a, node_lease *lease)
{
    stop_deadline_arm(a->cfg.shutdown_timeout_ms + STOP_GRACE_MS);
    pipeline_stop(a);
    event_waiters_stop();
    idem_recovery_stop();
    store_pruner_stop();
    webhook_worker_stop();
    lease_release(lease);
    store_release_reader(a->store); /* the main thread's, from the readiness checks */
    store_close(a->store);
    if (a->test_processor != a->processor)
        processor_free(a->test_processor);
    processor_free(a->processor);
    auth_cache_free(a->auth);
    metrics_free(a->metrics);
    gcra_table_free(a->limiter);
    rate_store_free(a->rate_store);
    http_tls_free();
}

static int cmd_serve(int argc, char **argv)
{
    static app a; /* static: signal-safe lifetime, zeroed */
    char err[512];
    int rc = config_load(&a.cfg, argc, argv, (config_getenv_fn)getenv, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc != 0) {
        refuse_start(err);
        return 2;
    }
    log_set_level(a.cfg.log_level);
    sigset_t stop_signals;
    stop_signals_block(&stop_signals);

    static const store_faults faults = {fault_fail_write_job, fault_at_commit};
    store_set_faults(&faults); /* inert unless PAYD_FAULT names a write or commit fault */
    if (sqlite_serve_lock(a.cfg.db, err, sizeof err) != 0) {
        refuse_start(err);
        return 1;
    }
    a.store = open_node_store(&a, err, sizeof err);
    if (!a.store) {
        refuse_start(err);
        return 1;
    }
    if (a.cfg.workers == 0)
        a.cfg.workers = 64;
    /* reads run on the HTTP threads; on PostgreSQL each waits a network round trip, so more
     * threads than CPUs keep the database busy (measured: list pages 1.6x at 4 per CPU) */
    if (a.cfg.threads == 0 && store_kind(a.store) == DB_POSTGRES)
        a.cfg.threads = 4 * cpus_available();
    if (id_generator_init(&a.ids, 0, NULL, NULL) != 0) {
        refuse_start("cannot initialise ids");
        return 1;
    }
    node_lease *lease =
        lease_acquire(a.store, (int)a.cfg.node_id, &a.ids, LEASE_SERVE, err, sizeof err);
    if (!lease) {
        refuse_start(err);
        store_close(a.store);
        return 1;
    }
    lease_start_renewal(lease);
    a.lease = lease;
    a.processor = processor_create(&a, a.cfg.processor, err, sizeof err);
    if (!a.processor) {
        refuse_start(err);
        return 2;
    }
    /* test mode always charges the builtin simulator (docs/modes.md) */
    a.test_processor = processor_is_builtin(a.processor)
                           ? a.processor
                           : processor_create(&a, "builtin", err, sizeof err);
    a.auth = auth_cache_create();
    a.metrics = metrics_create();
    a.limiter = gcra_table_create(64, 16384);
    if (a.cfg.rate_limit_store[0] &&
        !(a.rate_store = rate_store_create(a.cfg.rate_limit_store, err, sizeof err))) {
        refuse_start(err);
        return 2;
    }
    a.default_rate =
        gcra_policy_from_rate(a.cfg.rate_limit.count, a.cfg.rate_limit.period_ms, a.cfg.rate_burst);
    fault_arm();
    if (a.cfg.tls_cert[0] && http_tls_load(a.cfg.tls_cert, a.cfg.tls_key, err, sizeof err) != 0) {
        char tls_error[600];
        snprintf(tls_error, sizeof tls_error, "TLS: %s", err);
        refuse_start(tls_error);
        return 2;
    }
    /* before the first request: a long-poll on /v1/events parks with it. On PostgreSQL other
     * nodes write events too, and only a recheck sees theirs */
    /* waiters recheck on every database: another node (PostgreSQL) and the webhook worker
     * (webhook_endpoint.disabled) write events that no request notes */
    if (event_waiters_start(&a, true) != 0) {
        refuse_start("cannot start the event waiters' thread");
        return 1;
    }
    if (pipeline_start(&a, err, sizeof err) != 0) {
        refuse_start(err);
        return 1;
    }
    /* the recoverer runs keys left in doubt through the route table and the pipeline's
     * handler step, handed down to it: idem/ sits below both */
    idem_recovery_hooks recovery_hooks = {.routes = payd_routes,
                                          .route_count = payd_route_count,
                                          .run_step = run_step,
                                          .periodic = captures_expire_due};
    idem_recovery_start(&a, &recovery_hooks);
    /* expired keys and old events, in bounded chunks beside the requests (store/prune.h) */
    prune_schedule retention = {.interval_ms = a.cfg.recovery_interval_ms,
                                .key_ttl_ms = a.cfg.idempotency_ttl_ms,
                                .event_retention_ms = a.cfg.event_retention_ms,
                                .event_retention_whole_months = a.cfg.event_retention_whole_months};
    if (store_pruner_start(a.store, &retention) != 0) {
        refuse_start("cannot start the retention pruner");
        return 1;
    }
    if (webhook_worker_start(&a) != 0) {
        refuse_start("cannot start the webhook delivery worker");
        return 1;
    }
    log_serving(&a, lease);

    int sig = serve_until_stopped(&a, &stop_signals);
    jsonw line;
    log_begin(&line, "info", "shutting down");
    jw_key(&line, "signal");
    jw_int(&line, sig);
    log_end(&line);
    stop_serving(&a, lease);
    log_msg("info", "stopped");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("payd %s (git %s)\n", payd_version, payd_revision);
        return 0;
    }
    const char *cmd = argv[1];
    const char *sub = argc > 2 ? argv[2] : "";
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "migrate"))
        return cmd_migrate(argc - 2, argv + 2);
    if (!strcmp(cmd, "backup"))
        return cmd_backup(argc - 2, argv + 2);
    if (!strcmp(cmd, "user") && !strcmp(sub, "create"))
        return cmd_user_create(argc - 3, argv + 3);
    if (!strcmp(cmd, "user") && *sub) {
        int rc = user_admin_main(sub, argc - 3, argv + 3);
        if (rc >= 0)
            return rc;
    }
    if (!strcmp(cmd, "account") && !strcmp(sub, "create"))
        return cmd_account_create(argc - 3, argv + 3);
    if (!strcmp(cmd, "ledger") && !strcmp(sub, "verify"))
        return ledger_verify_main(argc - 3, argv + 3);
    if (!strcmp(cmd, "id") && !strcmp(sub, "decode"))
        return cmd_id_decode(argc - 3, argv + 3);
    if (!strcmp(cmd, "processor-sim"))
        return processor_sim_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "dev") && !strcmp(sub, "seed"))
        return dev_seed_main(argc - 3, argv + 3);
    if (!strcmp(cmd, "dev") && !strcmp(sub, "store-bench"))
        return dev_store_bench_main(argc - 3, argv + 3);
    if (!strcmp(cmd, "dev") && !strcmp(sub, "routes"))
        return dev_routes_main(argc - 3, argv + 3);
    if (!strcmp(cmd, "key"))
        return cmd_key(argc - 2, argv + 2);
    /* Name what was not understood: the command, or the command's sub-command. */
    if (!strcmp(cmd, "user") || !strcmp(cmd, "account") || !strcmp(cmd, "id") ||
        !strcmp(cmd, "dev") || !strcmp(cmd, "ledger"))
        fprintf(stderr, "payd: unknown command '%s %s'\n\n", cmd, sub);
    else
        fprintf(stderr, "payd: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
