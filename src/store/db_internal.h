#ifndef PAYD_STORE_DB_INTERNAL_H
#define PAYD_STORE_DB_INTERNAL_H
/* What db.c (the calls both databases share), db_sqlite.c and db_postgres.c share: the
 * connection and statement, and each engine's entry points the shared calls dispatch to.
 * Nothing outside these three files includes it. */
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <string.h>

#include "store/db.h"

#define MAX_PARAMS      16
#define STMT_CACHE_SIZE 256 /* power of two */

/* A checked write held back (db_exec_checked), with its own copy of its parameters. */
typedef struct deferred_write {
    const char *sql;
    int count;
    db_value params[MAX_PARAMS];
    int64_t expect_changes; /* -1: any */
    int fail_code;          /* the job's answer when the changed rows differ */
} deferred_write;

/* The first copy of the WAL-index header: every commit rewrites it (its change counter, last
 * frame and checksums), by any connection of any process (sqlite.org/walformat.html). */
#define WAL_INDEX_HEADER_BYTES 48

struct db_stmt {
    db_conn *conn;
    const char *sql;
    sqlite3_stmt *lite; /* SQLite: the prepared statement, cached on the connection */
    /* SQLite numbers "$n" parameters in order of first appearance, not by n: slot[n-1] is the
     * bind index of "$n", worked out once at prepare time */
    int slot[MAX_PARAMS];
    bool cached;
    char pg_name[20]; /* PostgreSQL: the prepared statement's name, from its text */
    PGresult *pg;     /* PostgreSQL: the whole result; rows are walked by index */
    int pg_row;
    db_status status;
};

struct db_conn {
    db_kind kind;
    sqlite3 *lite;
    PGconn *pg;
    int64_t changes;
    int64_t tag;
    bool busy_seen;     /* a deadlock, serialization failure or cut-short lock wait (db_saw_busy) */
    bool pg_prepare;    /* PostgreSQL: statements are prepared once and run by name */
    bool begin_pending; /* PostgreSQL: db_begin was called, no statement has been sent since */
    int lock_wait_ms;   /* PostgreSQL: db_set_lock_wait's bound for the next transactions */
    bool lock_wait_lifted;   /* db_lock_wait_lift ran in the open transaction */
    char lock_wait_lift[64]; /* the statement that restores the session's lock_timeout */
    bool unusable;           /* PostgreSQL: a pipeline could not be read back in step */
    /* PostgreSQL: checked writes held back to go with the next statement (db_set_deferral) */
    bool defer;
    struct deferred_write *deferred;
    int deferred_count, deferred_cap;
    int deferred_failure; /* the first held write that failed its check, since taken */
    db_stmt cache[STMT_CACHE_SIZE];
    db_stmt scratch; /* PostgreSQL: the one statement in use (results are not nested) */
    /* SQLite readers: the WAL-index header (shared memory SQLite maps), and a copy of it taken
     * when the open read snapshot began */
    const volatile unsigned char *wal_index;
    unsigned char snapshot_header[WAL_INDEX_HEADER_BYTES];
    bool snapshot_open;
    /* SQLite writer: checkpoint once the WAL holds this many pages, calling around before
     * and after */
    int checkpoint_pages;
    bool commits_unsynced; /* db_sync_commits(c, false) */
    void (*around_checkpoint)(void *arg);
    void *around_checkpoint_arg;
    char error[256];
};

static inline bool db_starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* SQLite (db_sqlite.c) */
db_status db_lite_status(db_conn *c, int rc);
db_conn *db_lite_open(const char *path, bool read_only, char *err, size_t errlen);
db_stmt *db_lite_prepare(db_conn *c, const char *sql);

/* PostgreSQL (db_postgres.c) */
/* Sends cmds in one round trip; keep (when not NULL) takes the last command's result. */
db_status db_pg_pipeline(db_conn *c, const db_command *cmds, int n, PGresult **keep);
PGresult *db_pg_run(db_conn *c, const char *sql, int count, const char *const *values);
db_status db_pg_status(db_conn *c, PGresult *r);
/* Whether the transaction that begins needs a lock bound: the statement that sets it in sql. */
bool db_pg_transaction_begins(db_conn *c, char *sql, size_t size);
/* Forgets the checked writes held back (db_set_deferral). */
void db_drop_deferred(db_conn *c);

#endif
