/* The recorder: attempts are written by their own thread, so the worker never waits for a
 * commit and an endpoint's slot frees the moment its answer arrives. An attempt keeps its lease
 * until it is recorded, so no node can start the next one before. */
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"
#include "node/app.h"
#include "store/store.h"
#include "webhook/delivery.h"
#include "webhook/delivery_internal.h"
#include "webhook/recovery.h"

#define GIVE_UP_MS (3LL * 24 * 3600 * 1000) /* §15: an event's deliveries end 3 days after it */

/* §15: about 1 min, 5 min, 30 min, 2 h, 5 h, 10 h, then every 12 h */
static const int64_t retry_schedule_ms[] = {60000,    300000,   1800000, 7200000,
                                            18000000, 36000000, 43200000};

int64_t webhook_retry_delay_ms(int attempt_number)
{
    int n = (int)(sizeof retry_schedule_ms / sizeof retry_schedule_ms[0]);
    return retry_schedule_ms[attempt_number < 1   ? 0
                             : attempt_number > n ? n - 1
                                                  : attempt_number - 1];
}

static struct {
    app *a;
    double scale; /* --webhook-retry-scale */
    pthread_t thread;
    bool running, stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    attempt *queue; /* finished attempts to record, newest first */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static double unit_random(void)
{
    uint32_t r;
    RAND_bytes((uint8_t *)&r, sizeof r);
    return (double)r / 4294967296.0;
}

/* One write job for every attempt that finished. */
typedef struct finished {
    attempt **list;
    int count;
} finished;

static write_result record_attempts(db_conn *db, void *arg)
{
    finished *f = arg;
    int64_t now = now_us();
    webhook_streaks streaks = {.app = R.a, .now = now}; /* endpoints' failures: recovery.h */
    for (int i = 0; i < f->count; i++) {
        attempt *t = f->list[i];
        const char *outcome = "delivered";
        int64_t next = 0;
        if (!t->delivered) {
            int64_t delay_ms = (int64_t)((double)webhook_retry_delay_ms(t->attempt) * R.scale *
                                         (0.7 + 0.6 * unit_random()));
            next = now + delay_ms * 1000;
            bool expired = next > t->event_created_us + (int64_t)(GIVE_UP_MS * R.scale) * 1000;
            outcome = expired ? "failed" : "retrying";
            if (expired)
                next = 0;
        }
        t->outcome = outcome;
        db_status rc = db_exec(
            db,
            "INSERT INTO webhook_attempts (id, endpoint_id, event_id, attempt, response_status, "
            "latency_ms, error, next_attempt_at, outcome, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            "iiiiziszsi", (int64_t)t->record_id, (int64_t)t->endpoint_id, (int64_t)t->event_id,
            (int64_t)t->attempt, (int64_t)t->status, t->latency_ms, t->error, next, outcome,
            id_decode(t->record_id).unix_ms * 1000);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        /* only the holder of the lease moves the delivery on */
        rc = db_exec(db,
                     "UPDATE webhook_deliveries SET status = $4, attempts = $5, "
                     "next_attempt_at = $6, lease_until = 0 "
                     "WHERE endpoint_id = $1 AND event_id = $2 AND lease_id = $3",
                     "iiisii", (int64_t)t->endpoint_id, (int64_t)t->event_id, (int64_t)t->lease_id,
                     t->delivered ? "delivered"
                     : next       ? "pending"
                                  : "failed",
                     (int64_t)t->attempt, next ? next : now);
        if (rc == DB_DONE)
            rc = webhook_streak_add(db, &streaks, t->endpoint_id, t->delivered);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
    }
    return write_result_of_db(webhook_streaks_write(db, &streaks));
}

static void record_batch(attempt **list, int count)
{
    finished f = {.list = list, .count = count};
    /* an attempt the store could not record stays leased and is made again when it runs out */
    bool recorded = store_write(R.a->store, record_attempts, &f) == WRITE_OK;
    for (int i = 0; i < count; i++) {
        attempt *t = list[i];
        if (recorded)
            delivery_count_outcome(t->outcome);
        free(t);
    }
}

static void *recorder_main(void *arg)
{
    (void)arg;
    enum { BATCH = 1024 };
    attempt **list = malloc(BATCH * sizeof *list);
    pthread_mutex_lock(&R.lock);
    for (;;) {
        while (!R.queue && !R.stop)
            pthread_cond_wait(&R.wake, &R.lock);
        if (!R.queue && R.stop)
            break;
        attempt *taken = R.queue;
        R.queue = NULL;
        pthread_mutex_unlock(&R.lock);
        int count = 0;
        for (attempt *t = taken, *next; t; t = next) {
            next = t->next;
            list[count++] = t;
            if (count == BATCH || !next) {
                record_batch(list, count);
                count = 0;
            }
        }
        pthread_mutex_lock(&R.lock);
    }
    pthread_mutex_unlock(&R.lock);
    free(list);
    return NULL;
}

void delivery_recorder_queue(attempt *first, attempt *last)
{
    pthread_mutex_lock(&R.lock);
    last->next = R.queue;
    R.queue = first;
    pthread_cond_signal(&R.wake);
    pthread_mutex_unlock(&R.lock);
}

int delivery_recorder_start(app *a, double scale)
{
    R.a = a;
    R.scale = scale;
    R.stop = false;
    R.running = pthread_create(&R.thread, NULL, recorder_main, NULL) == 0;
    return R.running ? 0 : -1;
}

void delivery_recorder_stop(void)
{
    pthread_mutex_lock(&R.lock);
    R.stop = true;
    pthread_cond_signal(&R.wake);
    pthread_mutex_unlock(&R.lock);
    if (R.running)
        pthread_join(R.thread, NULL);
    R.running = false;
}
