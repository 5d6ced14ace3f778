/* The webhook delivery worker: claims due deliveries, holds them to their endpoints' caps and
 * makes the attempts; the recorder writes them (delivery_recorder.c). See delivery.h for the
 * guarantees. */
#include "webhook/delivery.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/livemode.h"
#include "core/timefmt.h"
#include "node/app.h"
#include "store/store.h"
#include "webhook/attempt_guard.h"
#include "webhook/delivery_internal.h"
#include "webhook/outbox.h"
#include "webhook/recovery.h"
#include "webhook/secret.h"
#include "webhook/signature.h"

#define REQUEST_TIMEOUT_MS 10000 /* §15: a 2xx within 10 s delivers */
#define CLAIM_BATCH        256
#define IDLE_POLL_MS       100  /* other nodes' events, and retries falling due */
#define BUSY_RETRY_MS      1000 /* a delivery put back because its endpoint is at its cap */
#define WAKE_CLAIM_MS      10   /* the shortest gap between two claims woken by new events */
#define MAX_HANDED_BACK    32   /* endpoints remembered as full at the last claim */

/* ---- the worker ---- */

/* What this node has for one endpoint: in flight (at most its cap) and claimed but waiting (at
 * most three caps; more is handed back at once), so a stuck endpoint holds a bounded share of
 * this node's slots and the others keep theirs. */
typedef struct endpoint_load {
    uint64_t id;
    int in_flight, held;
} endpoint_load;

static struct {
    app *a;
    pthread_t thread;
    bool running;
    atomic_bool stop;
    CURLM *multi;
    double scale;
    int in_flight;
    attempt *active;   /* in flight, so a stop can free them */
    struct held *held; /* claimed, waiting for a free slot of their endpoint */
    int held_count;
    atomic_bool wake; /* a job recorded events: claim now */
    bool more_due;    /* the last claim was full: more are probably due */
    int64_t last_claim_ns;
    uint64_t full[MAX_HANDED_BACK]; /* endpoints the last claim handed deliveries back for */
    int full_count;
    endpoint_load *loads; /* small: endpoints with something in flight */
    int load_count, load_cap;
} W;

void webhook_events_recorded(int events, int64_t deliveries)
{
    delivery_count_events(events);
    if (deliveries > 0 && !atomic_exchange(&W.wake, true) && W.multi)
        curl_multi_wakeup(W.multi); /* once per claim, however many jobs wrote events */
}

static endpoint_load *load_of(uint64_t endpoint)
{
    for (int i = 0; i < W.load_count; i++)
        if (W.loads[i].id == endpoint)
            return &W.loads[i];
    if (W.load_count == W.load_cap) {
        W.load_cap = W.load_cap ? W.load_cap * 2 : 64;
        W.loads = realloc(W.loads, (size_t)W.load_cap * sizeof *W.loads);
    }
    W.loads[W.load_count] = (endpoint_load){.id = endpoint};
    return &W.loads[W.load_count++];
}

/* Forgets endpoints with nothing in flight and nothing waiting. */
static void prune_loads(void)
{
    for (int i = 0; i < W.load_count;)
        if (W.loads[i].in_flight == 0 && W.loads[i].held == 0)
            W.loads[i] = W.loads[--W.load_count];
        else
            i++;
}

/* ---- claim: one write job ---- */

typedef struct claimed {
    uint64_t endpoint_id, event_id;
    int attempts;
    char *url, *secret, *type, *data;
    int64_t event_created;
    bool live;             /* the event owner's mode (docs/modes.md) */
    char *previous_secret; /* a rotation's previous secret, signing too until previous_until */
    int64_t previous_until;
} claimed;

/* A claimed delivery not started yet because its endpoint is at its cap. It waits here while
 * its lease leaves time for a whole attempt, and is handed back after that. */
typedef struct held {
    claimed c;
    uint64_t lease_id;
    int64_t lease_until;
} held;

typedef struct claim_job {
    int64_t now_us, lease_until;
    uint64_t lease_id;
    int limit;
    claimed rows[CLAIM_BATCH];
    int count;
} claim_job;

static void free_claim_strings(claimed *c)
{
    free(c->url);
    free(c->secret);
    free(c->previous_secret);
    free(c->type);
    free(c->data);
}

static void free_claimed(claim_job *j)
{
    for (int i = 0; i < j->count; i++)
        free_claim_strings(&j->rows[i]);
    j->count = 0;
}

static char *dup_text(const char *s)
{
    return s ? strdup(s) : NULL;
}

static write_result claim_due(db_conn *db, void *arg)
{
    claim_job *j = arg;
    free_claimed(j); /* a job run again (PostgreSQL retry) starts over */
    /* a lease is taken only where none is held: the row's lease ran out or was never taken */
    static const char *const pg_sql =
        "UPDATE webhook_deliveries d SET lease_until = $1, lease_id = $2 FROM ("
        "  SELECT endpoint_id, event_id FROM webhook_deliveries WHERE status = 'pending' AND "
        "  next_attempt_at <= $3 AND lease_until <= $3 ORDER BY next_attempt_at LIMIT $4 "
        "  FOR UPDATE SKIP LOCKED) due "
        "WHERE d.endpoint_id = due.endpoint_id AND d.event_id = due.event_id "
        "RETURNING d.endpoint_id, d.event_id, d.attempts";
    static const char *const sqlite_sql =
        "UPDATE webhook_deliveries SET lease_until = $1, lease_id = $2 "
        "WHERE (endpoint_id, event_id) IN ("
        "  SELECT endpoint_id, event_id FROM webhook_deliveries WHERE status = 'pending' AND "
        "  next_attempt_at <= $3 AND lease_until <= $3 ORDER BY next_attempt_at LIMIT $4) "
        "RETURNING endpoint_id, event_id, attempts";
    db_stmt *st = db_query(db, db_kind_of(db) == DB_POSTGRES ? pg_sql : sqlite_sql, "iiii",
                           j->lease_until, (int64_t)j->lease_id, j->now_us, (int64_t)j->limit);
    if (!st)
        return WRITE_FAILED;
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW && j->count < CLAIM_BATCH)
        j->rows[j->count++] = (claimed){.endpoint_id = (uint64_t)db_int(st, 0),
                                        .event_id = (uint64_t)db_int(st, 1),
                                        .attempts = (int)db_int(st, 2)};
    db_done(st);
    if (rc == DB_BUSY || rc == DB_ERROR)
        return write_result_of_db(rc);
    for (int i = 0; i < j->count; i++) {
        claimed *c = &j->rows[i];
        /* a disabled endpoint's deliveries wait (leased, then claimed again) until it is
         * enabled or deleted */
        st = db_query(db,
                      "SELECT url, secret, previous_secret, previous_secret_expires_at "
                      "FROM webhook_endpoints WHERE id = $1 AND disabled = 0",
                      "i", (int64_t)c->endpoint_id);
        if (db_step(st) == DB_ROW) {
            c->url = dup_text(db_text(st, 0));
            c->secret = dup_text(db_text(st, 1));
            c->previous_secret = dup_text(db_text(st, 2));
            c->previous_until = db_is_null(st, 3) ? 0 : db_int(st, 3);
        }
        db_done(st);
        st = db_query(db,
                      "SELECT e.type, e.data, e.created_at, u.mode FROM events e "
                      "LEFT JOIN users u ON u.id = e.user_id WHERE e.id = $1",
                      "i", (int64_t)c->event_id);
        if (db_step(st) == DB_ROW) {
            c->type = dup_text(db_text(st, 0));
            c->data = dup_text(db_text(st, 1));
            c->event_created = db_int(st, 2);
            c->live = !db_text(st, 3) || strcmp(db_text(st, 3), "test") != 0;
        }
        db_done(st);
    }
    return WRITE_OK;
}

typedef struct release_job {
    uint64_t endpoint_id[CLAIM_BATCH], event_id[CLAIM_BATCH], lease_id[CLAIM_BATCH];
    int count;
    int64_t until;
} release_job;

/* Hands back claims this node will not start now (their endpoint is at its cap). */
static write_result release_claims(db_conn *db, void *arg)
{
    release_job *r = arg;
    for (int i = 0; i < r->count; i++) {
        db_status rc = db_exec(db,
                               "UPDATE webhook_deliveries SET lease_until = 0, "
                               "next_attempt_at = $4 WHERE endpoint_id = $1 AND event_id = $2 "
                               "AND lease_id = $3",
                               "iiii", (int64_t)r->endpoint_id[i], (int64_t)r->event_id[i],
                               (int64_t)r->lease_id[i], r->until);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
    }
    return WRITE_OK;
}

/* ---- HTTP ---- */

static void start_attempt(const claimed *c, uint64_t lease_id)
{
    attempt *t = calloc(1, sizeof *t);
    t->endpoint_id = c->endpoint_id;
    t->event_id = c->event_id;
    t->lease_id = lease_id;
    t->attempt = c->attempts + 1;
    t->event_created_us = c->event_created;
    jsonw w;
    jw_init(&w);
    event_document_write(&w, c->event_id, c->type, c->data, c->event_created);
    size_t body_len;
    t->body = jw_take(&w, &body_len);
    size_t marked_len; /* every object in it is of the event owner's mode */
    char *marked = json_mark_livemode(t->body, body_len, c->live, &marked_len);
    if (marked) {
        free(t->body);
        t->body = marked;
        body_len = marked_len;
    }
    int64_t now = now_us(); /* a rotation's previous secret signs too until it expires */
    t->headers =
        webhook_delivery_headers(c->secret, c->previous_until > now ? c->previous_secret : NULL,
                                 c->event_id, now / 1000000, t->body, body_len);

    CURL *e = t->easy = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, c->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)REQUEST_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* never follow a redirect */
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    webhook_guard_attach(e, &t->guard, W.a->cfg.webhook_deny_private);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    t->started_ns = monotonic_ns();
    t->next = W.active;
    if (W.active)
        W.active->prev = t;
    W.active = t;
    curl_multi_add_handle(W.multi, e);
    load_of(c->endpoint_id)->in_flight++;
    W.in_flight++;
}

/* Ends the HTTP side of an attempt; the attempt itself lives on until it is recorded. */
static void end_transfer(attempt *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        W.active = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    curl_multi_remove_handle(W.multi, t->easy);
    curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->body);
    t->easy = NULL;
    t->headers = NULL;
    t->body = NULL;
}

/* Takes every finished transfer off the multi handle and queues it for the recorder. */
static void collect_finished(void)
{
    attempt *done = NULL, *last = NULL;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(W.multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        attempt *t;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        uint64_t record_id;
        if (!app_try_next_id(W.a, &record_id)) {
            /* the node id's lease lapsed, so no row can be written: abandoned as at a stop, its
             * lease runs out and the attempt is made again */
            end_transfer(t);
            load_of(t->endpoint_id)->in_flight--;
            W.in_flight--;
            free(t);
            continue;
        }
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &t->status);
        t->latency_ms = (monotonic_ns() - t->started_ns) / 1000000;
        t->delivered = webhook_attempt_delivered(&t->guard, msg->data.result, t->status);
        t->error = webhook_attempt_error(&t->guard, msg->data.result, t->status);
        webhook_attempt_log(&t->guard, t->endpoint_id, t->event_id, t->error);
        delivery_observe_attempt(t->latency_ms * 1000);
        if (t->delivered)
            delivery_observe_lag(now_us() - t->event_created_us);
        t->record_id = record_id;
        end_transfer(t);
        load_of(t->endpoint_id)->in_flight--;
        W.in_flight--;
        t->next = done;
        done = t;
        if (!last)
            last = t;
    }
    if (done)
        delivery_recorder_queue(done, last);
}

/* Starts what the endpoints' caps allow, oldest claim first; hands back what waited too long
 * to finish an attempt inside its lease. */
static void start_held(void)
{
    static release_job r;
    r.count = 0;
    r.until = now_us() + BUSY_RETRY_MS * 1000;
    int64_t latest_start =
        now_us() + (REQUEST_TIMEOUT_MS + 500) * 1000LL; /* --webhook-lease >= 11 s */
    int kept = 0;
    for (int i = 0; i < W.held_count; i++) {
        held *h = &W.held[i];
        endpoint_load *load = load_of(h->c.endpoint_id);
        if (h->lease_until > latest_start &&
            load->in_flight < W.a->cfg.webhook_endpoint_concurrency) {
            load->held--;
            start_attempt(&h->c, h->lease_id);
            free_claim_strings(&h->c);
        } else if (h->lease_until <= latest_start && r.count < CLAIM_BATCH) {
            load->held--;
            r.endpoint_id[r.count] = h->c.endpoint_id;
            r.event_id[r.count] = h->c.event_id;
            r.lease_id[r.count++] = h->lease_id;
            free_claim_strings(&h->c);
        } else {
            W.held[kept++] = *h;
        }
    }
    W.held_count = kept;
    prune_loads();
    if (r.count)
        store_write(W.a->store, release_claims, &r);
}

/* Has an endpoint the last claim found full (it handed deliveries back) made room since? Its
 * backlog is likely still due. */
static bool full_endpoint_has_room(void)
{
    int cap = (int)W.a->cfg.webhook_endpoint_concurrency;
    for (int i = 0; i < W.full_count; i++) {
        bool found = false;
        for (int k = 0; k < W.load_count && !found; k++)
            if (W.loads[k].id == W.full[i]) {
                found = true;
                if (W.loads[k].held < cap)
                    return true;
            }
        if (!found)
            return true;
    }
    return false;
}

/* Claims due deliveries when there is room and a reason to look: an event was just recorded,
 * the last claim was full, an endpoint found full made room, or IDLE_POLL_MS passed (retries
 * falling due, other nodes' events). */
static void claim(void)
{
    static claim_job j;
    static release_job r;
    int free_slots = (int)W.a->cfg.webhook_max_in_flight - W.in_flight - W.held_count;
    int64_t now_ns = monotonic_ns();
    if (free_slots <= 0)
        return;
    int64_t since_ns = now_ns - W.last_claim_ns;
    /* a wake-up claims at most every WAKE_CLAIM_MS: under load one claim takes many events */
    bool wake = since_ns >= WAKE_CLAIM_MS * 1000000LL && atomic_exchange(&W.wake, false);
    if (!wake && !W.more_due && !full_endpoint_has_room() && since_ns < IDLE_POLL_MS * 1000000LL)
        return;
    if (!app_try_next_id(W.a, &j.lease_id))
        return; /* the node id's lease lapsed: nothing is claimed until it is renewed */
    W.last_claim_ns = now_ns;
    j.now_us = now_us();
    j.lease_until = j.now_us + W.a->cfg.webhook_lease_ms * 1000;
    int cap = (int)W.a->cfg.webhook_endpoint_concurrency;
    j.limit = free_slots < CLAIM_BATCH ? free_slots : CLAIM_BATCH;
    if (store_write(W.a->store, claim_due, &j) != WRITE_OK) {
        free_claimed(&j);
        W.more_due = false;
        return;
    }
    W.full_count = 0;
    r.count = 0;
    r.until = j.now_us + BUSY_RETRY_MS * 1000;
    for (int i = 0; i < j.count; i++) {
        claimed *c = &j.rows[i];
        if (c->secret) /* opened here, off the writer the claim ran on */
            c->secret = webhook_secret_opened(W.a->cursor_key, c->endpoint_id, c->secret);
        if (c->previous_secret) /* sealed the same way: it was this endpoint's secret */
            c->previous_secret =
                webhook_secret_opened(W.a->cursor_key, c->endpoint_id, c->previous_secret);
        if (!c->url || !c->type || !c->secret) { /* gone, or a secret that does not open */
            free_claim_strings(c);
            continue;
        }
        endpoint_load *load = load_of(c->endpoint_id);
        if (load->held >= 3 * cap) {
            /* its endpoint has its fill: handed back at once, due again a little later */
            bool known = false;
            for (int k = 0; k < W.full_count && !known; k++)
                known = W.full[k] == c->endpoint_id;
            if (!known && W.full_count < MAX_HANDED_BACK)
                W.full[W.full_count++] = c->endpoint_id;
            r.endpoint_id[r.count] = c->endpoint_id;
            r.event_id[r.count] = c->event_id;
            r.lease_id[r.count++] = j.lease_id;
            free_claim_strings(c);
            continue;
        }
        load->held++;
        W.held[W.held_count++] =
            (held){.c = *c, .lease_id = j.lease_id, .lease_until = j.lease_until};
    }
    /* a full claim may have left more due, unless it was full of what had to be handed back */
    W.more_due = j.count == j.limit && r.count == 0;
    j.count = 0; /* the strings moved to W.held or were freed */
    prune_loads();
    if (r.count)
        store_write(W.a->store, release_claims, &r);
}

static void *worker_main(void *arg)
{
    (void)arg;
    while (!atomic_load(&W.stop)) {
        int running;
        curl_multi_perform(W.multi, &running);
        collect_finished();
        claim();
        start_held();
        curl_multi_perform(W.multi, &running);
        /* woken early by curl_multi_wakeup when a job wrote events */
        curl_multi_poll(W.multi, NULL, 0, atomic_load(&W.wake) ? WAKE_CLAIM_MS : IDLE_POLL_MS,
                        NULL);
    }
    return NULL;
}

int webhook_worker_start(app *a)
{
    W.a = a;
    W.scale = strtod(a->cfg.webhook_retry_scale, NULL);
    W.multi = curl_multi_init();
    if (!W.multi)
        return -1;
    curl_multi_setopt(W.multi, CURLMOPT_MAXCONNECTS, (long)a->cfg.webhook_max_in_flight);
    W.held = calloc((size_t)a->cfg.webhook_max_in_flight, sizeof *W.held);
    /* SQLite has one node: a lease still held now was held by this node before it stopped */
    if (store_kind(a->store) == DB_SQLITE)
        store_write(a->store, webhook_release_own_leases, NULL);
    atomic_store(&W.stop, false);
    if (delivery_recorder_start(a, W.scale) != 0)
        return -1;
    W.running = pthread_create(&W.thread, NULL, worker_main, NULL) == 0;
    return W.running ? 0 : -1;
}

void webhook_worker_stop(void)
{
    if (!W.running)
        return;
    atomic_store(&W.stop, true);
    curl_multi_wakeup(W.multi);
    pthread_join(W.thread, NULL);
    W.running = false;
    /* what is still in flight is abandoned: its lease runs out and the attempt is made again */
    while (W.active) {
        attempt *t = W.active;
        end_transfer(t);
        free(t);
    }
    delivery_recorder_stop();              /* the recorder writes what finished, then ends */
    for (int i = 0; i < W.held_count; i++) /* their leases run out; the attempts are made again */
        free_claim_strings(&W.held[i].c);
    free(W.held);
    W.held = NULL;
    W.held_count = 0;
    curl_multi_cleanup(W.multi);
    W.multi = NULL;
    free(W.loads);
    W.loads = NULL;
    W.load_count = W.load_cap = W.in_flight = 0;
}
