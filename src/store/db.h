#ifndef PAYD_STORE_DB_H
#define PAYD_STORE_DB_H
/* A thin typed query layer over two drivers (SQLite, PostgreSQL) speaking one SQL dialect:
 * `$1, $2, …` placeholders, ON CONFLICT, RETURNING, row values, BIGINT µs times and minor units.
 *
 *   db_stmt *st = db_query(c, "SELECT balance FROM accounts WHERE id = $1", "i", id);
 *   if (db_step(st) == DB_ROW) balance = db_int(st, 0);
 *   db_done(st);
 *
 * Parameter types: 'i' int64_t, 'z' int64_t where 0 binds SQL NULL (optional ids),
 * 's' const char * (NULL binds SQL NULL), 'n' SQL NULL (takes no argument).
 * SQL strings must be string literals (or otherwise live forever): statements are cached by
 * the address of their text. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum db_status {
    DB_ROW = 1,         /* a row is ready */
    DB_DONE = 0,        /* no (more) rows; the statement ran */
    DB_CONSTRAINT = -1, /* a unique, check or foreign-key constraint refused the write */
    DB_BUSY = -2,       /* locked or serialization failure: retry the transaction */
    DB_ERROR = -3,
    DB_UNAVAILABLE = -4, /* the connection is lost (or the server is shutting down): reconnect */
    DB_TIMEOUT = -5,     /* statement_timeout or lock_timeout cancelled the statement */
} db_status;

typedef enum db_kind { DB_SQLITE, DB_POSTGRES } db_kind;

typedef struct db_conn db_conn;
typedef struct db_stmt db_stmt;

/* url: a path, sqlite:PATH, postgres://… or postgresql://…. read_only opens a reader. */
/* The one reading of --db: postgres:// or postgresql:// (kind DB_POSTGRES), else a file path or
 * sqlite:PATH (DB_SQLITE, *sqlite_path set). Another scheme or an empty path is an error. */
int db_parse_url(const char *url, db_kind *kind, const char **sqlite_path, char *err,
                 size_t errlen);
db_conn *db_open(const char *url, bool read_only, char *err, size_t errlen);
/* SQLite: the connection's page cache (cache_mb, 0 leaves it as it is) and how much of the
 * file it reads through a memory map (mmap_mb, 0: none). */
db_status db_sqlite_tune(db_conn *c, int cache_mb, int mmap_mb);

/* PostgreSQL session settings applied to every connection db_open_pg makes. */
typedef struct db_pg_settings {
    const char *application_name; /* NULL: libpq's default (or the URL's) */
    int connect_timeout_s;        /* 0: libpq's default (wait forever) */
    int64_t statement_timeout_ms; /* 0: the server's setting */
    int64_t lock_timeout_ms;      /* 0: the server's setting */
    bool no_prepare; /* send every statement with its text (behind a transaction-mode pooler) */
} db_pg_settings;
db_conn *db_open_pg(const char *url, const db_pg_settings *settings, char *err, size_t errlen);
bool db_is_postgres_url(const char *url);
/* True when the connection can no longer be used (PostgreSQL: lost, or the server shut it). */
bool db_broken(db_conn *c);
/* PostgreSQL: an error aborted the open transaction (its COMMIT would quietly roll back). */
bool db_transaction_failed(db_conn *c);
/* For a connection that sat idle: false if the server closed it meanwhile (no round trip). */
bool db_idle_alive(db_conn *c);
/* PostgreSQL: in the transactions db_begin opens from now on, a wait for a lock ends after ms
 * (0: the session's lock_timeout) and reads as DB_BUSY, to run again, not as a timeout. */
void db_set_lock_wait(db_conn *c, int ms);
/* The statement that restores the session's lock_timeout for the rest of the open transaction
 * (NULL when no bound applies); from then on a lock timeout is a timeout again. */
const char *db_lock_wait_lift(db_conn *c);
/* Whether a statement met a deadlock, a serialization failure or a lock wait cut short by
 * db_set_lock_wait since db_clear_busy. */
void db_clear_busy(db_conn *c);
bool db_saw_busy(db_conn *c);
/* A caller's tag on the connection (the store keeps the pool generation it was opened in). */
void db_set_tag(db_conn *c, int64_t tag);
int64_t db_tag(const db_conn *c);

/* The worst environmental failure seen on this thread since db_thread_failure_reset(): the
 * database unreachable, or a statement, lock or pool timeout. The request pipeline reads it to
 * answer 503 with Retry-After, whatever error the handler chose for a failed query. */
typedef enum db_failure {
    DB_FAILURE_NONE = 0,
    DB_FAILURE_TIMEOUT = 1,     /* busy: 503 overloaded */
    DB_FAILURE_UNAVAILABLE = 2, /* down: 503 database_unavailable */
} db_failure;
db_failure db_thread_failure(void);
void db_thread_failure_reset(void);
void db_note_failure(db_failure f);
void db_close(db_conn *c);
db_kind db_kind_of(const db_conn *c);
const char *db_last_error(db_conn *c);

/* Runs sql with params bound; returns a statement positioned before its first row, or NULL on
 * a preparation/bind error. Always pair with db_done. */
db_stmt *db_query(db_conn *c, const char *sql, const char *types, ...);
db_status db_step(db_stmt *st);
void db_done(db_stmt *st);
int64_t db_int(db_stmt *st, int col);      /* 0 for SQL NULL */
const char *db_text(db_stmt *st, int col); /* NULL for SQL NULL; valid until the next step */
bool db_is_null(db_stmt *st, int col);

/* The same with parameters as data, for statements whose parameter list is built at run time. */
typedef struct db_value {
    char type; /* 'i', 's' or 'n' */
    int64_t i;
    const char *s;
} db_value;
db_stmt *db_query_values(db_conn *c, const char *sql, const db_value *params, int count);

/* Returns a copy of sql that lives forever, the same pointer for the same text: for statements
 * assembled at run time (list filters), so the statement cache still works. */
const char *db_intern_sql(const char *sql);

/* A statement without rows (or whose rows are ignored): DB_DONE, DB_CONSTRAINT, DB_BUSY or
 * DB_ERROR. */
db_status db_exec(db_conn *c, const char *sql, const char *types, ...);
/* Rows changed by the last db_exec. */
int64_t db_changes(db_conn *c);

/* A write that must change expect_changes rows (-1: any number), else the job fails with
 * fail_code; returns DB_DONE, its failure status, or fail_code. With deferral on (PostgreSQL, a
 * writer's optimistic batch) it is held back and sent with the next statement that needs an
 * answer, or by db_flush, and returns DB_DONE at once: an SQL error then fails that statement,
 * and a wrong row count is kept for db_take_deferred_failure. Its text parameters are copied. */
int db_exec_checked(db_conn *c, int64_t expect_changes, int fail_code, const char *sql,
                    const char *types, ...);
void db_set_deferral(db_conn *c, bool on);
/* Sends the held writes (one round trip); their checks go to db_take_deferred_failure. */
db_status db_flush(db_conn *c);
/* The fail_code of the first held write whose check failed since the last call, or 0. */
int db_take_deferred_failure(db_conn *c);
/* Runs several ;-separated statements without parameters (schema, BEGIN, …). */
db_status db_exec_script(db_conn *c, const char *sql);

/* SQLite readers: a read transaction kept open from one request to the next for as long as
 * nothing commits, so that a read takes none of SQLite's per-transaction locks. db_snapshot_enter
 * keeps the open snapshot when the WAL-index header shows no commit since it began (by any
 * connection of any process), else ends it and begins another; no-op on PostgreSQL. */
void db_snapshot_enter(db_conn *c);
void db_snapshot_end(db_conn *c);
bool db_snapshot_open(const db_conn *c);
/* SQLite writer: after a commit that leaves the WAL at `pages` pages or more, checkpoints
 * (PASSIVE, as SQLite's automatic checkpoint, which this replaces, does), calling around(arg)
 * before it and again after it. */
void db_checkpoint_at(db_conn *c, int pages, void (*around)(void *arg), void *arg);
/* SQLite writer: whether the commits that follow wait for the disk (synchronous FULL, the
 * default) or not (OFF). While off, no checkpoint runs: it would copy into the database pages
 * that are not yet on disk in the WAL. No-op on PostgreSQL. */
db_status db_sync_commits(db_conn *c, bool sync);

/* Begins a transaction. SQLite takes the write lock at once (BEGIN IMMEDIATE); PostgreSQL sends
 * the BEGIN together with the first statement that follows, a round trip fewer (a COMMIT or
 * ROLLBACK with nothing between is then no statement at all). */
db_status db_begin(db_conn *c);

/* Statements run one after another as if each were run alone, whose outcome is only success or
 * failure: on PostgreSQL all in one round trip (pipeline mode). The first failure skips the rest
 * and its status is returned. */
typedef struct db_command {
    const char *sql; /* a literal or db_intern_sql text */
    const db_value *params;
    int count;
} db_command;
db_status db_exec_all(db_conn *c, const db_command *cmds, int n);

#endif
