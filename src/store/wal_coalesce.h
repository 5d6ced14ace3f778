#ifndef PAYD_STORE_WAL_COALESCE_H
#define PAYD_STORE_WAL_COALESCE_H
/* A SQLite VFS over the default one that gathers a transaction's writes to its write-ahead log
 * into one buffer and hands them to the kernel at once, when the transaction commits.
 *
 * SQLite writes each WAL frame as two pwrite calls (the 24-byte frame header, then the page),
 * and a frame of 4,120 bytes straddles two of the kernel's pages: a commit of 40 frames was 80
 * system calls and up to ~120 page-cache updates. Gathered, it is two calls over 41 pages. Every
 * other file (journals, temporary files) and every other operation go straight to the default VFS;
 * the database file is wrapped only to watch its connection's WAL write lock.
 *
 * Safe because nothing can read a frame before its commit is in the file, and nothing buffered
 * outlives its transaction:
 * - the buffer is written out right after the write of a commit frame (whose header carries the
 *   database size), so even with synchronous=OFF a committed transaction is in the file before
 *   SQLite publishes it in the WAL-index, where readers look; and before the WAL is synced,
 *   truncated, sized, or read where the buffer lies;
 * - when the connection gives up the WAL's write lock, what is still buffered belongs to a
 *   transaction that rolled back (frames spilled from its cache): it is dropped, never written
 *   over frames another connection may commit next; likewise at close;
 * - a crash loses only what was buffered: frames of a transaction not yet committed, which
 *   recovery would have ignored.
 * In exclusive locking mode, where SQLite takes no shared-memory locks, only one connection
 * writes the database and its writes reach the file in their order: nothing else needs them. */

/* Registers the VFS (once; not as the default) and returns its name, for sqlite3_open_v2; NULL
 * if SQLite has no default VFS to build on. */
const char *wal_coalesce_vfs(void);

#endif
