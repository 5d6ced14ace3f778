#include "server/dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/timefmt.h"
#include "store/store.h"

#define SEED_NODE_ID    1022
#define ROWS_PER_COMMIT 50000

static const char *arg_value(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc - 1; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

/* The seeded history ends now and goes back one millisecond per payment, so ids and
 * created_at agree and the rows look like a long-running account. */
static int64_t seed_clock_ms;
static int64_t seed_clock(void *ctx)
{
    return seed_clock_ms;
}

int dev_seed_main(int argc, char **argv)
{
    const char *account = arg_value(argc, argv, "--account"),
               *count_s = arg_value(argc, argv, "--count");
    const char *url = arg_value(argc, argv, "--db");
    if (!url)
        url = getenv("PAYD_DB") ? getenv("PAYD_DB") : "./payd.db";
    uint64_t account_id;
    long long count = count_s ? atoll(count_s) : 0;
    if (!account || id_parse(account, "acct", &account_id) != 0 || count < 1) {
        fprintf(stderr, "usage: payd dev seed --account acct_... --count N [--db URL]\n");
        return 2;
    }
    char err[512];
    store_options opt = {.url = url, .max_batch = 1, .writer_conns = 1};
    store *s = store_open(&opt, err, sizeof err);
    if (!s) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    db_conn *db = db_open(url, false, err, sizeof err);
    store_close(s); /* only for the migration; the seed writes on its own connection */
    if (!db) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    int64_t user = 0;
    char currency[4] = "";
    db_stmt *st = db_query(db, "SELECT user_id, currency FROM accounts WHERE id = $1", "i",
                           (int64_t)account_id);
    if (db_step(st) == DB_ROW) {
        user = db_int(st, 0);
        snprintf(currency, sizeof currency, "%s", db_text(st, 1));
    }
    db_done(st);
    if (!user) {
        fprintf(stderr, "payd: no such account\n");
        db_close(db);
        return 1;
    }
    id_generator gen;
    int64_t start_ms = now_us() / 1000 - count;
    id_generator_init(&gen, SEED_NODE_ID, seed_clock, NULL);
    int64_t started = monotonic_ns(), total = 0;
    db_exec(db, "BEGIN", "");
    for (long long i = 0; i < count; i++) {
        seed_clock_ms = start_ms + i;
        uint64_t id;
        id_next(&gen, &id);
        int64_t amount = 100 + (i % 9900);
        const char *status = i % 10 == 9 ? "failed" : "succeeded";
        if (db_exec(db,
                    "INSERT INTO payments (id, user_id, account_id, amount, currency, status, "
                    "source, refunded_amount, processor_charge_id, created_at) "
                    "VALUES ($1, $2, $3, $4, $5, $6, 'tok_visa', 0, 'ch_seed', $7)",
                    "iiiissi", (int64_t)id, user, (int64_t)account_id, amount, currency, status,
                    seed_clock_ms * 1000) != DB_DONE) {
            fprintf(stderr, "payd: seed insert failed: %s\n", db_last_error(db));
            db_exec(db, "ROLLBACK", "");
            db_close(db);
            return 1;
        }
        if (status[0] == 's')
            total += amount;
        if ((i + 1) % ROWS_PER_COMMIT == 0 || i + 1 == count) {
            /* the balance moves with its payments, so the account stays consistent */
            db_exec(db, "UPDATE accounts SET balance = balance + $2 WHERE id = $1", "ii",
                    (int64_t)account_id, total);
            total = 0;
            db_exec(db, "COMMIT", "");
            if (i + 1 < count)
                db_exec(db, "BEGIN", "");
        }
    }
    double secs = (double)(monotonic_ns() - started) / 1e9;
    printf("{\"seeded\":%lld,\"seconds\":%.2f}\n", count, secs);
    db_close(db);
    return 0;
}
