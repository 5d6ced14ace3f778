#include "store/wal_coalesce.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define VFS_NAME "payd-wal-coalesce"
/* The unix VFS writes at most 128 KiB - 1 bytes per call (it masks the length): 30 frames of
 * 4 KiB pages per write, a commit of 40 frames in two. */
#define BUFFER_BYTES (124 * 1024)
#define FRAME_HEADER 24 /* a WAL frame's header; bytes 4-7: db size if it commits */

#define WAL_WRITE_LOCK 0 /* the shared-memory lock slot of the WAL's one writer */

/* Both wrappers begin so: the default VFS's file lives in the memory right after them. */
typedef struct wrapped_file {
    sqlite3_file base; /* pMethods: ours */
    sqlite3_file *under;
} wrapped_file;

#define UNDER(file) (((wrapped_file *)(file))->under)

typedef struct db_file db_file;

typedef struct wal_file {
    wrapped_file w; /* pMethods: wal_methods */
    db_file *db;    /* the database file of the same connection */
    unsigned char *buf;
    sqlite3_int64 buf_offset; /* the file offset of buf[0] */
    int buf_len;
    bool commit_next; /* the last write was a commit frame's header: flush after its page */
} wal_file;

/* A database file, wrapped only to see its connection give up the WAL's write lock: whatever
 * the WAL buffer still holds then belongs to a transaction that rolled back, and must never
 * reach the file, where another connection may write next. */
struct db_file {
    wrapped_file w;        /* pMethods: db_methods */
    sqlite3_filename name; /* the pager's own pointer: its WAL's name leads back to it */
    wal_file *wal;
    db_file *next; /* in the list of open database files */
};

static sqlite3_vfs *under_vfs;
static sqlite3_vfs coalesce_vfs;
static pthread_mutex_t open_files_lock = PTHREAD_MUTEX_INITIALIZER;
static db_file *open_files;

/* ---- the default VFS's methods, for what neither wrapper changes ---- */

static int pass_read(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset)
{
    return UNDER(file)->pMethods->xRead(UNDER(file), data, amount, offset);
}
static int pass_write(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset)
{
    return UNDER(file)->pMethods->xWrite(UNDER(file), data, amount, offset);
}
static int pass_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    return UNDER(file)->pMethods->xTruncate(UNDER(file), size);
}
static int pass_sync(sqlite3_file *file, int flags)
{
    return UNDER(file)->pMethods->xSync(UNDER(file), flags);
}
static int pass_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    return UNDER(file)->pMethods->xFileSize(UNDER(file), size);
}
static int pass_lock(sqlite3_file *file, int level)
{
    return UNDER(file)->pMethods->xLock(UNDER(file), level);
}
static int pass_unlock(sqlite3_file *file, int level)
{
    return UNDER(file)->pMethods->xUnlock(UNDER(file), level);
}
static int pass_check_reserved_lock(sqlite3_file *file, int *out)
{
    return UNDER(file)->pMethods->xCheckReservedLock(UNDER(file), out);
}
static int pass_file_control(sqlite3_file *file, int op, void *arg)
{
    return UNDER(file)->pMethods->xFileControl(UNDER(file), op, arg);
}
static int pass_sector_size(sqlite3_file *file)
{
    return UNDER(file)->pMethods->xSectorSize(UNDER(file));
}
static int pass_device_characteristics(sqlite3_file *file)
{
    return UNDER(file)->pMethods->xDeviceCharacteristics(UNDER(file));
}
static int pass_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **out)
{
    return UNDER(file)->pMethods->xShmMap(UNDER(file), region, size, extend, out);
}
static void pass_shm_barrier(sqlite3_file *file)
{
    UNDER(file)->pMethods->xShmBarrier(UNDER(file));
}
static int pass_shm_unmap(sqlite3_file *file, int delete_flag)
{
    return UNDER(file)->pMethods->xShmUnmap(UNDER(file), delete_flag);
}
static int pass_fetch(sqlite3_file *file, sqlite3_int64 offset, int amount, void **out)
{
    return UNDER(file)->pMethods->xFetch(UNDER(file), offset, amount, out);
}
static int pass_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *page)
{
    return UNDER(file)->pMethods->xUnfetch(UNDER(file), offset, page);
}

/* ---- the WAL: writes gathered until the commit frame ---- */

static int flush(wal_file *f)
{
    if (!f->buf_len)
        return SQLITE_OK;
    int rc = f->w.under->pMethods->xWrite(f->w.under, f->buf, f->buf_len, f->buf_offset);
    f->buf_len = 0; /* on failure too: SQLite fails the transaction, which never commits */
    return rc;
}

static int wal_write(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset)
{
    wal_file *f = (wal_file *)file;
    if (!f->buf)
        return f->w.under->pMethods->xWrite(f->w.under, data, amount, offset);
    bool commit_header =
        amount == FRAME_HEADER && memcmp((const unsigned char *)data + 4, "\0\0\0\0", 4) != 0;
    bool follows = f->buf_len && offset == f->buf_offset + f->buf_len;
    int rc = SQLITE_OK;
    if (!follows || f->buf_len + amount > BUFFER_BYTES)
        rc = flush(f); /* not the next bytes (a frame rewritten in place), or no room */
    if (rc == SQLITE_OK && amount > BUFFER_BYTES) {
        rc = f->w.under->pMethods->xWrite(f->w.under, data, amount, offset);
    } else if (rc == SQLITE_OK) {
        if (!f->buf_len)
            f->buf_offset = offset;
        memcpy(f->buf + f->buf_len, data, (size_t)amount);
        f->buf_len += amount;
    }
    if (rc == SQLITE_OK && f->commit_next)
        rc = flush(f); /* the commit frame is complete: in the file before it is published */
    f->commit_next = rc == SQLITE_OK && commit_header;
    return rc;
}

/* Every other operation sees the file as if nothing were buffered. A read of frames outside the
 * buffer (a page of an earlier commit, for the writer's cache) leaves it be. */
static int wal_read(sqlite3_file *file, void *data, int amount, sqlite3_int64 offset)
{
    wal_file *f = (wal_file *)file;
    bool overlaps =
        f->buf_len && offset < f->buf_offset + f->buf_len && offset + amount > f->buf_offset;
    int rc = overlaps ? flush(f) : SQLITE_OK;
    return rc != SQLITE_OK ? rc : pass_read(file, data, amount, offset);
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : pass_truncate(file, size);
}

static int wal_sync(sqlite3_file *file, int flags)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : pass_sync(file, flags);
}

static int wal_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : pass_file_size(file, size);
}

static int wal_file_control(sqlite3_file *file, int op, void *arg)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : pass_file_control(file, op, arg);
}

/* Whatever is buffered at close never committed (a commit is written out at its frame). */
static int wal_close(sqlite3_file *file)
{
    wal_file *f = (wal_file *)file;
    pthread_mutex_lock(&open_files_lock);
    if (f->db)
        f->db->wal = NULL;
    pthread_mutex_unlock(&open_files_lock);
    int rc = f->w.under->pMethods->xClose(f->w.under);
    free(f->buf);
    f->buf = NULL;
    return rc;
}

/* Version 1: a WAL file is never memory-mapped and has no shared memory of its own. */
static const sqlite3_io_methods wal_methods = {
    .iVersion = 1,
    .xClose = wal_close,
    .xRead = wal_read,
    .xWrite = wal_write,
    .xTruncate = wal_truncate,
    .xSync = wal_sync,
    .xFileSize = wal_file_size,
    .xLock = pass_lock,
    .xUnlock = pass_unlock,
    .xCheckReservedLock = pass_check_reserved_lock,
    .xFileControl = wal_file_control,
    .xSectorSize = pass_sector_size,
    .xDeviceCharacteristics = pass_device_characteristics,
};

/* ---- the database file: every method the default one's, the write lock watched ---- */

static int db_close(sqlite3_file *file)
{
    db_file *d = (db_file *)file;
    pthread_mutex_lock(&open_files_lock);
    for (db_file **p = &open_files; *p; p = &(*p)->next) {
        if (*p == d) {
            *p = d->next;
            break;
        }
    }
    if (d->wal)
        d->wal->db = NULL;
    pthread_mutex_unlock(&open_files_lock);
    return d->w.under->pMethods->xClose(d->w.under);
}

static int db_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
    db_file *d = (db_file *)file;
    bool gives_up_writing = (flags & SQLITE_SHM_UNLOCK) && (flags & SQLITE_SHM_EXCLUSIVE) &&
                            offset <= WAL_WRITE_LOCK && offset + n > WAL_WRITE_LOCK;
    if (gives_up_writing && d->wal) { /* frames of a transaction that rolled back */
        d->wal->buf_len = 0;
        d->wal->commit_next = false;
    }
    return d->w.under->pMethods->xShmLock(d->w.under, offset, n, flags);
}

/* Version 3, as the default VFS's database files (open_db_file checks). */
static const sqlite3_io_methods db_methods = {
    .iVersion = 3,
    .xClose = db_close,
    .xRead = pass_read,
    .xWrite = pass_write,
    .xTruncate = pass_truncate,
    .xSync = pass_sync,
    .xFileSize = pass_file_size,
    .xLock = pass_lock,
    .xUnlock = pass_unlock,
    .xCheckReservedLock = pass_check_reserved_lock,
    .xFileControl = pass_file_control,
    .xSectorSize = pass_sector_size,
    .xDeviceCharacteristics = pass_device_characteristics,
    .xShmMap = pass_shm_map,
    .xShmLock = db_shm_lock,
    .xShmBarrier = pass_shm_barrier,
    .xShmUnmap = pass_shm_unmap,
    .xFetch = pass_fetch,
    .xUnfetch = pass_unfetch,
};

static int open_db_file(sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags)
{
    db_file *d = (db_file *)file;
    memset(d, 0, sizeof *d);
    d->w.under = (sqlite3_file *)(d + 1);
    d->name = name;
    int rc = under_vfs->xOpen(under_vfs, name, d->w.under, flags, out_flags);
    if (rc != SQLITE_OK)
        return rc; /* pMethods stays NULL: SQLite calls no xClose */
    if (d->w.under->pMethods->iVersion < 3) {
        d->w.under->pMethods->xClose(d->w.under);
        return SQLITE_CANTOPEN;
    }
    d->w.base.pMethods = &db_methods;
    pthread_mutex_lock(&open_files_lock);
    d->next = open_files;
    open_files = d;
    pthread_mutex_unlock(&open_files_lock);
    return SQLITE_OK;
}

static int open_wal_file(sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags)
{
    wal_file *f = (wal_file *)file;
    memset(f, 0, sizeof *f);
    f->w.under = (sqlite3_file *)(f + 1);
    f->buf = malloc(BUFFER_BYTES);
    if (!f->buf)
        return SQLITE_NOMEM;
    int rc = under_vfs->xOpen(under_vfs, name, f->w.under, flags, out_flags);
    if (rc != SQLITE_OK) {
        free(f->buf);
        f->buf = NULL;
        return rc;
    }
    /* SQLite names a WAL inside its pager's own copy of the database's name, and gives that
     * same pointer back: the database file this connection opened first. */
    sqlite3_filename database = sqlite3_filename_database(name);
    pthread_mutex_lock(&open_files_lock);
    for (db_file *d = open_files; d; d = d->next) {
        if (d->name == database && !d->wal) {
            d->wal = f;
            f->db = d;
            break;
        }
    }
    pthread_mutex_unlock(&open_files_lock);
    if (!f->db) { /* no way to see a rollback: this WAL is written through, unbuffered */
        free(f->buf);
        f->buf = NULL;
    }
    f->w.base.pMethods = &wal_methods;
    return SQLITE_OK;
}

static int coalesce_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                         int *out_flags)
{
    (void)vfs;
    if (flags & SQLITE_OPEN_MAIN_DB)
        return open_db_file(name, file, flags, out_flags);
    if (flags & SQLITE_OPEN_WAL)
        return open_wal_file(name, file, flags, out_flags);
    return under_vfs->xOpen(under_vfs, name, file, flags, out_flags); /* in place, unwrapped */
}

/* The rest of the VFS is the default one's. */
static int coalesce_delete(sqlite3_vfs *v, const char *name, int sync_dir)
{
    (void)v;
    return under_vfs->xDelete(under_vfs, name, sync_dir);
}
static int coalesce_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
    (void)v;
    return under_vfs->xAccess(under_vfs, name, flags, out);
}
static int coalesce_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out)
{
    (void)v;
    return under_vfs->xFullPathname(under_vfs, name, n, out);
}
static void *coalesce_dl_open(sqlite3_vfs *v, const char *name)
{
    (void)v;
    return under_vfs->xDlOpen(under_vfs, name);
}
static void coalesce_dl_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    under_vfs->xDlError(under_vfs, n, out);
}
static void (*coalesce_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
    (void)v;
    return under_vfs->xDlSym(under_vfs, h, sym);
}
static void coalesce_dl_close(sqlite3_vfs *v, void *h)
{
    (void)v;
    under_vfs->xDlClose(under_vfs, h);
}
static int coalesce_randomness(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return under_vfs->xRandomness(under_vfs, n, out);
}
static int coalesce_sleep(sqlite3_vfs *v, int us)
{
    (void)v;
    return under_vfs->xSleep(under_vfs, us);
}
static int coalesce_current_time(sqlite3_vfs *v, double *out)
{
    (void)v;
    return under_vfs->xCurrentTime(under_vfs, out);
}
static int coalesce_last_error(sqlite3_vfs *v, int n, char *out)
{
    (void)v;
    return under_vfs->xGetLastError ? under_vfs->xGetLastError(under_vfs, n, out) : 0;
}
static int coalesce_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out)
{
    (void)v;
    return under_vfs->xCurrentTimeInt64(under_vfs, out);
}

static void register_once(void)
{
    under_vfs = sqlite3_vfs_find(NULL);
    if (!under_vfs || under_vfs->iVersion < 2 || !under_vfs->xCurrentTimeInt64) {
        under_vfs = NULL;
        return;
    }
    size_t wrapper = sizeof(wal_file) > sizeof(db_file) ? sizeof(wal_file) : sizeof(db_file);
    coalesce_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)wrapper + under_vfs->szOsFile,
        .mxPathname = under_vfs->mxPathname,
        .zName = VFS_NAME,
        .xOpen = coalesce_open,
        .xDelete = coalesce_delete,
        .xAccess = coalesce_access,
        .xFullPathname = coalesce_full_pathname,
        .xDlOpen = coalesce_dl_open,
        .xDlError = coalesce_dl_error,
        .xDlSym = coalesce_dl_sym,
        .xDlClose = coalesce_dl_close,
        .xRandomness = coalesce_randomness,
        .xSleep = coalesce_sleep,
        .xCurrentTime = coalesce_current_time,
        .xGetLastError = coalesce_last_error,
        .xCurrentTimeInt64 = coalesce_current_time_int64,
    };
    if (sqlite3_vfs_register(&coalesce_vfs, 0) != SQLITE_OK)
        under_vfs = NULL;
}

const char *wal_coalesce_vfs(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    return under_vfs ? VFS_NAME : NULL;
}
