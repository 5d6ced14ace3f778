#ifndef PAYD_WEBHOOK_RECOVERY_H
#define PAYD_WEBHOOK_RECOVERY_H
/* Sending again what was sent, or failed (docs/webhooks.md, "Redelivery and recovery"), and
 * the streak of failures that disables an endpoint (--webhook-disable-after). Each runs in the
 * caller's write job. A delivery queued again becomes pending and due now with its lease taken
 * away (lease_until 0, lease_id 0): a worker still holding the old lease records its attempt,
 * but its UPDATE names a lease_id the row no longer has, so it cannot overwrite the new pending
 * state with its old result. */
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

struct app;

/* Queues `event` again for `endpoint`, if that endpoint exists and is enabled: the delivery row
 * (made when the endpoint never had it) becomes pending, due at now. *queued says whether it
 * was. */
db_status webhook_redeliver(db_conn *db, uint64_t endpoint, uint64_t event, int64_t now,
                            bool *queued);

/* The endpoint's deliveries that ended failed at or after `since` become pending, due at now
 * (*queued: how many); those still retrying are brought forward to now (*brought_forward). */
db_status webhook_recover(db_conn *db, uint64_t endpoint, int64_t since, int64_t now,
                          int64_t *queued, int64_t *brought_forward);

/* The streaks of failures (--webhook-disable-after) that one job of recorded attempts moves:
 * each endpoint's outcomes are gathered, and its row is written once per job, not per attempt.
 * A 2xx ends an endpoint's streak; a failure starts one, or, once the streak is
 * --webhook-disable-after old, disables the endpoint and writes its webhook_endpoint.disabled
 * event in this same transaction. */
#define WEBHOOK_STREAKS_MAX 256
typedef struct webhook_streaks {
    struct app *app;
    int64_t now; /* when the job records its attempts */
    int count;
    struct {
        uint64_t endpoint;
        bool delivered;   /* some attempt of this job got a 2xx */
        bool failed_last; /* the newest attempt of this job failed */
    } of[WEBHOOK_STREAKS_MAX];
} webhook_streaks;

/* Notes one attempt's outcome, newest first (the order the recorder keeps them in); writes what
 * it holds when it is full. */
db_status webhook_streak_add(db_conn *db, webhook_streaks *s, uint64_t endpoint, bool delivered);
/* Writes every endpoint's streak noted so far, then forgets them. (A job with more endpoints
 * than WEBHOOK_STREAKS_MAX writes in parts, newest first, so an older part may end a streak a
 * newer one began: a streak then starts at its next failure, never disabling sooner.) */
db_status webhook_streaks_write(db_conn *db, webhook_streaks *s);

/* At the start of a SQLite server (one node): the leases still held were held by this node
 * before it stopped, so they are dropped and those attempts made again. A write job. */
write_result webhook_release_own_leases(db_conn *db, void *arg);

#endif
