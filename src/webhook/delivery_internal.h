#ifndef PAYD_WEBHOOK_DELIVERY_INTERNAL_H
#define PAYD_WEBHOOK_DELIVERY_INTERNAL_H
/* Shared by the delivery worker (delivery.c), its recorder (delivery_recorder.c) and its
 * metrics (delivery_metrics.c); nothing outside webhook/ includes it. */
#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>

#include "webhook/attempt_guard.h"

struct app;

typedef struct attempt {
    struct attempt *prev, *next; /* the worker's list of attempts in flight */
    uint64_t endpoint_id, event_id, lease_id;
    int attempt; /* 1 for the first */
    int64_t event_created_us, started_ns;
    char *body;
    struct curl_slist *headers;
    CURL *easy;
    /* the result */
    long status;
    webhook_guard guard; /* its limits on the wire (attempt_guard.h) */
    const char *error;   /* a word of attempt_guard.h's vocabulary, or NULL */
    int64_t latency_ms;
    bool delivered;
    const char *outcome; /* delivered, retrying or failed (gave up), set when recorded */
    uint64_t record_id;  /* the attempt row's id */
} attempt;

/* The recorder's thread: takes finished attempts (a list linked by next, first to last) and
 * writes them, many to a write job, then frees them. */
int delivery_recorder_start(struct app *a, double retry_scale);
void delivery_recorder_queue(attempt *first, attempt *last);
void delivery_recorder_stop(void); /* after it wrote what was queued */

/* The metrics (webhook_metrics_render): events written, attempts by outcome ("delivered",
 * "retrying", "failed"), an attempt's latency and an event's lag to its delivery. */
void delivery_count_events(int events);
void delivery_count_outcome(const char *outcome);
void delivery_observe_attempt(int64_t us);
void delivery_observe_lag(int64_t us);

#endif
