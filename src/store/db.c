#include "store/db.h"

#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/wal_coalesce.h"

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

static bool starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

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

/* ---- SQLite ---- */

static db_status lite_status(db_conn *c, int rc)
{
    switch (rc) {
    case SQLITE_ROW:
        return DB_ROW;
    case SQLITE_DONE:
    case SQLITE_OK:
        return DB_DONE;
    case SQLITE_CONSTRAINT:
        return DB_CONSTRAINT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        /* past the busy timeout: as a PostgreSQL lock timeout, never "no such row" */
        db_note_failure(DB_FAILURE_TIMEOUT);
        return DB_BUSY;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_NOMEM:
    case SQLITE_CANTOPEN:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        /* the file cannot be read or written right now: the database is unavailable */
        snprintf(c->error, sizeof c->error, "sqlite: %s", sqlite3_errmsg(c->lite));
        db_note_failure(DB_FAILURE_UNAVAILABLE);
        return DB_ERROR;
    default:
        snprintf(c->error, sizeof c->error, "sqlite: %s", sqlite3_errmsg(c->lite));
        return DB_ERROR;
    }
}

/* Before SQLite's first use: no global memory statistics, which would take one process-wide
 * mutex on every allocation of every connection (the writer allocates for each statement). */
static void lite_configure(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static db_conn *lite_open(const char *path, bool read_only, char *err, size_t errlen)
{
    static pthread_once_t configured = PTHREAD_ONCE_INIT;
    pthread_once(&configured, lite_configure);
    db_conn *c = calloc(1, sizeof *c);
    c->kind = DB_SQLITE;
    int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                SQLITE_OPEN_NOMUTEX;
    /* a connection that writes gathers each transaction's WAL frames into one write */
    const char *vfs = read_only ? NULL : wal_coalesce_vfs();
    if (sqlite3_open_v2(path, &c->lite, flags, vfs) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s: %s", path, sqlite3_errmsg(c->lite));
        db_close(c);
        return NULL;
    }
    sqlite3_busy_timeout(c->lite, 10000);
    /* WAL lets readers run beside the one writer; synchronous=FULL makes an acknowledged
     * payment survive power loss. The writer's cache is small on purpose: a page split moves
     * pages through a number past the file's end, so every COMMIT walks the whole page cache to
     * drop pages beyond the end (SQLite 3.40); with 64 MB that walk was 18 % of the writer's
     * time, and 8 MB gave 6 % more payments (six alternating rounds, wrk, fresh database). */
    const char *setup = read_only ? "PRAGMA query_only=1; PRAGMA cache_size=-16000;"
                                  : "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                                    "PRAGMA cache_size=-8000; PRAGMA temp_store=MEMORY;";
    if (db_exec_script(c, setup) != DB_DONE) {
        snprintf(err, errlen, "cannot set up %s: %s", path, c->error);
        db_close(c);
        return NULL;
    }
    return c;
}

db_status db_sqlite_tune(db_conn *c, int cache_mb, int mmap_mb)
{
    char pragmas[128];
    if (cache_mb > 0)
        snprintf(pragmas, sizeof pragmas, "PRAGMA cache_size=-%lld; PRAGMA mmap_size=%lld;",
                 (long long)cache_mb * 1024, (long long)mmap_mb * 1048576);
    else
        snprintf(pragmas, sizeof pragmas, "PRAGMA mmap_size=%lld;", (long long)mmap_mb * 1048576);
    return db_exec_script(c, pragmas);
}

static db_stmt *lite_prepare(db_conn *c, const char *sql)
{
    size_t slot = ((uintptr_t)sql >> 3) & (STMT_CACHE_SIZE - 1);
    for (size_t probe = 0; probe < STMT_CACHE_SIZE; probe++) {
        db_stmt *st = &c->cache[(slot + probe) & (STMT_CACHE_SIZE - 1)];
        if (st->sql == sql)
            return st;
        if (st->sql == NULL) {
            if (sqlite3_prepare_v3(c->lite, sql, -1, SQLITE_PREPARE_PERSISTENT, &st->lite, NULL) !=
                SQLITE_OK) {
                snprintf(c->error, sizeof c->error, "sqlite prepare: %s", sqlite3_errmsg(c->lite));
                return NULL;
            }
            st->sql = sql;
            st->conn = c;
            st->cached = true;
            int count = sqlite3_bind_parameter_count(st->lite);
            for (int i = 1; i <= count; i++) {
                const char *name = sqlite3_bind_parameter_name(st->lite, i);
                int n = name && name[0] == '$' ? atoi(name + 1) : 0;
                if (n >= 1 && n <= MAX_PARAMS)
                    st->slot[n - 1] = i;
            }
            return st;
        }
    }
    snprintf(c->error, sizeof c->error, "statement cache full");
    return NULL;
}

/* ---- PostgreSQL ---- */

/* Each statement text is prepared once per connection and run by name after that: the server
 * parses and plans it once instead of on every call (parsing and planning were a quarter of
 * the CPU of a payment). Like the SQLite cache it is keyed by the text's address: literals, or
 * texts from db_intern_sql. The name comes from the text itself, so one name means one
 * statement in every process: a session shared by mistake (a transaction-mode pooler with
 * --db-prepare left on) fails with "does not exist" instead of running another statement. With
 * a pooler the next transaction may run on a server connection that never saw the statement,
 * so there (no_prepare) every statement goes with its text.
 *
 * Returns the statement's name ("" when it goes with its text), preparing it first if needed;
 * NULL with *failed set when the server refused to prepare it. */
/* Whether another cache slot already prepared st's name on this connection. */
static bool pg_name_prepared(const db_conn *c, const db_stmt *st)
{
    for (size_t i = 0; i < STMT_CACHE_SIZE; i++)
        if (&c->cache[i] != st && c->cache[i].sql && !strcmp(c->cache[i].pg_name, st->pg_name))
            return true;
    return false;
}

static const char *pg_prepared_name(db_conn *c, const char *sql, PGresult **failed)
{
    *failed = NULL;
    if (!c->pg_prepare)
        return "";
    size_t slot = ((uintptr_t)sql >> 3) & (STMT_CACHE_SIZE - 1);
    for (size_t probe = 0; probe < STMT_CACHE_SIZE; probe++) {
        db_stmt *st = &c->cache[(slot + probe) & (STMT_CACHE_SIZE - 1)];
        if (st->sql == NULL) {
            uint64_t h = 14695981039346656037ull; /* FNV-1a of the text */
            for (const char *p = sql; *p; p++)
                h = (h ^ (uint8_t)*p) * 1099511628211ull;
            snprintf(st->pg_name, sizeof st->pg_name, "p%016llx", (unsigned long long)h);
            /* The same text met at another address (identical literals are one string only
             * when the compiler merges them) is prepared already: a second PREPARE would fail,
             * and inside a transaction that failure aborts it, so its COMMIT rolls back. */
            if (pg_name_prepared(c, st)) {
                st->sql = sql;
                return st->pg_name;
            }
            PGresult *prepared = PQprepare(c->pg, st->pg_name, sql, 0, NULL);
            const char *state = PQresultErrorField(prepared, PG_DIAG_SQLSTATE);
            /* 42P05: the same text, met at another address, is prepared already */
            if (PQresultStatus(prepared) != PGRES_COMMAND_OK &&
                !(state && !strcmp(state, "42P05"))) {
                *failed = prepared; /* the statement's own error, as running it would give */
                return NULL;
            }
            PQclear(prepared);
            st->sql = sql;
        }
        if (st->sql == sql)
            return st->pg_name;
    }
    return ""; /* the cache is full: with its text */
}

static bool pg_send(db_conn *c, const char *sql, const char *name, int count,
                    const char *const *values)
{
    return *name ? PQsendQueryPrepared(c->pg, name, count, values, NULL, NULL, 0)
                 : PQsendQueryParams(c->pg, sql, count, NULL, values, NULL, NULL, 0);
}

typedef struct pg_text_params {
    char numbers[MAX_PARAMS][24];
    const char *values[MAX_PARAMS];
} pg_text_params;

/* Parameters go as text; the server infers their types from the statement. */
static void pg_params(const db_value *params, int count, pg_text_params *out)
{
    for (int i = 0; i < count; i++) {
        if (params[i].type == 'i') {
            snprintf(out->numbers[i], sizeof out->numbers[i], "%lld", (long long)params[i].i);
            out->values[i] = out->numbers[i];
        } else {
            out->values[i] = params[i].type == 's' ? params[i].s : NULL;
        }
    }
}

static db_status pg_status(db_conn *c, PGresult *r);

/* A transaction begins (its BEGIN is being sent): the statement that bounds its lock waits
 * (db_set_lock_wait) goes to sql; false when the session's lock_timeout applies. */
static bool pg_transaction_begins(db_conn *c, char *sql, size_t size)
{
    c->lock_wait_lifted = false; /* a transaction begins */
    if (c->lock_wait_ms <= 0)
        return false;
    snprintf(sql, size, "SET LOCAL lock_timeout = %d", c->lock_wait_ms);
    return true;
}

static void drop_deferred(db_conn *c)
{
    for (int i = 0; i < c->deferred_count; i++)
        for (int p = 0; p < c->deferred[i].count; p++)
            if (c->deferred[i].params[p].type == 's')
                free((char *)c->deferred[i].params[p].s);
    c->deferred_count = 0;
}

/* Runs cmds in one round trip (pipeline mode): a pending BEGIN first, then the held checked
 * writes, then cmds. Returns the first failure's status (the server skips the rest); a held
 * write that changed other than the rows it expected sets deferred_failure instead. With keep,
 * *keep is the first failure's result, or else the last command's, for the caller to clear.
 * Statements are prepared beforehand, so only runs go in the pipeline. */
static db_status pg_pipeline(db_conn *c, const db_command *cmds, int n, PGresult **keep)
{
    if (keep)
        *keep = NULL;
    int held = c->deferred_count;
    int total = held + n;
    db_command all[total > 0 ? total : 1];
    for (int i = 0; i < held; i++)
        all[i] = (db_command){.sql = c->deferred[i].sql,
                              .params = c->deferred[i].params,
                              .count = c->deferred[i].count};
    for (int i = 0; i < n; i++)
        all[held + i] = cmds[i];
    const char *names[total > 0 ? total : 1];
    for (int i = 0; i < total; i++) {
        PGresult *failed;
        if (!(names[i] = pg_prepared_name(c, all[i].sql, &failed))) {
            db_status rc = pg_status(c, failed);
            if (keep)
                *keep = failed; /* the caller reads the refusal from it */
            else
                PQclear(failed);
            drop_deferred(c);
            return rc;
        }
    }
    if (PQenterPipelineMode(c->pg) != 1) {
        drop_deferred(c);
        return pg_status(c, NULL);
    }
    bool begin = c->begin_pending;
    c->begin_pending = false;
    char lock_wait[64];
    int begins = begin ? 1 + pg_transaction_begins(c, lock_wait, sizeof lock_wait) : 0;
    bool sent = !begin || PQsendQueryParams(c->pg, "BEGIN", 0, NULL, NULL, NULL, NULL, 0);
    if (sent && begins == 2)
        sent = PQsendQueryParams(c->pg, lock_wait, 0, NULL, NULL, NULL, NULL, 0);
    for (int i = 0; i < total && sent; i++) {
        pg_text_params text;
        pg_params(all[i].params, all[i].count, &text);
        sent = pg_send(c, all[i].sql, names[i], all[i].count, text.values);
    }
    if (!sent || PQpipelineSync(c->pg) != 1) {
        /* the server may hold back what it answered until a sync: nothing can be read in step */
        db_status rc = pg_status(c, NULL);
        c->unusable = true;
        drop_deferred(c);
        return rc == DB_DONE ? DB_UNAVAILABLE : rc;
    }
    db_status rc = DB_DONE;
    for (int i = -begins; i < total; i++) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) { /* the connection went away mid-pipeline */
            if (rc == DB_DONE)
                rc = pg_status(c, NULL);
            break;
        }
        ExecStatusType status = PQresultStatus(r);
        bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
        bool first_failure = !ok && rc == DB_DONE;
        if (first_failure)
            rc = pg_status(c, r);
        if (ok && i >= 0 && i < held && c->deferred[i].expect_changes >= 0 &&
            !c->deferred_failure) {
            const char *tuples = PQcmdTuples(r);
            if ((*tuples ? atoll(tuples) : 0) != c->deferred[i].expect_changes)
                c->deferred_failure = c->deferred[i].fail_code;
        }
        if (keep && (first_failure || (i == total - 1 && rc == DB_DONE))) {
            *keep = r;
            if (ok) {
                const char *tuples = PQcmdTuples(r);
                c->changes = *tuples ? atoll(tuples) : 0;
            }
        } else {
            PQclear(r);
        }
        PGresult *end = PQgetResult(c->pg); /* NULL closes each command's results */
        if (end)
            PQclear(end);
    }
    PGresult *sync; /* the sync point (PGRES_PIPELINE_SYNC), after the results */
    while ((sync = PQgetResult(c->pg)) != NULL) {
        ExecStatusType status = PQresultStatus(sync);
        PQclear(sync);
        if (status == PGRES_PIPELINE_SYNC || PQstatus(c->pg) == CONNECTION_BAD)
            break;
    }
    if (PQexitPipelineMode(c->pg) != 1) {
        c->unusable = true; /* results out of step with what was sent: never use it again */
        if (rc == DB_DONE)
            rc = DB_UNAVAILABLE;
    }
    drop_deferred(c);
    return rc;
}

static PGresult *pg_run(db_conn *c, const char *sql, int count, const char *const *values)
{
    if (!strcmp(sql, "ROLLBACK")) { /* held writes never need to reach the server */
        drop_deferred(c);
        c->deferred_failure = 0;
    }
    if (c->begin_pending && (!strcmp(sql, "COMMIT") || !strcmp(sql, "ROLLBACK")) &&
        c->deferred_count == 0) {
        c->begin_pending = false; /* the transaction never reached the server */
        return PQmakeEmptyPGresult(c->pg, PGRES_COMMAND_OK);
    }
    if (c->begin_pending || c->deferred_count) {
        /* the BEGIN and the held writes travel with this statement: a one-command pipeline */
        db_value params[MAX_PARAMS];
        for (int i = 0; i < count; i++)
            params[i] =
                values[i] ? (db_value){.type = 's', .s = values[i]} : (db_value){.type = 'n'};
        db_command cmd = {.sql = sql, .params = params, .count = count};
        PGresult *result = NULL;
        pg_pipeline(c, &cmd, 1, &result);
        return result; /* NULL when the connection went: read as unavailable */
    }
    PGresult *failed;
    const char *name = pg_prepared_name(c, sql, &failed);
    if (!name)
        return failed;
    return *name ? PQexecPrepared(c->pg, name, count, values, NULL, NULL, 0)
                 : PQexecParams(c->pg, sql, count, NULL, values, NULL, NULL, 0);
}

/* SQLSTATEs that mean the session is gone or going: class 08 (connection exception) and
 * 57P01-57P04 (admin shutdown, crash shutdown, cannot connect now, database dropped). */
static bool connection_lost_state(const char *state)
{
    return starts_with(state, "08") || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
           !strcmp(state, "57P03") || !strcmp(state, "57P04");
}

/* SQLSTATEs of a server that cannot do the work right now, whatever the statement: class 53
 * (insufficient resources: 53100 disk full, as "could not extend file"; 53200 out of memory;
 * 53300 too many connections), 58 (system error: I/O), XX (internal
 * error). Like a lost session they say nothing about the rows, so a caller that took the
 * failed read for "no such row" is overruled (db_thread_failure). */
static bool server_trouble_state(const char *state)
{
    return starts_with(state, "53") || starts_with(state, "58") || starts_with(state, "XX");
}

static db_status pg_status(db_conn *c, PGresult *r)
{
    switch (PQresultStatus(r)) {
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK:
    case PGRES_EMPTY_QUERY:
        return DB_DONE;
    default: {
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        snprintf(c->error, sizeof c->error, "postgres: %s",
                 r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
        /* a result without SQLSTATE comes from libpq itself: the socket failed */
        if (!state || connection_lost_state(state) || PQstatus(c->pg) == CONNECTION_BAD) {
            db_note_failure(DB_FAILURE_UNAVAILABLE);
            return DB_UNAVAILABLE;
        }
        if (server_trouble_state(state)) {
            db_note_failure(DB_FAILURE_UNAVAILABLE);
            return DB_ERROR;
        }
        /* 22003 numeric_value_out_of_range: a bigint sum (a balance) would overflow. Refused as
         * a check would be; the jobs check the room first (api/common.h, sum_fits), so this is
         * only two writer connections adding to one row at once, or a held addition at the
         * commit, which fails its batch: nothing is written, the retry meets the check */
        if (starts_with(state, "23") || !strcmp(state, "22003"))
            return DB_CONSTRAINT;
        /* a lock wait cut short by db_set_lock_wait's bound is one too: run it again */
        if (!strcmp(state, "40001") || !strcmp(state, "40P01") ||
            (!strcmp(state, "55P03") && c->lock_wait_ms > 0 && !c->lock_wait_lifted)) {
            c->busy_seen = true;
            return DB_BUSY;
        }
        /* 57014 statement_timeout (or a cancel), 55P03 lock_timeout */
        if (!strcmp(state, "57014") || !strcmp(state, "55P03")) {
            db_note_failure(DB_FAILURE_TIMEOUT);
            return DB_TIMEOUT;
        }
        return DB_ERROR;
    }
    }
}

static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

bool db_is_postgres_url(const char *url)
{
    return starts_with(url, "postgres://") || starts_with(url, "postgresql://");
}

bool db_broken(db_conn *c)
{
    return c->kind == DB_POSTGRES && (c->unusable || PQstatus(c->pg) != CONNECTION_OK);
}

bool db_transaction_failed(db_conn *c)
{
    return c->kind == DB_POSTGRES && PQtransactionStatus(c->pg) == PQTRANS_INERROR;
}

bool db_idle_alive(db_conn *c)
{
    if (c->kind != DB_POSTGRES)
        return true;
    /* an idle session has nothing to say; readable means the server closed it (a restart,
     * pg_terminate_backend) or sent its FATAL on the way out */
    struct pollfd p = {.fd = PQsocket(c->pg), .events = POLLIN};
    if (p.fd < 0 || poll(&p, 1, 0) > 0) {
        PQconsumeInput(c->pg);
        snprintf(c->error, sizeof c->error, "postgres: the server closed an idle connection");
        return false;
    }
    return PQstatus(c->pg) == CONNECTION_OK;
}

db_conn *db_open_pg(const char *url, const db_pg_settings *settings, char *err, size_t errlen)
{
    db_pg_settings none = {0};
    if (!settings)
        settings = &none;
    db_conn *c = calloc(1, sizeof *c);
    c->kind = DB_POSTGRES;
    c->pg_prepare = !settings->no_prepare;
    char connect_timeout[16];
    snprintf(connect_timeout, sizeof connect_timeout, "%d", settings->connect_timeout_s);
    /* the URL is expanded first, so these add to it; a URL naming its own application_name
     * keeps it */
    const char *keys[8], *values[8];
    int n = 0;
    keys[n] = "dbname", values[n++] = url;
    if (settings->application_name && !strstr(url, "application_name="))
        keys[n] = "application_name", values[n++] = settings->application_name;
    if (settings->connect_timeout_s > 0 && !strstr(url, "connect_timeout="))
        keys[n] = "connect_timeout", values[n++] = connect_timeout;
    /* a peer that vanishes without closing (a network partition) is noticed in ~20 s */
    keys[n] = "keepalives_idle", values[n++] = "10";
    keys[n] = "keepalives_interval", values[n++] = "5";
    keys[n] = "keepalives_count", values[n++] = "2";
    keys[n] = NULL, values[n] = NULL;
    c->pg = PQconnectdbParams(keys, values, 1);
    if (PQstatus(c->pg) != CONNECTION_OK) {
        snprintf(err, errlen, "cannot connect to PostgreSQL: %s", PQerrorMessage(c->pg));
        /* libpq's message ends with a newline; a log line must not */
        size_t len = strlen(err);
        while (len && (err[len - 1] == '\n' || err[len - 1] == ' '))
            err[--len] = '\0';
        db_close(c);
        return NULL;
    }
    PQsetNoticeProcessor(c->pg, ignore_notice, NULL); /* stderr carries JSON lines only */
    /* Session settings with SET, not startup options, so a pooler (pgbouncer) accepts them. */
    char setup[256];
    int len = snprintf(setup, sizeof setup, "SET client_min_messages = warning");
    if (settings->statement_timeout_ms > 0)
        len += snprintf(setup + len, sizeof setup - (size_t)len, "; SET statement_timeout = %lld",
                        (long long)settings->statement_timeout_ms);
    if (settings->lock_timeout_ms > 0) {
        snprintf(setup + len, sizeof setup - (size_t)len, "; SET lock_timeout = %lld",
                 (long long)settings->lock_timeout_ms);
        snprintf(c->lock_wait_lift, sizeof c->lock_wait_lift, "SET LOCAL lock_timeout = %lld",
                 (long long)settings->lock_timeout_ms);
    } else {
        snprintf(c->lock_wait_lift, sizeof c->lock_wait_lift, "SET LOCAL lock_timeout TO DEFAULT");
    }
    if (db_exec_script(c, setup) != DB_DONE) {
        snprintf(err, errlen, "cannot set up the PostgreSQL session: %s", c->error);
        db_close(c);
        return NULL;
    }
    return c;
}

/* ---- common ---- */

int db_parse_url(const char *url, db_kind *kind, const char **sqlite_path, char *err, size_t errlen)
{
    *sqlite_path = NULL;
    if (db_is_postgres_url(url)) {
        *kind = DB_POSTGRES;
        return 0;
    }
    /* any other scheme is a mistake to report, not a file name (file: is SQLite's URI form) */
    const char *scheme_end = strstr(url, "://");
    if (scheme_end && !starts_with(url, "file:")) {
        snprintf(err, errlen,
                 "--db: unsupported database '%.*s://'; use a file path, sqlite:PATH or "
                 "postgres://...",
                 (int)(scheme_end - url < 32 ? scheme_end - url : 32), url);
        return -1;
    }
    if (starts_with(url, "sqlite:"))
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
                               : lite_open(path, read_only, err, errlen);
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
    drop_deferred(c);
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
        db_stmt *st = lite_prepare(c, sql);
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
    st->pg = pg_run(c, sql, count, values);
    st->pg_row = -1;
    st->status = pg_status(c, st->pg);
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
    return pg_pipeline(c, NULL, 0, NULL);
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
        return lite_status(st->conn, sqlite3_step(st->lite));
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
            return lite_status(c, rc) == DB_DONE ? DB_ERROR : lite_status(c, rc);
        }
        return DB_DONE;
    }
    if (!strcmp(sql, "ROLLBACK")) {
        drop_deferred(c);
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
        bool bounded = pg_transaction_begins(c, lock_wait, sizeof lock_wait);
        size_t size = strlen(sql) + sizeof lock_wait + 16;
        script = malloc(size);
        snprintf(script, size, "BEGIN; %s%s%s", bounded ? lock_wait : "", bounded ? "; " : "", sql);
    }
    PGresult *r = PQexec(c->pg, script ? script : sql);
    free(script);
    db_status rc = pg_status(c, r);
    PQclear(r);
    return rc;
}

/* SQLite's own mapping of the WAL-index's first region, or NULL before the file has one. */
static const volatile unsigned char *lite_wal_index(db_conn *c)
{
    if (c->wal_index)
        return c->wal_index;
    sqlite3_file *f = NULL;
    volatile void *region = NULL;
    if (sqlite3_file_control(c->lite, "main", SQLITE_FCNTL_FILE_POINTER, &f) == SQLITE_OK && f &&
        f->pMethods && f->pMethods->iVersion >= 2 && f->pMethods->xShmMap &&
        f->pMethods->xShmMap(f, 0, 32768, 0, &region) == SQLITE_OK)
        c->wal_index = region;
    return c->wal_index;
}

static void wal_header_copy(const volatile unsigned char *from, unsigned char *to)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    for (int i = 0; i < WAL_INDEX_HEADER_BYTES; i++)
        to[i] = from[i];
}

bool db_snapshot_open(const db_conn *c)
{
    return c->snapshot_open;
}

void db_snapshot_end(db_conn *c)
{
    if (!c->snapshot_open)
        return;
    c->snapshot_open = false;
    if (!sqlite3_get_autocommit(c->lite) && db_exec(c, "COMMIT", "") != DB_DONE)
        db_exec(c, "ROLLBACK", "");
}

void db_snapshot_enter(db_conn *c)
{
    if (c->kind != DB_SQLITE)
        return;
    const volatile unsigned char *header = lite_wal_index(c);
    if (!header)
        return; /* no WAL-index yet: statements run on their own */
    unsigned char now[WAL_INDEX_HEADER_BYTES];
    wal_header_copy(header, now);
    if (c->snapshot_open && !sqlite3_get_autocommit(c->lite) &&
        !memcmp(now, c->snapshot_header, sizeof now))
        return; /* nothing has committed since the snapshot began: it is the latest */
    db_snapshot_end(c);
    /* The copy is taken before the snapshot is (by the first read after BEGIN): a commit
     * between the two only makes the next check end a snapshot that was newer than it. */
    memcpy(c->snapshot_header, now, sizeof now);
    if (db_exec(c, "BEGIN", "") == DB_DONE)
        c->snapshot_open = true;
}

static int lite_wal_hook(void *arg, sqlite3 *lite, const char *name, int pages)
{
    db_conn *c = arg;
    if (pages >= c->checkpoint_pages && !c->commits_unsynced) {
        c->around_checkpoint(c->around_checkpoint_arg);
        sqlite3_wal_checkpoint_v2(lite, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        c->around_checkpoint(c->around_checkpoint_arg);
    }
    return SQLITE_OK;
}

void db_checkpoint_at(db_conn *c, int pages, void (*around)(void *arg), void *arg)
{
    if (c->kind != DB_SQLITE)
        return;
    c->checkpoint_pages = pages;
    c->around_checkpoint = around;
    c->around_checkpoint_arg = arg;
    sqlite3_wal_hook(c->lite, lite_wal_hook, c);
}

db_status db_sync_commits(db_conn *c, bool sync)
{
    if (c->kind != DB_SQLITE || c->commits_unsynced == !sync)
        return DB_DONE;
    db_status rc = db_exec(c, sync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF", "");
    if (rc == DB_DONE)
        c->commits_unsynced = !sync;
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
        return pg_pipeline(c, cmds, n, NULL);
    for (int i = 0; i < n; i++) {
        db_stmt *st = db_query_values(c, cmds[i].sql, cmds[i].params, cmds[i].count);
        db_status rc = db_step(st);
        db_done(st);
        if (rc != DB_DONE && rc != DB_ROW)
            return rc;
    }
    return DB_DONE;
}
