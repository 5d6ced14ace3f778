/* The payd command line: serve, migrate, user, account, id, processor-sim, dev seed. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/common.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "http/server.h"
#include "idem/idem.h"
#include "processor/http_processor.h"
#include "processor/processor.h"
#include "server/app.h"
#include "server/signals.h"
#include "server/auth.h"
#include "server/dev.h"
#include "server/metrics.h"
#include "webhook/delivery.h"

#define CLI_NODE_ID 1023 /* ids made by the command line never meet a server's (nodes 0..1022) */

static void usage(void)
{
    fprintf(
        stderr,
        "usage: payd <command> [flags]\n\n"
        "  serve [--listen HOST:PORT] [--db URL] ...   serve the API (payd serve --help)\n"
        "  migrate --db URL                             create or upgrade the schema\n"
        "  user create NAME [--email E] [--rate-limit R] --db URL\n"
        "  account create --user USER_ID --currency C [--name N] --db URL\n"
        "  id decode ID                                 show an id's time, node and sequence\n"
        "  processor-sim [--listen HOST:PORT] [fault flags]   the external processor simulator\n"
        "  dev seed --account ACCOUNT_ID --count N --db URL   bulk payments for benchmarks\n\n"
        "--db takes a path, sqlite:PATH or postgres://...; default ./payd.db or $PAYD_DB.\n");
}

/* A tiny flag reader for the admin commands: --name value pairs after the positionals. */
static const char *flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc - 1; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

static const char *db_url(int argc, char **argv)
{
    const char *url = flag(argc, argv, "--db");
    if (!url)
        url = getenv("PAYD_DB");
    return url ? url : "./payd.db";
}

static store *open_store(int argc, char **argv)
{
    char err[512];
    store_options opt = {.url = db_url(argc, argv), .max_batch = 256, .writer_conns = 2};
    store *s = store_open(&opt, err, sizeof err);
    if (!s)
        fprintf(stderr, "payd: %s\n", err);
    return s;
}

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    puts(s);
    free(s);
    json_decref(j);
}

static int cmd_migrate(int argc, char **argv)
{
    store *s = open_store(argc, argv);
    if (!s)
        return 1;
    store_close(s);
    printf("{\"migrated\":true}\n");
    return 0;
}

typedef struct new_user {
    uint64_t id;
    const char *name, *email, *key_hash, *rate_limit;
    int64_t now;
} new_user;

static int insert_user(db_conn *db, void *arg)
{
    new_user *u = arg;
    return db_exec(db,
                   "INSERT INTO users (id, name, email, api_key_hash, rate_limit, version, "
                   "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, $6, $6)",
                   "issssi", (int64_t)u->id, u->name, u->email, u->key_hash, u->rate_limit,
                   u->now) == DB_DONE
               ? 0
               : -1;
}

static uint64_t cli_id(void)
{
    static id_generator gen;
    static bool ready;
    if (!ready) {
        id_generator_init(&gen, CLI_NODE_ID, NULL, NULL);
        ready = true;
    }
    uint64_t id = 0;
    id_next(&gen, &id);
    return id;
}

static int cmd_user_create(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: payd user create NAME [--email E] [--rate-limit R] --db URL\n");
        return 2;
    }
    const char *rate = flag(argc, argv, "--rate-limit");
    rate_spec r;
    if (rate && parse_rate(rate, &r) != 0) {
        fprintf(stderr, "payd: --rate-limit must look like 100/s, 6000/m or 1000/h\n");
        return 2;
    }
    store *s = open_store(argc, argv);
    if (!s)
        return 1;
    char key[API_KEY_MAX], hash[65];
    auth_new_key(key, hash);
    new_user u = {.id = cli_id(),
                  .name = argv[0],
                  .email = flag(argc, argv, "--email"),
                  .key_hash = hash,
                  .rate_limit = rate,
                  .now = now_us()};
    int rc = store_write(s, insert_user, &u);
    store_close(s);
    if (rc != 0) {
        fprintf(stderr, "payd: could not create the user\n");
        return 1;
    }
    print_json(json_pack("{s:o, s:s}", "user_id", json_id("usr", u.id), "api_key", key));
    return 0;
}

typedef struct new_account {
    uint64_t id, user;
    char currency[4];
    const char *name;
    int64_t now;
    bool user_found;
} new_account;

static int insert_account(db_conn *db, void *arg)
{
    new_account *a = arg;
    db_stmt *st = db_query(db, "SELECT 1 FROM users WHERE id = $1", "i", (int64_t)a->user);
    a->user_found = db_step(st) == DB_ROW;
    db_done(st);
    if (!a->user_found)
        return -1;
    return db_exec(db,
                   "INSERT INTO accounts (id, user_id, currency, name, balance, version, "
                   "created_at, updated_at) VALUES ($1, $2, $3, $4, 0, 1, $5, $5)",
                   "iissi", (int64_t)a->id, (int64_t)a->user, a->currency, a->name,
                   a->now) == DB_DONE
               ? 0
               : -1;
}

static int cmd_account_create(int argc, char **argv)
{
    const char *user = flag(argc, argv, "--user"), *currency = flag(argc, argv, "--currency");
    new_account a = {.name = flag(argc, argv, "--name")};
    if (!user || !currency || id_parse(user, "usr", &a.user) != 0 ||
        !normalize_currency(currency, a.currency)) {
        fprintf(stderr, "usage: payd account create --user usr_... --currency USD [--name N] "
                        "--db URL\n");
        return 2;
    }
    store *s = open_store(argc, argv);
    if (!s)
        return 1;
    a.id = cli_id();
    a.now = created_at_of(a.id);
    int rc = store_write(s, insert_account, &a);
    store_close(s);
    if (rc != 0) {
        fprintf(stderr, "payd: %s\n",
                a.user_found ? "could not create the account" : "no such user");
        return 1;
    }
    print_json(json_pack("{s:o, s:s, s:s, s:o, s:i, s:i, s:o}", "id", json_id("acct", a.id),
                         "object", "account", "currency", a.currency, "name",
                         json_string_or_null(a.name), "balance", 0, "version", 1, "created_at",
                         json_time(a.now)));
    return 0;
}

static int cmd_id_decode(int argc, char **argv)
{
    const char *s = argc > 0 ? argv[0] : NULL;
    const char *underscore = s ? strchr(s, '_') : NULL;
    char prefix[ID_PREFIX_MAX + 1];
    uint64_t id;
    if (!underscore || (size_t)(underscore - s) > ID_PREFIX_MAX) {
        fprintf(stderr, "usage: payd id decode ID (for example pay_0a1b2c3d4e5f6)\n");
        return 2;
    }
    snprintf(prefix, sizeof prefix, "%.*s", (int)(underscore - s), s);
    if (id_parse(s, prefix, &id) != 0) {
        fprintf(stderr, "payd: '%s' is not a payd id\n", s);
        return 1;
    }
    id_parts p = id_decode(id);
    print_json(json_pack("{s:s, s:o, s:i, s:i}", "id", s, "timestamp", json_time(p.unix_ms * 1000),
                         "node_id", p.node_id, "sequence", p.sequence));
    return 0;
}

/* ---- serve ---- */

static int cmd_serve(int argc, char **argv)
{
    static app a; /* static: signal-safe lifetime, zeroed */
    char err[512];
    int rc = config_load(&a.cfg, argc, argv, (config_getenv_fn)getenv, err, sizeof err);
    if (rc == 1)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "payd: %s\n", err);
        return 2;
    }
    sigset_t stop_signals;
    stop_signals_block(&stop_signals);

    store_options opt = {.url = a.cfg.db,
                         .max_batch = a.cfg.group_commit ? (int)a.cfg.max_batch : 1,
                         .writer_conns = 8};
    a.store = store_open(&opt, err, sizeof err);
    if (!a.store) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    if (a.cfg.workers == 0)
        a.cfg.workers = store_kind(a.store) == DB_SQLITE ? 64 : 16;
    if (id_generator_init(&a.ids, (int)a.cfg.node_id, NULL, NULL) != 0 ||
        store_secret(a.store, "cursor", a.cursor_key) != 0) {
        fprintf(stderr, "payd: cannot initialise ids or the cursor secret\n");
        return 1;
    }
    a.processor = processor_create(&a, a.cfg.processor, err, sizeof err);
    if (!a.processor) {
        fprintf(stderr, "payd: %s\n", err);
        return 2;
    }
    a.auth = auth_cache_create();
    a.metrics = metrics_create();
    a.limiter = gcra_table_create(64, 16384);
    a.default_rate =
        gcra_policy_from_rate(a.cfg.rate_limit.count, a.cfg.rate_limit.period_ms, a.cfg.rate_burst);
    if (http_server_start(&a, err, sizeof err) != 0) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    idem_recovery_start(&a);
    if (webhook_worker_start(&a) != 0) {
        fprintf(stderr, "payd: cannot start the webhook delivery worker\n");
        return 1;
    }
    fprintf(stderr,
            "{\"level\":\"info\",\"msg\":\"payd serving\",\"listen\":\"%s\",\"db\":\"%s\","
            "\"group_commit\":%s}\n",
            a.cfg.listen, store_kind(a.store) == DB_SQLITE ? a.cfg.db : "postgres",
            a.cfg.group_commit ? "true" : "false");

    int sig = stop_signals_wait(&stop_signals);
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"shutting down\",\"signal\":%d}\n", sig);
    http_server_stop(&a);
    idem_recovery_stop();
    webhook_worker_stop();
    store_close(a.store);
    processor_free(a.processor);
    auth_cache_free(a.auth);
    metrics_free(a.metrics);
    gcra_table_free(a.limiter);
    fprintf(stderr, "{\"level\":\"info\",\"msg\":\"stopped\"}\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage();
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    const char *sub = argc > 2 ? argv[2] : "";
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "migrate"))
        return cmd_migrate(argc - 2, argv + 2);
    if (!strcmp(cmd, "user") && !strcmp(sub, "create"))
        return cmd_user_create(argc - 3, argv + 3);
    if (!strcmp(cmd, "account") && !strcmp(sub, "create"))
        return cmd_account_create(argc - 3, argv + 3);
    if (!strcmp(cmd, "id") && !strcmp(sub, "decode"))
        return cmd_id_decode(argc - 3, argv + 3);
    if (!strcmp(cmd, "processor-sim"))
        return processor_sim_main(argc - 2, argv + 2);
    if (!strcmp(cmd, "dev") && !strcmp(sub, "seed"))
        return dev_seed_main(argc - 3, argv + 3);
    if (!strcmp(cmd, "dev") && !strcmp(sub, "store-bench"))
        return dev_store_bench_main(argc - 3, argv + 3);
    usage();
    return 2;
}
