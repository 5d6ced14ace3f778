/* The registry of parked long-poll requests and the one thread that wakes them (see
 * event_waiters.h). A short list under one lock: notes and parks are rare next to the reads
 * they save, and every pass over it is bounded by EVENT_WAITERS_MAX. */
#include "api/event_waiters.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "core/timefmt.h"
#include "node/app.h"

#define NOTE_WINDOW_NS    (1000 * 1000000LL) /* how long after a note its waiters look again */
#define NOTE_GAP_MIN_NS   (1 * 1000000LL)
#define NOTE_GAP_MAX_NS   (EVENT_WAIT_NOTE_GAP_MAX_MS * 1000000LL)
#define SHUTDOWN_CHECK_NS (250 * 1000000LL) /* how soon a stop is noticed */
#define NEVER             INT64_MAX
#define RECENT_NOTES      256 /* at most so many notes are looked through */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pthread_t thread;
    bool running, stop;
    app *a;
    bool poll_others;
    event_wait *head;
    int count;
    /* The latest notes, a ring: a request that read its page while a note for it was being
     * committed parks after the note, and must still look again. */
    struct recent_note {
        int64_t at_ns;
        uint64_t user;
        char type[48];
    } recent[RECENT_NOTES];
    unsigned next_note;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

static bool type_wanted(const char *types, const char *type)
{
    if (!types)
        return true;
    size_t len = strlen(type);
    for (const char *t = types; t;) {
        const char *comma = strchr(t, ',');
        size_t n = comma ? (size_t)(comma - t) : strlen(t);
        if (n == len && !memcmp(t, type, n))
            return true;
        t = comma ? comma + 1 : NULL;
    }
    return false;
}

static int64_t earliest(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* When the latest note for w within NOTE_WINDOW_NS came (0: none), newest first. */
static int64_t latest_note_for(const event_wait *w, int64_t now)
{
    for (unsigned i = 1; i <= RECENT_NOTES; i++) {
        const struct recent_note *note = &R.recent[(R.next_note - i) % RECENT_NOTES];
        if (!note->at_ns || note->at_ns < now - NOTE_WINDOW_NS)
            return 0;
        if (note->user == w->user && type_wanted(w->types, note->type))
            return note->at_ns;
    }
    return 0;
}

/* When w next reads its page, unless a note comes first. After a note for it, at gaps of half
 * the time since the note (1 ms to NOTE_GAP_MAX_NS), for NOTE_WINDOW_NS: the commit that shows
 * the event usually follows its note within milliseconds, sometimes later. */
static int64_t next_check(const event_wait *w, int64_t now)
{
    int64_t at = NEVER, noted = latest_note_for(w, now);
    if (noted) {
        int64_t gap = (now - noted) / 2;
        at = now + (gap < NOTE_GAP_MIN_NS ? NOTE_GAP_MIN_NS : earliest(gap, NOTE_GAP_MAX_NS));
    }
    if (R.poll_others)
        at = earliest(at, now + EVENT_WAIT_POLL_MS * 1000000LL);
    return at;
}

bool event_wait_over(const event_wait *w)
{
    return monotonic_ns() >= w->deadline_ns || atomic_load(&w->req->app->shutting_down);
}

bool event_wait_park(event_wait *w)
{
    pthread_mutex_lock(&R.lock);
    bool parked = R.running && !R.stop && R.count < EVENT_WAITERS_MAX;
    if (parked) {
        w->check_at_ns = next_check(w, monotonic_ns());
        w->next = R.head;
        R.head = w;
        R.count++;
        pthread_cond_signal(&R.changed);
    }
    pthread_mutex_unlock(&R.lock);
    return parked;
}

void event_waiters_note(uint64_t user, const char *type)
{
    pthread_mutex_lock(&R.lock);
    int64_t now = monotonic_ns();
    struct recent_note *kept = &R.recent[R.next_note++ % RECENT_NOTES];
    kept->at_ns = now;
    kept->user = user;
    snprintf(kept->type, sizeof kept->type, "%s", type);
    bool woke = false;
    for (event_wait *w = R.head; w; w = w->next)
        if (w->user == user && type_wanted(w->types, type)) {
            w->check_at_ns = now; /* a first look at once: the commit may be done */
            woke = true;
        }
    if (woke)
        pthread_cond_signal(&R.changed);
    pthread_mutex_unlock(&R.lock);
}

/* Takes out of the list every waiter due now (all of them when stopping); returns them, and
 * the time the next one is due into *wake_at. */
static event_wait *take_due(int64_t now, bool all, int64_t *wake_at)
{
    event_wait *due = NULL, **link = &R.head;
    *wake_at = now + SHUTDOWN_CHECK_NS;
    while (*link) {
        event_wait *w = *link;
        if (all || now >= w->deadline_ns || now >= w->check_at_ns) {
            *link = w->next;
            R.count--;
            w->next = due;
            due = w;
        } else {
            *wake_at = earliest(*wake_at, earliest(w->deadline_ns, w->check_at_ns));
            link = &w->next;
        }
    }
    return due;
}

static void *waker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&R.lock);
    for (;;) {
        bool stopping = R.stop || atomic_load(&R.a->shutting_down);
        int64_t wake_at;
        event_wait *due = take_due(monotonic_ns(), stopping, &wake_at);
        if (due) {
            /* each step hands its read to a worker at once (request_blocking_then) */
            pthread_mutex_unlock(&R.lock);
            while (due) {
                event_wait *w = due;
                due = w->next;
                request_wake(w->req, DB_FAILURE_NONE, w->step, w->ctx);
            }
            pthread_mutex_lock(&R.lock);
            continue;
        }
        if (R.stop)
            break;
        struct timespec until = {wake_at / 1000000000LL, wake_at % 1000000000LL};
        pthread_cond_timedwait(&R.changed, &R.lock, &until);
    }
    pthread_mutex_unlock(&R.lock);
    return NULL;
}

int event_waiters_start(app *a, bool poll_others)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* monotonic_ns's clock */
    pthread_cond_init(&R.changed, &attr);
    pthread_condattr_destroy(&attr);
    R.a = a;
    R.poll_others = poll_others;
    R.stop = false;
    if (pthread_create(&R.thread, NULL, waker_main, NULL) != 0)
        return -1;
    R.running = true;
    return 0;
}

void event_waiters_stop(void)
{
    if (!R.running)
        return;
    pthread_mutex_lock(&R.lock);
    R.stop = true;
    pthread_cond_signal(&R.changed);
    pthread_mutex_unlock(&R.lock);
    pthread_join(R.thread, NULL);
    R.running = false;
    pthread_cond_destroy(&R.changed);
}
