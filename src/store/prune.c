#include "store/prune.h"

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "core/ids.h"
#include "core/log.h"
#include "core/timefmt.h"

/* One chunk's statement: SQLite deletes by rowid (one b-tree probe per row), PostgreSQL by the
 * table's key, skipping rows another transaction holds (a request re-claiming an expired key,
 * another node's pruner), so nodes pruning at once share the work instead of waiting on it. Each
 * inner SELECT walks an index in age order and stops at the chunk's size: the sweeper's old query
 * filtered every finished key through an index on state, a scan of the whole table held inside the
 * writer's transaction every pass (docs/operations.md). */
typedef struct prune_sql {
    const char *sqlite, *postgres;
} prune_sql;

static const prune_sql expired_keys = {
    "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys "
    "WHERE claimed_at < $1 AND state IN ('completed', 'released') ORDER BY claimed_at LIMIT $2)",
    "DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN (SELECT user_id, idem_key "
    "FROM idempotency_keys WHERE claimed_at < $1 AND state IN ('completed', 'released') "
    "ORDER BY claimed_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
};

/* events, finished deliveries (their finishing time is in next_attempt_at) and attempts;
 * Snowflake ids carry their time, so a primary key is an age index */
static const prune_sql event_tables[] = {
    {"DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < $1 ORDER BY id LIMIT $2)",
     "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE id < $1 ORDER BY id LIMIT $2 "
     "FOR UPDATE SKIP LOCKED)"},
    {"DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries "
     "WHERE status IN ('delivered', 'failed') AND next_attempt_at < $1 LIMIT $2)",
     "DELETE FROM webhook_deliveries WHERE (endpoint_id, event_id) IN (SELECT endpoint_id, "
     "event_id FROM webhook_deliveries WHERE status IN ('delivered', 'failed') "
     "AND next_attempt_at < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)"},
    {"DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE id < $1 "
     "ORDER BY id LIMIT $2)",
     "DELETE FROM webhook_attempts WHERE id IN (SELECT id FROM webhook_attempts WHERE id < $1 "
     "ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)"},
};

#define PRUNE_MAX_TABLES 3

/* One chunk of each table of a group in one write job (one commit): the tables still due. A
 * job may be run again (PostgreSQL reruns a batch when a job in it failed), so it reads due
 * and writes only full and deleted. */
typedef struct chunk_job {
    const prune_sql *sql;
    int count;
    int64_t bound[PRUNE_MAX_TABLES];
    bool due[PRUNE_MAX_TABLES];
    bool full[PRUNE_MAX_TABLES]; /* its chunk was full: more may be due */
    int64_t deleted;
} chunk_job;

static write_result delete_chunk(db_conn *db, void *arg)
{
    chunk_job *j = arg;
    j->deleted = 0;
    for (int i = 0; i < j->count; i++) {
        j->full[i] = false;
        if (!j->due[i])
            continue;
        const char *sql = db_kind_of(db) == DB_SQLITE ? j->sql[i].sqlite : j->sql[i].postgres;
        db_status rc = db_exec(db, sql, "ii", j->bound[i], (int64_t)PRUNE_CHUNK_ROWS);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        int64_t n = db_changes(db);
        j->deleted += n;
        j->full[i] = n == PRUNE_CHUNK_ROWS; /* a short chunk: nothing more of it is due */
    }
    return WRITE_OK;
}

static bool any_due(const chunk_job *j)
{
    for (int i = 0; i < j->count; i++)
        if (j->due[i])
            return true;
    return false;
}

static void pause_between_chunks(void)
{
    struct timespec pause = {0, PRUNE_PAUSE_MS * 1000000L};
    nanosleep(&pause, NULL);
}

/* One line per prune that deleted something: what, how many rows, in how many write jobs. */
static void log_pruned(const char *what, int64_t rows, int64_t chunks)
{
    if (rows == 0)
        return;
    jsonw w;
    log_begin(&w, "info", "pruned");
    jw_key(&w, "what");
    jw_string(&w, what);
    jw_key(&w, "rows");
    jw_int(&w, rows);
    jw_key(&w, "chunks");
    jw_int(&w, chunks);
    jw_key(&w, "chunk_rows");
    jw_int(&w, PRUNE_CHUNK_ROWS);
    log_end(&w);
}

/* Chunk after chunk until every table's came back short (nothing more is due), a chunk fails
 * (the next prune tries again) or *stop. */
static int64_t prune(store *s, const char *what, chunk_job *j, int skip, const atomic_bool *stop)
{
    int64_t total = 0, chunks = 0;
    for (int i = 0; i < j->count; i++)
        j->due[i] = i >= skip; /* the first `skip` tables are not pruned by rows */
    for (;;) {
        if (store_write(s, delete_chunk, j) != WRITE_OK)
            break;
        total += j->deleted;
        chunks++;
        for (int i = 0; i < j->count; i++)
            j->due[i] = j->full[i];
        if (!any_due(j) || (stop && atomic_load(stop)))
            break;
        pause_between_chunks();
    }
    log_pruned(what, total, chunks);
    return total;
}

int64_t store_prune_expired_keys(store *s, int64_t expired_before, const atomic_bool *stop)
{
    chunk_job j = {.sql = &expired_keys, .count = 1, .bound = {expired_before}};
    return prune(s, "expired idempotency keys", &j, 0, stop);
}

/* ---- PostgreSQL's month partitions of events and payments (schema.c, version 17) ---- */

/* One call of a partition function of the schema's, in a transaction of its own on a
 * connection no request's batch shares (store_run_upkeep): its DDL takes the table's lock
 * for a moment, never inside a batch of payments. Its functions bound their lock wait (200 ms)
 * and may fail; the next pass tries again. */
typedef struct partition_call {
    const char *sql; /* one bigint parameter, one integer answer */
    int64_t arg, answer;
} partition_call;

static write_result call_partition_function(db_conn *db, void *arg)
{
    partition_call *call = arg;
    db_stmt *st = db_query(db, call->sql, "i", call->arg);
    db_status rc = db_step(st);
    if (rc == DB_ROW)
        call->answer = db_int(st, 0);
    db_done(st);
    return write_result_of_db(rc);
}

static void log_partitions(const char *msg, const char *table, int64_t count)
{
    jsonw w;
    log_begin(&w, "info", msg);
    jw_key(&w, "table");
    jw_string(&w, table);
    jw_key(&w, "partitions");
    jw_int(&w, count);
    log_end(&w);
}

int store_keep_partitions(store *s)
{
    if (store_kind(s) != DB_POSTGRES)
        return 0;
    partition_call call = {.sql = "SELECT payd_ensure_partitions(CAST($1 AS integer))",
                           .arg = PARTITION_MONTHS_AHEAD};
    if (store_run_upkeep(s, call_partition_function, &call) != WRITE_OK)
        return -1;
    if (call.answer > 0)
        log_partitions("partitions made", "events and payments", call.answer);
    return (int)call.answer;
}

int64_t store_drop_event_partitions(store *s, int64_t before)
{
    if (store_kind(s) != DB_POSTGRES)
        return 0;
    partition_call call = {.sql = "SELECT payd_drop_event_partitions($1)",
                           .arg = id_first_of_ms(before / 1000)};
    if (store_run_upkeep(s, call_partition_function, &call) != WRITE_OK)
        return -1;
    if (call.answer > 0)
        log_partitions("partitions dropped", "events", call.answer);
    return call.answer;
}

int64_t store_prune_events(store *s, int64_t before, bool whole_months, const atomic_bool *stop)
{
    /* PostgreSQL: the months of events wholly older than `before` go first, one DROP each;
     * what is left older than it lies in the month `before` falls in, deleted in chunks as on
     * SQLite unless whole months are all that is asked for */
    store_drop_event_partitions(s, before);
    int64_t first_id = id_first_of_ms(before / 1000);
    chunk_job j = {.sql = event_tables, .count = 3, .bound = {first_id, before, first_id}};
    bool rows_of_events = !(whole_months && store_kind(s) == DB_POSTGRES);
    int64_t n =
        prune(s, "events, finished deliveries and attempts", &j, rows_of_events ? 0 : 1, stop);
    return n;
}

/* ---- the pruner thread ---- */

static struct {
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_bool stop;
    store *s;
    prune_schedule schedule;
} pruner = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static void *pruner_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pruner.lock);
    while (!atomic_load(&pruner.stop)) {
        pthread_mutex_unlock(&pruner.lock);
        int64_t now = now_us();
        store_keep_partitions(pruner.s); /* PostgreSQL: the months ahead, before any is due */
        store_prune_expired_keys(pruner.s, now - pruner.schedule.key_ttl_ms * 1000, &pruner.stop);
        if (!atomic_load(&pruner.stop))
            store_prune_events(pruner.s, now - pruner.schedule.event_retention_ms * 1000,
                               pruner.schedule.event_retention_whole_months, &pruner.stop);
        pthread_mutex_lock(&pruner.lock);
        if (atomic_load(&pruner.stop))
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + pruner.schedule.interval_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&pruner.wake, &pruner.lock, &until);
    }
    pthread_mutex_unlock(&pruner.lock);
    return NULL;
}

int store_pruner_start(store *s, const prune_schedule *schedule)
{
    pruner.s = s;
    pruner.schedule = *schedule;
    atomic_store(&pruner.stop, false);
    pruner.running = pthread_create(&pruner.thread, NULL, pruner_main, NULL) == 0;
    return pruner.running ? 0 : -1;
}

void store_pruner_stop(void)
{
    if (!pruner.running)
        return;
    pthread_mutex_lock(&pruner.lock);
    atomic_store(&pruner.stop, true);
    pthread_cond_signal(&pruner.wake);
    pthread_mutex_unlock(&pruner.lock);
    pthread_join(pruner.thread, NULL);
    pruner.running = false;
}
