#ifndef PAYD_TESTS_WRITER_GATE_H
#define PAYD_TESTS_WRITER_GATE_H
/* Holding the store's writer between two batches, so that the jobs a test queues meanwhile are
 * taken together: writer_gate_close queues a job whose continuation waits (on the writer's
 * thread) until writer_gate_open. */
#include <semaphore.h>

#include "store/store.h"

typedef struct writer_gate {
    sem_t reached, go;
} writer_gate;

static inline write_result writer_gate_nothing(db_conn *db, void *arg)
{
    (void)db;
    (void)arg;
    return WRITE_OK;
}

static inline void writer_gate_hold(write_result result, db_failure failure, const char *error,
                                    void *arg)
{
    (void)result;
    (void)failure;
    (void)error;
    writer_gate *g = arg;
    sem_post(&g->reached);
    sem_wait(&g->go);
}

/* Returns once the writer waits: what is queued from now on is taken in its next batch. */
static inline void writer_gate_close(store *s, writer_gate *g)
{
    sem_init(&g->reached, 0, 0);
    sem_init(&g->go, 0, 0);
    store_submit(s, writer_gate_nothing, NULL, writer_gate_hold, g);
    sem_wait(&g->reached);
}

static inline void writer_gate_open(writer_gate *g)
{
    sem_post(&g->go);
}

#endif
