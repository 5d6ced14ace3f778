/* SQLite: opening and tuning a connection, preparing statements, mapping result codes, and
 * the WAL-index snapshot and checkpoint hooks the store's readers and writer use. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/db_internal.h"
#include "store/wal_coalesce.h"

db_status db_lite_status(db_conn *c, int rc)
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

db_conn *db_lite_open(const char *path, bool read_only, char *err, size_t errlen)
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

db_stmt *db_lite_prepare(db_conn *c, const char *sql)
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
