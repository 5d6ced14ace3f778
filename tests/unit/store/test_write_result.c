/* What a write job came to (store/store.c, write_result_of): the one mapping from what a job
 * returns (0, a db_status it met, a write_result of its own, STORE_FAILED) to a write_result,
 * and store_run saying the same of jobs run on a real SQLite store: what was kept, and what
 * was undone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/db.h"
#include "store/store.h"

static void test_each_job_code_maps_to_one_result(void **state)
{
    (void)state;
    assert_int_equal(write_result_of(0), WRITE_OK);
    /* a job's own verdicts pass through */
    assert_int_equal(write_result_of(WRITE_REFUSED), WRITE_REFUSED);
    assert_int_equal(write_result_of(WRITE_FENCED), WRITE_FENCED);
    assert_int_equal(write_result_of(WRITE_CONFLICT), WRITE_CONFLICT);
    assert_int_equal(write_result_of(WRITE_RETRY), WRITE_RETRY);
    assert_int_equal(write_result_of(WRITE_FAILED), WRITE_FAILED);
    /* a db_status the job met and handed back */
    assert_int_equal(write_result_of(DB_CONSTRAINT), WRITE_CONFLICT);
    assert_int_equal(write_result_of(DB_BUSY), WRITE_RETRY);
    assert_int_equal(write_result_of(DB_ERROR), WRITE_FAILED);
    assert_int_equal(write_result_of(DB_UNAVAILABLE), WRITE_FAILED);
    assert_int_equal(write_result_of(DB_TIMEOUT), WRITE_FAILED);
    /* the commit failed, or a code nobody knows: the worst */
    assert_int_equal(write_result_of(STORE_FAILED), WRITE_FAILED);
    assert_int_equal(write_result_of(77), WRITE_FAILED);
    assert_int_equal(write_result_of(-77), WRITE_FAILED);
}

static void test_each_result_has_a_name(void **state)
{
    (void)state;
    assert_string_equal(write_result_name(WRITE_OK), "ok");
    assert_string_equal(write_result_name(WRITE_FENCED), "fenced");
    assert_string_equal(write_result_name(WRITE_CONFLICT), "conflict");
    assert_string_equal(write_result_name((write_result)42), "failed");
}

typedef struct harness {
    char path[64];
    store *s;
} harness;

static void harness_open(harness *h)
{
    snprintf(h->path, sizeof h->path, "/tmp/payd-result-test-XXXXXX");
    close(mkstemp(h->path));
    char err[256];
    store_options opt = {.url = h->path, .max_batch = 64};
    h->s = store_open(&opt, err, sizeof err);
    assert_non_null(h->s);
}

static void harness_close(harness *h)
{
    store_close(h->s);
    const char *sides[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        char side[80];
        snprintf(side, sizeof side, "%s%s", h->path, sides[i]);
        unlink(side);
    }
}

typedef struct insert_job {
    const char *name;
    int then_return; /* after the insert: what the job returns when the insert worked */
} insert_job;

static int insert_then(db_conn *db, void *arg)
{
    insert_job *j = arg;
    db_status rc = db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", j->name);
    return rc != DB_DONE ? rc : j->then_return;
}

static int64_t rows_named(harness *h, const char *name)
{
    db_conn *db = store_reader(h->s);
    db_stmt *st = db_query(db, "SELECT COUNT(*) FROM secrets WHERE name = $1", "s", name);
    assert_int_equal(db_step(st), DB_ROW);
    int64_t n = db_int(st, 0);
    db_done(st);
    store_release_reader(h->s);
    return n;
}

static void test_store_run_keeps_what_succeeded_and_undoes_the_rest(void **state)
{
    (void)state;
    harness h;
    harness_open(&h);
    insert_job kept = {"kept", 0};
    assert_int_equal(store_run(h.s, insert_then, &kept), WRITE_OK);
    assert_int_equal(rows_named(&h, "kept"), 1);

    /* the same row again: the database's constraint, said as a conflict */
    assert_int_equal(store_run(h.s, insert_then, &kept), WRITE_CONFLICT);
    assert_int_equal(rows_named(&h, "kept"), 1);

    /* a job that wrote and then refused, or found its key fenced: nothing of it stays */
    insert_job refused = {"refused", WRITE_REFUSED};
    assert_int_equal(store_run(h.s, insert_then, &refused), WRITE_REFUSED);
    assert_int_equal(rows_named(&h, "refused"), 0);
    insert_job fenced = {"fenced", WRITE_FENCED};
    assert_int_equal(store_run(h.s, insert_then, &fenced), WRITE_FENCED);
    assert_int_equal(rows_named(&h, "fenced"), 0);
    insert_job failed = {"failed", DB_ERROR};
    assert_int_equal(store_run(h.s, insert_then, &failed), WRITE_FAILED);
    assert_int_equal(rows_named(&h, "failed"), 0);
    harness_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_job_code_maps_to_one_result),
        cmocka_unit_test(test_each_result_has_a_name),
        cmocka_unit_test(test_store_run_keeps_what_succeeded_and_undoes_the_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
