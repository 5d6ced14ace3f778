#include "server/dev.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ledger.h"
#include "api/stats.h"
#include "core/ids.h"
#include "api/routes.h"
#include "request/route.h"
#include "core/timefmt.h"
#include "server/command_line.h"
#include "store/store.h"

#define SEED_NODE_ID    1022
#define ROWS_PER_COMMIT 50000

/* The seeded history ends now and goes back one millisecond per payment, so ids and
 * created_at agree and the rows look like a long-running account. */
static int64_t seed_clock_ms;
static int64_t seed_clock(void *ctx)
{
    return seed_clock_ms;
}

int dev_seed_main(int argc, char **argv)
{
    const char *account = cli_flag(argc, argv, "--account"),
               *count_s = cli_flag(argc, argv, "--count");
    const char *url = cli_db_url(argc, argv);
    uint64_t account_id;
    long long count = count_s ? atoll(count_s) : 0;
    if (!account || id_parse(account, "acct", &account_id) != 0 || count < 1) {
        fprintf(stderr, "usage: payd dev seed --account acct_... --count N [--db URL]\n");
        return 2;
    }
    store *s = cli_open_store(argc, argv); /* for the migration */
    if (!s)
        return 1;
    char err[512];
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
    int64_t started = monotonic_ns(), total = 0, batch_start_ms = start_ms;
    db_exec(db, "BEGIN", "");
    for (long long i = 0; i < count; i++) {
        seed_clock_ms = start_ms + i;
        uint64_t id;
        id_next(&gen, &id);
        int64_t amount = 100 + (i % 9900);
        const char *status = i % 10 == 9 ? "failed" : "succeeded";
        if (db_exec(db,
                    "INSERT INTO payments (id, user_id, account_id, amount, currency, status, "
                    "source, refunded_amount, processor_charge_id, created_at, amount_captured) "
                    "VALUES ($1, $2, $3, $4, $5, $6, 'tok_visa', 0, 'ch_seed', $7, "
                    "CASE WHEN CAST($6 AS TEXT) = 'succeeded' THEN CAST($4 AS BIGINT) ELSE 0 "
                    "END)",
                    "iiiissi", (int64_t)id, user, (int64_t)account_id, amount, currency, status,
                    seed_clock_ms * 1000) != DB_DONE) {
            fprintf(stderr, "payd: seed insert failed: %s\n", db_last_error(db));
            db_exec(db, "ROLLBACK", "");
            db_close(db);
            return 1;
        }
        if (status[0] == 's') {
            total += amount;
            /* each charge's journal entry (docs/ledger.md), numbered by the seed's generator */
            ledger_entry e = {
                .user = (uint64_t)user,
                .source = id,
                .type = "charge",
                .currency = currency,
                .count = 2,
                .line = {{.account = account_id, .book = BOOK_AVAILABLE, .amount = amount},
                         {.book = BOOK_PROCESSOR, .amount = -amount}}};
            id_next(&gen, &e.id);
            id_next(&gen, &e.line[0].id);
            id_next(&gen, &e.line[1].id);
            if (ledger_post(db, &e) != DB_DONE) {
                fprintf(stderr, "payd: seed entry failed: %s\n", db_last_error(db));
                db_exec(db, "ROLLBACK", "");
                db_close(db);
                return 1;
            }
        }
        if ((i + 1) % ROWS_PER_COMMIT == 0 || i + 1 == count) {
            /* the balance and the volume rollup move with their payments, so the account and
             * its statistics stay consistent */
            db_exec(db, "UPDATE accounts SET balance = balance + $2 WHERE id = $1", "ii",
                    (int64_t)account_id, total);
            if (stats_add_payments(db, account_id, batch_start_ms * 1000,
                                   (seed_clock_ms + 1) * 1000) != DB_DONE) {
                fprintf(stderr, "payd: seed rollup failed: %s\n", db_last_error(db));
                db_exec(db, "ROLLBACK", "");
                db_close(db);
                return 1;
            }
            batch_start_ms = seed_clock_ms + 1;
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

typedef struct bench_thread {
    store *s;
    int index;
    int64_t jobs;
    int64_t failures;
} bench_thread;

static write_result insert_bench_row(db_conn *db, void *arg)
{
    int64_t *n = arg;
    char name[40];
    snprintf(name, sizeof name, "bench-%lld", (long long)*n);
    return write_result_of_db(
        db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", name));
}

static void *bench_writer(void *arg)
{
    bench_thread *t = arg;
    for (int64_t i = 0; i < t->jobs; i++) {
        int64_t n = (int64_t)t->index * 100000000 + i;
        if (store_write(t->s, insert_bench_row, &n) != WRITE_OK)
            t->failures++;
    }
    return NULL;
}

int dev_store_bench_main(int argc, char **argv)
{
    const char *url = cli_flag(argc, argv, "--db");
    const char *threads_s = cli_flag(argc, argv, "--threads"),
               *jobs_s = cli_flag(argc, argv, "--jobs");
    const char *batch_s = cli_flag(argc, argv, "--max-batch");
    int threads = threads_s ? atoi(threads_s) : 64;
    long long jobs = jobs_s ? atoll(jobs_s) : 50000;
    int max_batch = batch_s ? atoi(batch_s) : 256;
    if (!url || threads < 1 || threads > 1024 || jobs < threads || max_batch < 1) {
        fprintf(stderr, "usage: payd dev store-bench --db PATH [--threads T] [--jobs N] "
                        "[--max-batch B]\n");
        return 2;
    }
    char err[512];
    store_options opt = {.url = url, .max_batch = max_batch, .writer_conns = threads};
    store *s = store_open(&opt, err, sizeof err);
    if (!s) {
        fprintf(stderr, "payd: %s\n", err);
        return 1;
    }
    bench_thread *t = calloc((size_t)threads, sizeof *t);
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    int64_t started = monotonic_ns();
    for (int i = 0; i < threads; i++) {
        t[i] = (bench_thread){.s = s, .index = i, .jobs = jobs / threads};
        pthread_create(&ids[i], NULL, bench_writer, &t[i]);
    }
    int64_t done = 0, failures = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ids[i], NULL);
        done += t[i].jobs;
        failures += t[i].failures;
    }
    double secs = (double)(monotonic_ns() - started) / 1e9;
    store_stats st;
    store_get_stats(s, &st);
    printf("{\"jobs\":%lld,\"failures\":%lld,\"seconds\":%.3f,\"jobs_per_second\":%.0f,"
           "\"commits\":%lld,\"mean_batch\":%.1f,\"max_batch\":%d,\"threads\":%d}\n",
           (long long)done, (long long)failures, secs, (double)done / secs, (long long)st.batches,
           st.batches ? (double)st.jobs / (double)st.batches : 0.0, max_batch, threads);
    store_close(s);
    free(t);
    free(ids);
    return failures ? 1 : 0;
}

int dev_routes_main(int argc, char **argv)
{
    if (argc != 1 || strcmp(argv[0], "--json") != 0) {
        fprintf(stderr, "usage: payd dev routes --json\n");
        return 2;
    }
    json_t *out = json_array();
    for (int i = 0; i < payd_route_count; i++) {
        const route *r = &payd_routes[i];
        unsigned f = r->flags;
        json_t *o = json_pack("{s:s, s:s, s:b, s:s?}", "method", r->method, "path", r->pattern,
                              "auth", (f & ROUTE_AUTH) != 0, "idempotency_key",
                              f & ROUTE_IDEM_REQUIRED   ? "required"
                              : f & ROUTE_IDEM_OPTIONAL ? "optional"
                                                        : NULL);
        if (r->body)
            json_object_set_new(o, "body", schema_body_json(r->body));
        if (r->query)
            json_object_set_new(o, "query", schema_query_json(r->query));
        json_array_append_new(out, o);
    }
    char *text = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    puts(text);
    free(text);
    json_decref(out);
    return 0;
}
