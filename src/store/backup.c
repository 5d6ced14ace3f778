/* `payd backup` on SQLite (backup.h). */
#include "store/backup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/db.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* fsync a file or directory by path; 0 or -1 with errno. */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* The directory holding path, synced so the rename that put the copy there is durable. */
static int sync_parent(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return -1;
    int rc = sync_path(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    return rc;
}

/* The whole source, in one step: one read transaction, so the copy is a single snapshot even
 * while payd writes (in WAL mode a reader blocks no writer). Stepping page by page would restart
 * on every commit payd makes, and might never end under load. */
static int copy_snapshot(sqlite3 *src, sqlite3 *dst, char *err, size_t errlen)
{
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (!b) {
        snprintf(err, errlen, "backup: %s", sqlite3_errmsg(dst));
        return -1;
    }
    int rc;
    while ((rc = sqlite3_backup_step(b, -1)) == SQLITE_BUSY || rc == SQLITE_LOCKED)
        sqlite3_sleep(10);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE) {
        snprintf(err, errlen, "backup: copying failed: %s", sqlite3_errstr(rc));
        return -1;
    }
    return 0;
}

/* The copy stands alone (no -wal beside it), is whole, and says what it holds. */
static int check_copy(sqlite3 *dst, backup_report *report, char *err, size_t errlen)
{
    char *why = NULL;
    if (sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", NULL, NULL, &why) != SQLITE_OK) {
        snprintf(err, errlen, "backup: %s", why ? why : "journal mode");
        sqlite3_free(why);
        return -1;
    }
    sqlite3_stmt *st = NULL;
    int ok = sqlite3_prepare_v2(dst, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
             sqlite3_step(st) == SQLITE_ROW &&
             !strcmp((const char *)sqlite3_column_text(st, 0), "ok");
    if (!ok)
        snprintf(err, errlen, "backup: the copy fails its integrity check: %s",
                 st && sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0)
                                                  : sqlite3_errmsg(dst));
    sqlite3_finalize(st);
    if (!ok)
        return -1;
    if (sqlite3_prepare_v2(dst, "SELECT count(*), coalesce(max(id), 0) FROM payments", -1, &st,
                           NULL) != SQLITE_OK ||
        sqlite3_step(st) != SQLITE_ROW) {
        snprintf(err, errlen, "backup: the copy holds no payments table: %s", sqlite3_errmsg(dst));
        sqlite3_finalize(st);
        return -1;
    }
    report->payments = sqlite3_column_int64(st, 0);
    report->last_payment = (uint64_t)sqlite3_column_int64(st, 1);
    sqlite3_finalize(st);
    return 0;
}

static sqlite3 *open_file(const char *path, int flags, char *err, size_t errlen)
{
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, flags, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "backup: cannot open %s: %s", path,
                 db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* Copy into partial_path, check it, close it: 0 or -1. */
static int write_copy(const char *source_path, const char *partial_path, backup_report *report,
                      char *err, size_t errlen)
{
    sqlite3 *src = open_file(source_path, SQLITE_OPEN_READWRITE, err, errlen);
    if (!src)
        return -1;
    sqlite3 *dst = open_file(partial_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, err, errlen);
    int rc = -1;
    if (dst && copy_snapshot(src, dst, err, errlen) == 0)
        rc = check_copy(dst, report, err, errlen);
    sqlite3_close(src);
    if (dst && sqlite3_close(dst) != SQLITE_OK && rc == 0) {
        snprintf(err, errlen, "backup: closing the copy failed");
        rc = -1;
    }
    return rc;
}

int store_backup_sqlite(const char *url, const char *to_path, backup_report *report, char *err,
                        size_t errlen)
{
    db_kind kind;
    const char *source_path = NULL;
    if (db_parse_url(url, &kind, &source_path, err, errlen) != 0)
        return -1;
    if (kind != DB_SQLITE) {
        snprintf(err, errlen,
                 "backup: --db is PostgreSQL, which is backed up by continuous "
                 "archiving (docs/operations.md, \"PostgreSQL\")");
        return -1;
    }
    struct stat st;
    if (stat(source_path, &st) != 0) {
        snprintf(err, errlen, "backup: no database at %s", source_path);
        return -1;
    }
    if (lstat(to_path, &st) == 0) {
        snprintf(err, errlen, "backup: %s exists; name a new file", to_path);
        return -1;
    }
    size_t len = strlen(to_path) + sizeof ".partial";
    char *partial = malloc(len);
    if (!partial) {
        snprintf(err, errlen, "backup: out of memory");
        return -1;
    }
    snprintf(partial, len, "%s.partial", to_path);
    unlink(partial); /* left by a backup that died: never part of a finished copy */
    double started = now_s();
    *report = (backup_report){0};
    int rc = write_copy(source_path, partial, report, err, errlen);
    if (rc == 0 && (sync_path(partial, O_RDONLY) != 0 || rename(partial, to_path) != 0 ||
                    sync_parent(to_path) != 0)) {
        snprintf(err, errlen, "backup: writing %s: %s", to_path, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        unlink(partial);
    else if (stat(to_path, &st) == 0)
        report->bytes = st.st_size;
    report->seconds = now_s() - started;
    free(partial);
    return rc;
}
