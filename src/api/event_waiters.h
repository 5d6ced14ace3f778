#ifndef PAYD_API_EVENT_WAITERS_H
#define PAYD_API_EVENT_WAITERS_H
/* Long-poll on GET /v1/events?wait=N (docs/webhooks.md, "Following events"): a request whose
 * page is empty parks here, holding no thread, until an event it may see is written or its wait
 * ends; then its step runs again (request_wake) and reads the page once more.
 *
 * Who wakes a waiter: event_record notes every event it writes (user and type), and a note
 * wakes the parked waiters it matches at once. The note comes inside the write job, before the
 * commit, so a read may not show the event yet: for a second after a note, a waiter it matches
 * (one parked then, or one that parks later, having read during the commit) reads again at gaps
 * of half the time since the note, from 1 ms up to EVENT_WAIT_NOTE_GAP_MAX_MS. On PostgreSQL
 * another node's events send no note here: every waiter also reads again every
 * EVENT_WAIT_POLL_MS. At most EVENT_WAITERS_MAX requests wait at once on a node. */
#include <stdbool.h>
#include <stdint.h>

#include "request/step.h"

struct app;

#define EVENT_WAIT_MAX_S           30
#define EVENT_WAITERS_MAX          1000
#define EVENT_WAIT_NOTE_GAP_MAX_MS 100
#define EVENT_WAIT_POLL_MS         500

typedef struct event_wait {
    /* set by the caller before it parks */
    request *req;
    uint64_t user;
    const char *types;   /* "a,b": a note of one of them wakes it; NULL: any type */
    int64_t deadline_ns; /* monotonic */
    request_step step;   /* run (through request_wake) when it wakes */
    void *ctx;
    /* the registry's */
    int64_t check_at_ns;
    struct event_wait *next;
} event_wait;

/* Starts the thread that wakes waiters; poll_others: recheck every EVENT_WAIT_POLL_MS (events
 * that no request of this node notes: another node's, the webhook worker's). */
int event_waiters_start(struct app *a, bool poll_others);
/* Wakes every waiter (the node is shutting down), then ends the thread. */
void event_waiters_stop(void);
/* Parks w until a note, a recheck or its deadline. False when it cannot: the registry is full or
 * not running (the caller answers at once). Once it returns true, w's request belongs to the
 * registry: the caller returns STEP_WAITING and touches it no more. */
bool event_wait_park(event_wait *w);
/* An event of `type` for `user` is being written. */
void event_waiters_note(uint64_t user, const char *type);
/* Whether the wait should end now: its deadline has come, or the node is stopping. */
bool event_wait_over(const event_wait *w);

#endif
