/* PostgreSQL: prepared statements by name, pipelined commands, result and failure mapping,
 * and opening a session. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db_internal.h"

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

db_status db_pg_status(db_conn *c, PGresult *r);

/* A transaction begins (its BEGIN is being sent): the statement that bounds its lock waits
 * (db_set_lock_wait) goes to sql; false when the session's lock_timeout applies. */
bool db_pg_transaction_begins(db_conn *c, char *sql, size_t size)
{
    c->lock_wait_lifted = false; /* a transaction begins */
    if (c->lock_wait_ms <= 0)
        return false;
    snprintf(sql, size, "SET LOCAL lock_timeout = %d", c->lock_wait_ms);
    return true;
}

void db_drop_deferred(db_conn *c)
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
db_status db_pg_pipeline(db_conn *c, const db_command *cmds, int n, PGresult **keep)
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
            db_status rc = db_pg_status(c, failed);
            if (keep)
                *keep = failed; /* the caller reads the refusal from it */
            else
                PQclear(failed);
            db_drop_deferred(c);
            return rc;
        }
    }
    if (PQenterPipelineMode(c->pg) != 1) {
        db_drop_deferred(c);
        return db_pg_status(c, NULL);
    }
    bool begin = c->begin_pending;
    c->begin_pending = false;
    char lock_wait[64];
    int begins = begin ? 1 + db_pg_transaction_begins(c, lock_wait, sizeof lock_wait) : 0;
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
        db_status rc = db_pg_status(c, NULL);
        c->unusable = true;
        db_drop_deferred(c);
        return rc == DB_DONE ? DB_UNAVAILABLE : rc;
    }
    db_status rc = DB_DONE;
    for (int i = -begins; i < total; i++) {
        PGresult *r = PQgetResult(c->pg);
        if (!r) { /* the connection went away mid-pipeline */
            if (rc == DB_DONE)
                rc = db_pg_status(c, NULL);
            break;
        }
        ExecStatusType status = PQresultStatus(r);
        bool ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
        bool first_failure = !ok && rc == DB_DONE;
        if (first_failure)
            rc = db_pg_status(c, r);
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
    db_drop_deferred(c);
    return rc;
}

PGresult *db_pg_run(db_conn *c, const char *sql, int count, const char *const *values)
{
    if (!strcmp(sql, "ROLLBACK")) { /* held writes never need to reach the server */
        db_drop_deferred(c);
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
        db_pg_pipeline(c, &cmd, 1, &result);
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
    return db_starts_with(state, "08") || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
           !strcmp(state, "57P03") || !strcmp(state, "57P04");
}

/* SQLSTATEs of a server that cannot do the work right now, whatever the statement: class 53
 * (insufficient resources: 53100 disk full, as "could not extend file"; 53200 out of memory;
 * 53300 too many connections), 58 (system error: I/O), XX (internal
 * error). Like a lost session they say nothing about the rows, so a caller that took the
 * failed read for "no such row" is overruled (db_thread_failure). */
static bool server_trouble_state(const char *state)
{
    return db_starts_with(state, "53") || db_starts_with(state, "58") ||
           db_starts_with(state, "XX");
}

db_status db_pg_status(db_conn *c, PGresult *r)
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
        if (db_starts_with(state, "23") || !strcmp(state, "22003"))
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
    return db_starts_with(url, "postgres://") || db_starts_with(url, "postgresql://");
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
