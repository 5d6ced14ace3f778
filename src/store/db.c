/* The calls both databases share (db.h); each engine's own part is in db_sqlite.c and
 * db_postgres.c. */
#include "store/db.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db_internal.h"

db_kind db_kind_of(const db_conn *c)
{
    return c->kind;
}

const char *db_last_error(db_conn *c)
{
    return c->error;
}

void db_set_lock_wait(db_conn *c, int ms)
{
    c->lock_wait_ms = ms;
}

const char *db_lock_wait_lift(db_conn *c)
{
    if (c->kind != DB_POSTGRES || c->lock_wait_ms <= 0)
        return NULL;
    c->lock_wait_lifted = true;
    return c->lock_wait_lift;
}

void db_clear_busy(db_conn *c)
{
    c->busy_seen = false;
}

bool db_saw_busy(db_conn *c)
{
    return c->busy_seen;
}

void db_set_tag(db_conn *c, int64_t tag)
{
    c->tag = tag;
}

int64_t db_tag(const db_conn *c)
{
    return c->tag;
}

static _Thread_local db_failure thread_failure;

db_failure db_thread_failure(void)
{
    return thread_failure;
}

void db_thread_failure_reset(void)
{
    thread_failure = DB_FAILURE_NONE;
}

void db_note_failure(db_failure f)
{
    if (f > thread_failure)
        thread_failure = f;
}

int db_parse_url(const char *url, db_kind *kind, const char **sqlite_path, char *err, size_t errlen)
{
    *sqlite_path = NULL;
    if (db_is_postgres_url(url)) {
        *kind = DB_POSTGRES;
        return 0;
    }
    /* any other scheme is a mistake to report, not a file name (file: is SQLite's URI form) */
    const char *scheme_end = strstr(url, "://");
    if (scheme_end && !db_starts_with(url, "file:")) {
        snprintf(err, errlen,
                 "--db: unsupported database '%.*s://'; use a file path, sqlite:PATH or "
                 "postgres://...",
                 (int)(scheme_end - url < 32 ? scheme_end - url : 32), url);
        return -1;
    }
    if (db_starts_with(url, "sqlite:"))
        url += strlen("sqlite:");
    if (!*url) { /* SQLite would open a temporary database that vanishes on exit */
        snprintf(err, errlen, "--db: the SQLite path is empty");
        return -1;
    }
    *kind = DB_SQLITE;
    *sqlite_path = url;
    return 0;
}

db_conn *db_open(const char *url, bool read_only, char *err, size_t errlen)
{
    db_kind kind;
    const char *path;
    if (db_parse_url(url, &kind, &path, err, errlen) != 0)
        return NULL;
    return kind == DB_POSTGRES ? db_open_pg(url, NULL, err, errlen)
                               : db_lite_open(path, read_only, err, errlen);
}

void db_close(db_conn *c)
{
    if (!c)
        return;
    /* the checkpoint SQLite runs at close must sync what unsynced commits left in the WAL
     * before copying it into the database and deleting the WAL */
    db_sync_commits(c, true);
    for (int i = 0; i < STMT_CACHE_SIZE; i++)
        if (c->cache[i].lite)
            sqlite3_finalize(c->cache[i].lite);
    if (c->lite)
        sqlite3_close_v2(c->lite);
    if (c->pg)
        PQfinish(c->pg);
    db_drop_deferred(c);
    free(c->deferred);
    free(c);
}

db_stmt *db_query_values(db_conn *c, const char *sql, const db_value *params, int count)
{
    if (count > MAX_PARAMS) {
        snprintf(c->error, sizeof c->error, "too many parameters");
        return NULL;
    }
    if (c->kind == DB_SQLITE) {
        db_stmt *st = db_lite_prepare(c, sql);
        if (!st)
            return NULL;
        for (int i = 0; i < count; i++) {
            int at = st->slot[i];
            if (!at)
                continue; /* a parameter the statement does not use */
            int rc = params[i].type == 'i' ? sqlite3_bind_int64(st->lite, at, params[i].i)
                     : params[i].type == 's' && params[i].s
                         ? sqlite3_bind_text(st->lite, at, params[i].s, -1, SQLITE_TRANSIENT)
                         : sqlite3_bind_null(st->lite, at);
            if (rc != SQLITE_OK) {
                snprintf(c->error, sizeof c->error, "sqlite bind: %s", sqlite3_errmsg(c->lite));
                sqlite3_reset(st->lite);
                return NULL;
            }
        }
        st->status = DB_DONE;
        return st;
    }
    /* PostgreSQL: parameters go as text; the server infers their types from the statement. */
    char numbers[MAX_PARAMS][24];
    const char *values[MAX_PARAMS];
    for (int i = 0; i < count; i++) {
        if (params[i].type == 'i') {
            snprintf(numbers[i], sizeof numbers[i], "%lld", (long long)params[i].i);
            values[i] = numbers[i];
        } else {
            values[i] = params[i].type == 's' ? params[i].s : NULL;
        }
    }
    db_stmt *st = &c->scratch;
    st->conn = c;
    st->sql = sql;
    st->pg = db_pg_run(c, sql, count, values);
    st->pg_row = -1;
    st->status = db_pg_status(c, st->pg);
    if (st->status == DB_DONE && !strcmp(sql, "COMMIT") &&
        !strcmp(PQcmdStatus(st->pg), "ROLLBACK")) {
        /* the server answers COMMIT of a failed transaction with ROLLBACK, not an error */
        snprintf(c->error, sizeof c->error, "postgres: COMMIT rolled back a failed transaction");
        st->status = DB_ERROR;
    }
    if (st->status == DB_DONE) {
        const char *tuples = PQcmdTuples(st->pg);
        c->changes = *tuples ? atoll(tuples) : 0;
    }
    return st;
}

/* The parameters named by types, from ap; -1 when there are too many. */
static int values_va(db_conn *c, const char *types, va_list ap, db_value values[MAX_PARAMS])
{
    int n = 0;
    for (; types[n]; n++) {
        if (n == MAX_PARAMS) {
            snprintf(c->error, sizeof c->error, "too many parameters");
            return -1;
        }
        values[n].type = types[n];
        if (types[n] == 'i') {
            values[n].i = va_arg(ap, int64_t);
        } else if (types[n] == 'z') { /* an id where 0 means none */
            values[n].i = va_arg(ap, int64_t);
            values[n].type = values[n].i ? 'i' : 'n';
        } else if (types[n] == 's') {
            values[n].s = va_arg(ap, const char *);
            if (!values[n].s)
                values[n].type = 'n';
        }
    }
    return n;
}

static db_stmt *query_va(db_conn *c, const char *sql, const char *types, va_list ap)
{
    db_value values[MAX_PARAMS];
    int n = values_va(c, types, ap, values);
    return n < 0 ? NULL : db_query_values(c, sql, values, n);
}

/* Runs a statement whose rows are ignored; db_changes tells how many it changed. */
static db_status exec_values(db_conn *c, const char *sql, const db_value *values, int n)
{
    db_stmt *st = db_query_values(c, sql, values, n);
    if (!st)
        return DB_ERROR;
    db_status rc;
    if (c->kind == DB_SQLITE) {
        do
            rc = db_step(st);
        while (rc == DB_ROW);
        c->changes = sqlite3_changes(c->lite);
    } else {
        rc = st->status;
    }
    db_done(st);
    return rc;
}

void db_set_deferral(db_conn *c, bool on)
{
    c->defer = on && c->kind == DB_POSTGRES;
}

int db_exec_checked(db_conn *c, int64_t expect_changes, int fail_code, const char *sql,
                    const char *types, ...)
{
    db_value values[MAX_PARAMS];
    va_list ap;
    va_start(ap, types);
    int n = values_va(c, types, ap, values);
    va_end(ap);
    if (n < 0)
        return DB_ERROR;
    if (c->defer) {
        if (c->deferred_count == c->deferred_cap) {
            c->deferred_cap = c->deferred_cap ? c->deferred_cap * 2 : 8;
            c->deferred = realloc(c->deferred, (size_t)c->deferred_cap * sizeof *c->deferred);
        }
        deferred_write *d = &c->deferred[c->deferred_count++];
        *d = (deferred_write){
            .sql = sql, .count = n, .expect_changes = expect_changes, .fail_code = fail_code};
        for (int i = 0; i < n; i++) {
            d->params[i] = values[i];
            if (values[i].type == 's')
                d->params[i].s = strdup(values[i].s);
        }
        return DB_DONE;
    }
    db_status rc = exec_values(c, sql, values, n);
    if (rc != DB_DONE)
        return rc;
    return expect_changes >= 0 && c->changes != expect_changes ? fail_code : DB_DONE;
}

db_status db_flush(db_conn *c)
{
    /* a pending BEGIN alone can wait for a statement */
    if (c->kind != DB_POSTGRES || c->deferred_count == 0)
        return DB_DONE;
    return db_pg_pipeline(c, NULL, 0, NULL);
}

int db_take_deferred_failure(db_conn *c)
{
    int f = c->deferred_failure;
    c->deferred_failure = 0;
    return f;
}

/* Interned SQL texts: a small append-only list; lists have a few dozen variants in all. */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct interned {
    struct interned *next;
    char sql[];
} interned;
static interned *interned_head;

const char *db_intern_sql(const char *sql)
{
    pthread_mutex_lock(&intern_lock);
    interned *i = interned_head;
    while (i && strcmp(i->sql, sql) != 0)
        i = i->next;
    if (!i) {
        size_t n = strlen(sql) + 1;
        i = malloc(sizeof *i + n);
        memcpy(i->sql, sql, n);
        i->next = interned_head;
        interned_head = i;
    }
    pthread_mutex_unlock(&intern_lock);
    return i->sql;
}

db_stmt *db_query(db_conn *c, const char *sql, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    db_stmt *st = query_va(c, sql, types, ap);
    va_end(ap);
    return st;
}

db_status db_step(db_stmt *st)
{
    if (!st)
        return DB_ERROR;
    if (st->conn->kind == DB_SQLITE)
        return db_lite_status(st->conn, sqlite3_step(st->lite));
    if (st->status != DB_DONE)
        return st->status;
    return ++st->pg_row < PQntuples(st->pg) ? DB_ROW : DB_DONE;
}

void db_done(db_stmt *st)
{
    if (!st)
        return;
    if (st->conn->kind == DB_SQLITE) {
        sqlite3_reset(st->lite);
        sqlite3_clear_bindings(st->lite);
    } else if (st->pg) {
        PQclear(st->pg);
        st->pg = NULL;
    }
}

int64_t db_int(db_stmt *st, int col)
{
    if (st->conn->kind == DB_SQLITE)
        return sqlite3_column_int64(st->lite, col);
    const char *v = PQgetvalue(st->pg, st->pg_row, col);
    return v ? atoll(v) : 0;
}

const char *db_text(db_stmt *st, int col)
{
    if (st->conn->kind == DB_SQLITE)
        return (const char *)sqlite3_column_text(st->lite, col);
    return PQgetisnull(st->pg, st->pg_row, col) ? NULL : PQgetvalue(st->pg, st->pg_row, col);
}

bool db_is_null(db_stmt *st, int col)
{
    if (st->conn->kind == DB_SQLITE)
        return sqlite3_column_type(st->lite, col) == SQLITE_NULL;
    return PQgetisnull(st->pg, st->pg_row, col);
}

db_status db_exec(db_conn *c, const char *sql, const char *types, ...)
{
    db_value values[MAX_PARAMS];
    va_list ap;
    va_start(ap, types);
    int n = values_va(c, types, ap, values);
    va_end(ap);
    return n < 0 ? DB_ERROR : exec_values(c, sql, values, n);
}

int64_t db_changes(db_conn *c)
{
    return c->changes;
}

db_status db_exec_script(db_conn *c, const char *sql)
{
    if (c->kind == DB_SQLITE) {
        char *msg = NULL;
        int rc = sqlite3_exec(c->lite, sql, NULL, NULL, &msg);
        if (rc != SQLITE_OK) {
            snprintf(c->error, sizeof c->error, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
            sqlite3_free(msg);
            return db_lite_status(c, rc) == DB_DONE ? DB_ERROR : db_lite_status(c, rc);
        }
        return DB_DONE;
    }
    if (!strcmp(sql, "ROLLBACK")) {
        db_drop_deferred(c);
        c->deferred_failure = 0;
    }
    if (c->deferred_count) {
        db_status rc = db_flush(c);
        if (rc != DB_DONE)
            return rc;
    }
    char *script = NULL; /* the pending BEGIN goes in the same round trip */
    if (c->begin_pending) {
        c->begin_pending = false;
        if (!strcmp(sql, "COMMIT") || !strcmp(sql, "ROLLBACK"))
            return DB_DONE; /* the transaction never reached the server */
        char lock_wait[64];
        bool bounded = db_pg_transaction_begins(c, lock_wait, sizeof lock_wait);
        size_t size = strlen(sql) + sizeof lock_wait + 16;
        script = malloc(size);
        snprintf(script, size, "BEGIN; %s%s%s", bounded ? lock_wait : "", bounded ? "; " : "", sql);
    }
    PGresult *r = PQexec(c->pg, script ? script : sql);
    free(script);
    db_status rc = db_pg_status(c, r);
    PQclear(r);
    return rc;
}

db_status db_begin(db_conn *c)
{
    if (c->kind == DB_SQLITE)
        return db_exec_script(c, "BEGIN IMMEDIATE");
    c->begin_pending = true;
    return DB_DONE;
}

db_status db_exec_all(db_conn *c, const db_command *cmds, int n)
{
    if (c->deferred_count) { /* their checks are settled first: cmds may end in COMMIT */
        db_status rc = db_flush(c);
        if (rc != DB_DONE)
            return rc;
        if (c->deferred_failure)
            return DB_ERROR;
    }
    if (n == 0)
        return DB_DONE;
    if (c->kind == DB_POSTGRES && !c->unusable)
        return db_pg_pipeline(c, cmds, n, NULL);
    for (int i = 0; i < n; i++) {
        db_stmt *st = db_query_values(c, cmds[i].sql, cmds[i].params, cmds[i].count);
        db_status rc = db_step(st);
        db_done(st);
        if (rc != DB_DONE && rc != DB_ROW)
            return rc;
    }
    return DB_DONE;
}
