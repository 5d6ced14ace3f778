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

#include "store/db.h"

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

/* After an attempt on `endpoint`, in the job that records it: a 2xx ends the endpoint's streak
 * of failures; a failure starts one, or, once the streak is --webhook-disable-after old, disables
 * the endpoint and writes its webhook_endpoint.disabled event in this same transaction. */
db_status webhook_streak_note(db_conn *db, struct app *a, uint64_t endpoint, bool delivered,
                              int64_t now);

#endif
