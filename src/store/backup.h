#ifndef PAYD_STORE_BACKUP_H
#define PAYD_STORE_BACKUP_H
/* `payd backup` on SQLite (docs/operations.md, "Backups"): a consistent copy of a database that
 * payd keeps serving from. The copy is one read transaction (a WAL snapshot), so it holds every
 * commit made before it began and blocks no writer; it is written beside the target, checked
 * and synced, and only then renamed onto it. */
#include <stddef.h>
#include <stdint.h>

typedef struct backup_report {
    int64_t bytes;         /* the copy's size */
    int64_t payments;      /* payments in the copy */
    uint64_t last_payment; /* the newest payment's id in the copy, 0 when none */
    double seconds;        /* from the snapshot's start to the rename */
} backup_report;

/* Copies the SQLite database of `url` to `to_path`, which must not exist. 0 and *report filled,
 * or -1 with err set (the target is then left untouched). */
int store_backup_sqlite(const char *url, const char *to_path, backup_report *report, char *err,
                        size_t errlen);

#endif
