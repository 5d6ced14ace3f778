/* What a write job came to (store/store.h, write_result): the one mapping from a db_status a
 * job met to its result (write_result_of_db), and store_write handing back what jobs run on a
 * real SQLite store returned: what was kept, and what was undone. */
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

static void test_each_db_status_maps_to_one_result(void **state)
{
    (void)state;
    /* a statement that ran, with or without a row */
    assert_int_equal(write_result_of_db(DB_DONE), WRITE_OK);
    assert_int_equal(write_result_of_db(DB_ROW), WRITE_OK);
    /* what the job met */
    assert_int_equal(write_result_of_db(DB_CONSTRAINT), WRITE_CONFLICT);
    assert_int_equal(write_result_of_db(DB_BUSY), WRITE_RETRY);
    assert_int_equal(write_result_of_db(DB_ERROR), WRITE_FAILED);
    assert_int_equal(write_result_of_db(DB_UNAVAILABLE), WRITE_FAILED);
    assert_int_equal(write_result_of_db(DB_TIMEOUT), WRITE_FAILED);
    /* a status nobody knows: the worst */
    assert_int_equal(write_result_of_db((db_status)-77), WRITE_FAILED);
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
    write_result then_return; /* after the insert: what the job returns when it worked */
} insert_job;

static write_result insert_then(db_conn *db, void *arg)
{
    insert_job *j = arg;
    db_status rc = db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", j->name);
    return rc != DB_DONE ? write_result_of_db(rc) : j->then_return;
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

static void test_store_write_keeps_what_succeeded_and_undoes_the_rest(void **state)
{
    (void)state;
    harness h;
    harness_open(&h);
    insert_job kept = {"kept", WRITE_OK};
    assert_int_equal(store_write(h.s, insert_then, &kept), WRITE_OK);
    assert_int_equal(rows_named(&h, "kept"), 1);

    /* the same row again: the database's constraint, said as a conflict */
    assert_int_equal(store_write(h.s, insert_then, &kept), WRITE_CONFLICT);
    assert_int_equal(rows_named(&h, "kept"), 1);

    /* a job that wrote and then refused, or found its key fenced: nothing of it stays */
    insert_job refused = {"refused", WRITE_REFUSED};
    assert_int_equal(store_write(h.s, insert_then, &refused), WRITE_REFUSED);
    assert_int_equal(rows_named(&h, "refused"), 0);
    insert_job fenced = {"fenced", WRITE_FENCED};
    assert_int_equal(store_write(h.s, insert_then, &fenced), WRITE_FENCED);
    assert_int_equal(rows_named(&h, "fenced"), 0);
    insert_job failed = {"failed", WRITE_FAILED};
    assert_int_equal(store_write(h.s, insert_then, &failed), WRITE_FAILED);
    assert_int_equal(rows_named(&h, "failed"), 0);
    harness_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_db_status_maps_to_one_result),
        cmocka_unit_test(test_each_result_has_a_name),
        cmocka_unit_test(test_store_write_keeps_what_succeeded_and_undoes_the_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
