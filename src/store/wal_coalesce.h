#ifndef PAYD_STORE_WAL_COALESCE_H
#define PAYD_STORE_WAL_COALESCE_H
/* A SQLite VFS over the default one that gathers a transaction's writes to its write-ahead log
 * into one buffer and hands them to the kernel at once, when the transaction commits.
 *
 * SQLite writes each WAL frame as two pwrite calls (the 24-byte frame header, then the page),
 * and a frame of 4,120 bytes straddles two of the kernel's pages: a commit of 40 frames was 80
 * system calls and ~120 page-cache updates. Gathered, it is two calls over 41 pages. Every other
 * file (the database, its shared memory, journals) and every other operation go straight to the
 * default VFS.
 *
 * Safe because nothing can read a frame before its commit is in the file: the buffer is written
 * out before the WAL is synced, read, truncated, sized or closed, and right after the write of a
 * commit frame (whose header carries the database size), so even with synchronous=OFF a
 * committed transaction is in the file before SQLite publishes it in the WAL-index, where
 * readers look. A crash loses only what was buffered: frames of a transaction not yet
 * committed, which recovery would have ignored. */

/* Registers the VFS (once; not as the default) and returns its name, for sqlite3_open_v2; NULL
 * if SQLite has no default VFS to build on. */
const char *wal_coalesce_vfs(void);

#endif
