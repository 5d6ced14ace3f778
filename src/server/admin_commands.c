/* payd's commands that work straight on the database (admin_commands.h). */
#include "server/admin_commands.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_keys.h"
#include "api/common.h"
#include "api/handlers.h"
#include "core/currency.h"
#include "core/ids.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "node/auth.h"
#include "server/command_line.h"

typedef struct new_user {
    uint64_t id, twin_id;
    const char *name, *email, *rate_limit;
    new_api_key *key, *test_key;
    int64_t now;
} new_user;

/* The user, its test twin (docs/modes.md) and its first live and test keys, in one
 * transaction. */
static write_result insert_user(db_conn *db, void *arg)
{
    new_user *u = arg;
    uint64_t twin = 0;
    if (db_exec(db,
                "INSERT INTO users (id, name, email, api_key_hash, rate_limit, version, "
                "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, $6, $6)",
                "issssi", (int64_t)u->id, u->name, u->email, u->key->hash, u->rate_limit,
                u->now) != DB_DONE ||
        api_key_test_twin(db, u->id, u->twin_id, u->now, &twin) != DB_DONE || !twin)
        return WRITE_FAILED;
    u->test_key->user = twin;
    return api_key_store(db, u->key) == DB_DONE && api_key_store(db, u->test_key) == DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

/* --mode test|live (default live): false when it is anything else. */
static bool mode_flag(int argc, char **argv, bool *test)
{
    const char *mode = cli_flag(argc, argv, "--mode");
    *test = mode && !strcmp(mode, "test");
    return !mode || *test || !strcmp(mode, "live");
}

int cmd_user_create(int argc, char **argv)
{
    if (argc < 1 || argv[0][0] == '-') {
        fprintf(stderr, "usage: payd user create NAME [--email E] [--rate-limit R] --db URL\n");
        return 2;
    }
    const char *rate = cli_flag(argc, argv, "--rate-limit");
    rate_spec r;
    if (rate && parse_rate(rate, &r) != 0) {
        fprintf(stderr, "payd: --rate-limit must look like 100/s, 6000/m or 1000/h\n");
        return 2;
    }
    store *s = cli_open_store_for_ids(argc, argv);
    if (!s)
        return 1;
    new_api_key key, test_key;
    new_user u = {.id = cli_id(),
                  .twin_id = cli_id(),
                  .name = argv[0],
                  .email = cli_flag(argc, argv, "--email"),
                  .rate_limit = rate,
                  .key = &key,
                  .test_key = &test_key,
                  .now = now_us()};
    uint64_t key_id = cli_id(), test_key_id = cli_id();
    api_key_generate(&key, key_id, u.id, u.id, false, NULL, created_at_of(key_id));
    api_key_generate(&test_key, test_key_id, u.twin_id, u.id, true, NULL,
                     created_at_of(test_key_id));
    write_result rc = store_write(s, insert_user, &u);
    cli_close(s);
    if (rc != WRITE_OK) {
        fprintf(stderr, "payd: could not create the user\n");
        return 1;
    }
    /* api_key stays the live key, so scripts written before modes keep working */
    cli_print_json(json_pack("{s:o, s:s, s:o, s:s, s:o}", "user_id", json_id("usr", u.id),
                             "api_key", key.key, "key_id", json_id("key", key_id), "test_api_key",
                             test_key.key, "test_key_id", json_id("key", test_key_id)));
    return 0;
}

/* A user as operators know them: a test twin is no user of its own (docs/modes.md). */
static bool user_exists(db_conn *db, uint64_t user)
{
    db_stmt *st =
        db_query(db, "SELECT 1 FROM users WHERE id = $1 AND mode = 'live'", "i", (int64_t)user);
    bool found = db_step(st) == DB_ROW;
    db_done(st);
    return found;
}

typedef struct new_account {
    uint64_t id, user, twin_id; /* twin_id: made under, when a test account's user has none */
    bool test;
    char currency[4];
    const char *name;
    int64_t now;
    bool user_found;
    char *printed; /* the account as the API shows it */
} new_account;

static write_result insert_account(db_conn *db, void *arg)
{
    new_account *a = arg;
    a->user_found = user_exists(db, a->user);
    if (!a->user_found)
        return WRITE_REFUSED;
    uint64_t owner = a->user;
    if (a->test &&
        (api_key_test_twin(db, a->user, a->twin_id, a->now, &owner) != DB_DONE || !owner))
        return WRITE_FAILED;
    db_stmt *st = account_insert(db, a->id, owner, a->currency, a->name, a->now);
    bool inserted = db_step(st) == DB_ROW;
    if (inserted) {
        free(a->printed); /* a job may run again after a conflict */
        a->printed = cli_row_text(account_resource.write_row, st);
    }
    db_done(st);
    return inserted ? WRITE_OK : WRITE_FAILED;
}

int cmd_account_create(int argc, char **argv)
{
    const char *user = cli_flag(argc, argv, "--user"),
               *currency = cli_flag(argc, argv, "--currency");
    new_account a = {.name = cli_flag(argc, argv, "--name")};
    if (!user || !currency || id_parse(user, "usr", &a.user) != 0 ||
        !mode_flag(argc, argv, &a.test)) {
        fprintf(stderr, "usage: payd account create --user usr_... --currency USD [--name N] "
                        "[--mode test|live] --db URL\n");
        return 2;
    }
    if (!currency_normalize(currency, a.currency)) {
        fprintf(stderr, "payd: --currency must be an active ISO 4217 currency code, such as USD\n");
        return 2;
    }
    store *s = cli_open_store_for_ids(argc, argv);
    if (!s)
        return 1;
    a.id = cli_id();
    a.twin_id = cli_id();
    a.now = created_at_of(a.id);
    write_result rc = store_write(s, insert_account, &a);
    cli_close(s);
    if (rc != WRITE_OK) {
        free(a.printed);
        fprintf(stderr, "payd: %s\n",
                a.user_found ? "could not create the account" : "no such user");
        return 1;
    }
    puts(a.printed);
    free(a.printed);
    return 0;
}

int cmd_id_decode(int argc, char **argv)
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
    cli_print_json(json_pack("{s:s, s:o, s:i, s:i}", "id", s, "timestamp",
                             json_time(p.unix_ms * 1000), "node_id", p.node_id, "sequence",
                             p.sequence));
    return 0;
}

/* ---- key: several API keys per user (§13) ---- */

typedef struct key_job {
    new_api_key *key;
    uint64_t twin_id; /* made under, when a test key's user has no test twin yet */
    bool user_found;
} key_job;

static write_result insert_key_for_user(db_conn *db, void *arg)
{
    key_job *job = arg;
    job->user_found = user_exists(db, job->key->owner);
    if (!job->user_found)
        return WRITE_REFUSED;
    job->key->user = job->key->owner;
    if (job->key->test && (api_key_test_twin(db, job->key->owner, job->twin_id,
                                             job->key->created_at, &job->key->user) != DB_DONE ||
                           !job->key->user))
        return WRITE_FAILED;
    return api_key_store(db, job->key) == DB_DONE ? WRITE_OK : WRITE_FAILED;
}

/* The --user flag as a user id; false when it is missing or not a usr_ id. */
static bool user_flag(int argc, char **argv, uint64_t *user)
{
    const char *text = cli_flag(argc, argv, "--user");
    return text && id_parse(text, "usr", user) == 0;
}

static int cmd_key_create(int argc, char **argv)
{
    uint64_t user;
    bool test;
    if (!user_flag(argc, argv, &user) || !mode_flag(argc, argv, &test)) {
        fprintf(stderr,
                "usage: payd key create --user usr_... [--name N] [--mode test|live] --db URL\n");
        return 2;
    }
    store *s = cli_open_store_for_ids(argc, argv);
    if (!s)
        return 1;
    new_api_key key;
    uint64_t id = cli_id();
    api_key_generate(&key, id, user, user, test, cli_flag(argc, argv, "--name"), created_at_of(id));
    key_job job = {.key = &key, .twin_id = cli_id()};
    write_result rc = store_write(s, insert_key_for_user, &job);
    cli_close(s);
    if (rc != WRITE_OK) {
        fprintf(stderr, "payd: %s\n", job.user_found ? "could not create the key" : "no such user");
        return 1;
    }
    cli_print_json(json_pack("{s:o, s:s, s:o, s:s, s:s}", "key_id", json_id("key", id), "api_key",
                             key.key, "user_id", json_id("usr", user), "prefix", key.prefix, "mode",
                             test ? "test" : "live"));
    return 0;
}

/* Every key of the user, oldest first, one JSON object a line (never the key or its hash). */
static int cmd_key_list(int argc, char **argv)
{
    uint64_t user;
    if (!user_flag(argc, argv, &user)) {
        fprintf(stderr, "usage: payd key list --user usr_... --db URL\n");
        return 2;
    }
    store *s = cli_open_store(argc, argv);
    if (!s)
        return 1;
    db_conn *db = cli_reader(s);
    int rc = 1;
    if (db && !user_exists(db, user)) {
        fprintf(stderr, "payd: no such user\n");
    } else if (db) {
        db_stmt *st = db_query(db,
                               "SELECT " API_KEY_COLUMNS " FROM api_keys "
                               "WHERE COALESCE(owner_id, user_id) = $1 ORDER BY created_at, id",
                               "i", (int64_t)user);
        while (db_step(st) == DB_ROW)
            cli_print_row(write_api_key_row, st);
        db_done(st);
        rc = 0;
    }
    store_close(s);
    return rc;
}

typedef struct revoke_job {
    uint64_t key_id;
    char *key; /* the key after the job, as the API shows it; NULL: no such key */
} revoke_job;

static write_result revoke_any_key(db_conn *db, void *arg)
{
    revoke_job *job = arg;
    db_stmt *st = api_key_revoke(db, job->key_id, 0, now_us());
    if (!st)
        return WRITE_FAILED;
    free(job->key); /* a job may run again after a conflict */
    job->key = db_step(st) == DB_ROW ? cli_row_text(write_api_key_row, st) : NULL;
    db_done(st);
    return WRITE_OK;
}

static int cmd_key_revoke(int argc, char **argv)
{
    revoke_job job = {0};
    if (argc < 1 || id_parse(argv[0], "key", &job.key_id) != 0) {
        fprintf(stderr, "usage: payd key revoke key_... --db URL\n");
        return 2;
    }
    store *s = cli_open_store(argc, argv);
    if (!s)
        return 1;
    write_result rc = store_write(s, revoke_any_key, &job);
    store_close(s);
    if (rc != WRITE_OK || !job.key) {
        free(job.key);
        fprintf(stderr, "payd: %s\n", rc != WRITE_OK ? "could not revoke the key" : "no such key");
        return 1;
    }
    puts(job.key);
    free(job.key);
    return 0;
}

int cmd_key(int argc, char **argv)
{
    const char *sub = argc > 0 ? argv[0] : "";
    if (!strcmp(sub, "create"))
        return cmd_key_create(argc - 1, argv + 1);
    if (!strcmp(sub, "list"))
        return cmd_key_list(argc - 1, argv + 1);
    if (!strcmp(sub, "revoke"))
        return cmd_key_revoke(argc - 1, argv + 1);
    fprintf(stderr,
            "payd: unknown command 'key %s'\n"
            "usage: payd key create|list|revoke (payd --help)\n",
            sub);
    return 2;
}
