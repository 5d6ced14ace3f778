/* Read connections.
 *
 * SQLite: one connection per thread. A request's reads share one read snapshot, which is kept
 * ("parked") when the request ends: the next request on the thread reads from it without
 * taking SQLite's per-transaction locks for as long as the WAL-index header shows that nothing
 * has committed since it began (db_snapshot_enter); reads outside a request run one statement at
 * a time, as before. A parked snapshot pins the WAL frames it reads, which a checkpoint could
 * otherwise copy back and a later write start over, so the writer ends every parked snapshot
 * before it checkpoints, and again after: one begun during the checkpoint pins the frames that
 * came after what it copied. A snapshot in use while a checkpoint began or ended is not parked
 * but ended when its request is done: parked, it would keep the WAL from starting over at the
 * next write (SQLite starts it over only when no reader uses a snapshot older than the
 * checkpoint), and the writer would checkpoint again at its next commit, for the few pages
 * written since and a full fdatasync of the database. A slot's state says which thread may use
 * its connection. */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "store/store_internal.h"

/* Set between store_request_begin and store_thread_done on a thread serving a request. */
static _Thread_local bool reads_for_request;

void store_request_begin(store *s)
{
    (void)s;
    reads_for_request = true;
}

/* On the owner's thread. */
static void slot_take(reader_slot *r)
{
    for (;;) {
        int seen = atomic_load(&r->state);
        if (seen == READER_IN_USE)
            return; /* already taken by this thread */
        if (seen != READER_ENDING && atomic_compare_exchange_weak(&r->state, &seen, READER_IN_USE))
            return;
        sched_yield(); /* the writer is ending the parked snapshot (one COMMIT) */
    }
}

static void slot_put(store *s, reader_slot *r)
{
    if (db_snapshot_open(r->conn) && atomic_load(&s->checkpoint_edges) != r->checkpoint_edges)
        db_snapshot_end(r->conn);
    atomic_store(&r->state, db_snapshot_open(r->conn) ? READER_PARKED : READER_FREE);
}

/* On the writer's thread, before and after a checkpoint. */
void store_around_checkpoint(void *arg)
{
    store *s = arg;
    atomic_fetch_add(&s->checkpoint_edges, 1);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->reader_count; i++) {
        reader_slot *r = s->readers[i];
        int parked = READER_PARKED;
        if (atomic_compare_exchange_strong(&r->state, &parked, READER_ENDING)) {
            db_snapshot_end(r->conn);
            atomic_store(&r->state, READER_FREE);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

static db_conn *lite_reader(store *s)
{
    reader_slot *r = pthread_getspecific(s->reader_key);
    if (!r) {
        char err[256];
        db_conn *c = db_open(s->url, true, err, sizeof err);
        if (c && db_sqlite_tune(c, s->opt.sqlite_cache_mb ? s->opt.sqlite_cache_mb : 16,
                                s->opt.sqlite_mmap_mb) != DB_DONE) {
            snprintf(err, sizeof err, "%s", db_last_error(c));
            db_close(c);
            c = NULL;
        }
        if (!c) {
            log_error("error", "cannot open reader", err);
            return NULL;
        }
        r = calloc(1, sizeof *r);
        r->conn = c;
        atomic_init(&r->state, READER_IN_USE);
        pthread_mutex_lock(&s->lock);
        if (s->reader_count == MAX_READERS) {
            pthread_mutex_unlock(&s->lock);
            db_close(c);
            free(r);
            return NULL;
        }
        s->readers[s->reader_count++] = r;
        pthread_mutex_unlock(&s->lock);
        pthread_setspecific(s->reader_key, r);
    }
    slot_take(r);
    r->checkpoint_edges = atomic_load(&s->checkpoint_edges);
    if (reads_for_request)
        db_snapshot_enter(r->conn);
    else
        db_snapshot_end(r->conn);
    return r->conn;
}

bool store_keeps_snapshot(store *s)
{
    reader_slot *r = s->kind == DB_SQLITE ? pthread_getspecific(s->reader_key) : NULL;
    return r && db_snapshot_open(r->conn);
}

db_conn *store_reader(store *s)
{
    if (s->kind != DB_POSTGRES)
        return lite_reader(s);
    db_conn *c = pthread_getspecific(s->reader_key);
    if (c)
        return c;
    c = pg_pool_take(s, &s->reader_pool);
    if (c)
        pthread_setspecific(s->reader_key, c);
    return c;
}

void store_thread_done(store *s)
{
    reads_for_request = false;
    if (s->kind != DB_POSTGRES) {
        /* the connection stays with its thread: opening one costs more than a read */
        reader_slot *r = pthread_getspecific(s->reader_key);
        if (r)
            slot_put(s, r);
        return;
    }
    db_conn *c = pthread_getspecific(s->reader_key);
    if (!c)
        return;
    pthread_setspecific(s->reader_key, NULL);
    pg_pool_give(s, &s->reader_pool, c);
}

void store_release_reader(store *s)
{
    if (s->kind == DB_POSTGRES) {
        store_thread_done(s);
        return;
    }
    reader_slot *r = pthread_getspecific(s->reader_key);
    if (!r)
        return;
    pthread_setspecific(s->reader_key, NULL);
    pthread_mutex_lock(&s->lock); /* the writer sweeps the slots under it */
    for (int i = 0; i < s->reader_count; i++)
        if (s->readers[i] == r) {
            s->readers[i] = s->readers[--s->reader_count];
            break;
        }
    pthread_mutex_unlock(&s->lock);
    db_close(r->conn);
    free(r);
}
