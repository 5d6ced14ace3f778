/* The VFS that gathers a transaction's WAL frames into one write: a connection on the default
 * VFS (a reader, another process) sees every committed transaction whole, whatever the sync
 * setting, through checkpoints and WAL restarts, and a writer killed mid-transaction leaves
 * exactly what it had committed. */
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/wal_coalesce.h"

typedef struct fixture {
    char dir[64];
    char path[96];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/payd-wal-test-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/db.sqlite", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        return -1;
    free(f);
    return 0;
}

static sqlite3 *open_db(const char *path, const char *vfs, const char *pragmas)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs),
                     SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, pragmas, NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static void exec(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, err ? err : "?");
}

static int64_t one_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static void assert_intact(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
}

/* Transaction t inserts t rows of 1,000 random bytes (most exceed the 124 KiB buffer). */
static void insert_rows(sqlite3 *db, int t)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %d) "
             "INSERT INTO t (tx, body) SELECT %d, randomblob(1000) FROM n",
             t, t);
    exec(db, sql);
}

static void check_reader_sees_commits(const char *path, const char *writer_pragmas)
{
    sqlite3 *w = open_db(path, wal_coalesce_vfs(), writer_pragmas);
    exec(w, "CREATE TABLE t (id INTEGER PRIMARY KEY, tx INTEGER, body BLOB)");
    exec(w, "CREATE INDEX t_body ON t (body)"); /* random keys: frames all over the file */
    sqlite3 *r = open_db(path, NULL, "PRAGMA query_only=1");
    int64_t expected = 0;
    for (int t = 1; t <= 60; t++) {
        exec(w, "BEGIN");
        insert_rows(w, t * 37 % 1500 + 1);
        exec(w, "COMMIT");
        expected += t * 37 % 1500 + 1;
        assert_int_equal(one_int(r, "SELECT count(*) FROM t"), expected);
        if (t % 20 == 0) /* a checkpoint, and a WAL written again from its start */
            exec(w, "PRAGMA wal_checkpoint(RESTART)");
    }
    assert_intact(r);
    sqlite3_close(r);
    sqlite3_close(w);
}

static void test_a_reader_sees_every_commit_whole(void **state)
{
    fixture *f = *state;
    assert_non_null(wal_coalesce_vfs());
    check_reader_sees_commits(f->path, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL");
}

/* synchronous=OFF: SQLite never syncs the WAL, so only the flush after the commit frame puts a
 * committed transaction in the file before readers are told of it. */
static void test_commits_reach_the_file_without_a_sync(void **state)
{
    fixture *f = *state;
    check_reader_sees_commits(f->path, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF");
}

static void test_a_killed_writer_leaves_what_it_committed(void **state)
{
    fixture *f = *state;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        sqlite3 *w = NULL;
        if (sqlite3_open_v2(f->path, &w, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                            wal_coalesce_vfs()) != SQLITE_OK ||
            sqlite3_exec(w,
                         "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                         "PRAGMA cache_size=10;" /* spill: uncommitted frames reach the WAL */
                         "CREATE TABLE t (id INTEGER PRIMARY KEY, tx INTEGER, body BLOB);"
                         "BEGIN; INSERT INTO t (tx, body) SELECT 1, randomblob(1000) FROM "
                         "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                         "WHERE i < 500) SELECT i FROM n); COMMIT;"
                         "BEGIN; INSERT INTO t (tx, body) SELECT 2, randomblob(1000) FROM "
                         "(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                         "WHERE i < 3000) SELECT i FROM n);",
                         NULL, NULL, NULL) != SQLITE_OK)
            _exit(2);
        _exit(0); /* mid-transaction, buffers and all: as a kill -9 would */
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sqlite3 *r = open_db(f->path, NULL, "PRAGMA journal_mode=WAL");
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE tx = 1"), 500);
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE tx = 2"), 0);
    sqlite3_close(r);
}

/* A transaction that spilled frames and rolled back leaves nothing buffered: another
 * connection commits where those frames were, and this connection's next commit must not write
 * them back over it. */
static void test_a_rolled_back_transaction_leaves_nothing_behind(void **state)
{
    fixture *f = *state;
    const char *pragmas = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                          "PRAGMA cache_size=10"; /* spill: frames of an open transaction */
    sqlite3 *a = open_db(f->path, wal_coalesce_vfs(), pragmas);
    exec(a, "CREATE TABLE t (id INTEGER PRIMARY KEY, tx INTEGER, body BLOB)");
    sqlite3 *b = open_db(f->path, wal_coalesce_vfs(), pragmas);
    for (int round = 0; round < 3; round++) {
        exec(a, "BEGIN");
        insert_rows(a, 60); /* 60 KB: spilled, and some of it still in the buffer */
        exec(a, "ROLLBACK");
        exec(b, "BEGIN");
        insert_rows(b, 7);
        exec(b, "COMMIT");
        exec(a, "BEGIN");
        insert_rows(a, 5);
        exec(a, "COMMIT");
    }
    sqlite3 *r = open_db(f->path, NULL, "PRAGMA query_only=1");
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE tx = 7"), 21);
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE tx = 5"), 15);
    assert_int_equal(one_int(r, "SELECT count(*) FROM t WHERE tx = 60"), 0);
    assert_intact(r);
    sqlite3_close(r);
    sqlite3_close(a);
    sqlite3_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_a_reader_sees_every_commit_whole, setup, teardown),
        cmocka_unit_test_setup_teardown(test_commits_reach_the_file_without_a_sync, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_killed_writer_leaves_what_it_committed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_rolled_back_transaction_leaves_nothing_behind, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
