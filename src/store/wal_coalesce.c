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

typedef struct wal_file {
    sqlite3_file base;   /* pMethods: wal_methods */
    sqlite3_file *under; /* the default VFS's file, in the memory right after this struct */
    unsigned char *buf;
    sqlite3_int64 buf_offset; /* the file offset of buf[0] */
    int buf_len;
    bool commit_next; /* the last write was a commit frame's header: flush after its page */
} wal_file;

static sqlite3_vfs *under_vfs;
static sqlite3_vfs coalesce_vfs;

static int flush(wal_file *f)
{
    if (!f->buf_len)
        return SQLITE_OK;
    int rc = f->under->pMethods->xWrite(f->under, f->buf, f->buf_len, f->buf_offset);
    f->buf_len = 0; /* on failure too: SQLite fails the transaction, which never commits */
    return rc;
}

static int wal_write(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset)
{
    wal_file *f = (wal_file *)file;
    bool commit_header =
        amount == FRAME_HEADER && memcmp((const unsigned char *)data + 4, "\0\0\0\0", 4) != 0;
    bool follows = f->buf_len && offset == f->buf_offset + f->buf_len;
    int rc = SQLITE_OK;
    if (!follows || f->buf_len + amount > BUFFER_BYTES)
        rc = flush(f); /* not the next bytes (a frame rewritten in place), or no room */
    if (rc == SQLITE_OK && amount > BUFFER_BYTES) {
        rc = f->under->pMethods->xWrite(f->under, data, amount, offset);
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
    return rc != SQLITE_OK ? rc : f->under->pMethods->xRead(f->under, data, amount, offset);
}

static int wal_truncate(sqlite3_file *file, sqlite3_int64 size)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->under->pMethods->xTruncate(f->under, size);
}

static int wal_sync(sqlite3_file *file, int flags)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->under->pMethods->xSync(f->under, flags);
}

static int wal_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->under->pMethods->xFileSize(f->under, size);
}

static int wal_file_control(sqlite3_file *file, int op, void *arg)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    return rc != SQLITE_OK ? rc : f->under->pMethods->xFileControl(f->under, op, arg);
}

static int wal_close(sqlite3_file *file)
{
    wal_file *f = (wal_file *)file;
    int rc = flush(f);
    int closed = f->under->pMethods->xClose(f->under);
    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : closed;
}

static int wal_lock(sqlite3_file *file, int level)
{
    wal_file *f = (wal_file *)file;
    return f->under->pMethods->xLock(f->under, level);
}

static int wal_unlock(sqlite3_file *file, int level)
{
    wal_file *f = (wal_file *)file;
    return f->under->pMethods->xUnlock(f->under, level);
}

static int wal_check_reserved_lock(sqlite3_file *file, int *out)
{
    wal_file *f = (wal_file *)file;
    return f->under->pMethods->xCheckReservedLock(f->under, out);
}

static int wal_sector_size(sqlite3_file *file)
{
    wal_file *f = (wal_file *)file;
    return f->under->pMethods->xSectorSize(f->under);
}

static int wal_device_characteristics(sqlite3_file *file)
{
    wal_file *f = (wal_file *)file;
    return f->under->pMethods->xDeviceCharacteristics(f->under);
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
    .xLock = wal_lock,
    .xUnlock = wal_unlock,
    .xCheckReservedLock = wal_check_reserved_lock,
    .xFileControl = wal_file_control,
    .xSectorSize = wal_sector_size,
    .xDeviceCharacteristics = wal_device_characteristics,
};

static int coalesce_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags,
                         int *out_flags)
{
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL)) /* the default VFS's file, in place, unwrapped */
        return under_vfs->xOpen(under_vfs, name, file, flags, out_flags);
    wal_file *f = (wal_file *)file;
    memset(f, 0, sizeof *f);
    f->under = (sqlite3_file *)(f + 1);
    f->buf = malloc(BUFFER_BYTES);
    if (!f->buf)
        return SQLITE_NOMEM;
    int rc = under_vfs->xOpen(under_vfs, name, f->under, flags, out_flags);
    if (rc != SQLITE_OK) {
        free(f->buf);
        f->buf = NULL;
        return rc; /* pMethods stays NULL: SQLite calls no xClose */
    }
    f->base.pMethods = &wal_methods;
    return SQLITE_OK;
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
    coalesce_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(wal_file) + under_vfs->szOsFile,
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
