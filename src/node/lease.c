#include "node/lease.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/timefmt.h"

#define NODE_IDS      1024
#define AUTO_NODE_IDS 1022 /* auto never takes 1022, which `payd dev seed` stamps its rows with */

struct node_lease {
    store *store;
    id_generator *gen;
    _Atomic int node_id; /* -1 until leased (the database was away at start) */
    int requested;
    bool renews;     /* a serve: renews its lease, and its mark MARK_AHEAD_MS at a time */
    char holder[96]; /* "serve:" or "command:", then host, pid and a random tag */
    /* SQLite serve: it holds the file's serve lock, so no other serve lives, and a lease row of
     * a serve is a crashed one's (kill -9 leaves it until it expires): free to take */
    bool sole_serve;
    pthread_t thread;
    bool renewing;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    /* what every live lease's holder can do (check_fleet): read answers stored by event
     * reference; derive a key's processor key by its stored scheme */
    atomic_bool fleet_reads_event_answers;
    atomic_bool fleet_knows_processor_key_schemes;
};

typedef struct lease_job {
    node_lease *l;
    int requested;
    int64_t now;
    char other_holder[96]; /* an explicit id's live holder */
    int64_t other_until;
    int64_t mark;     /* the id's high-water mark as found (ms; 0: none) */
    int64_t reserved; /* the mark stored now: the latest ms this process may stamp an id with */
    bool behind;      /* the clock is further behind the mark than the generator absorbs */
} lease_job;

/* How far ahead of its clock a serve reserves its node id's mark at each renewal (every
 * LEASE_RENEW_MS): ids stamped later wait for the next renewal, and a restart after a crash
 * finds the mark at most this far ahead, which the generator absorbs (its max_drift_ms) without
 * waiting. A command, which does not renew, reserves its whole lease. */
#define MARK_AHEAD_MS 5000

static int64_t mark_ahead_ms(const node_lease *l)
{
    return l->renews ? MARK_AHEAD_MS : LEASE_TTL_MS;
}

static db_status read_mark(db_conn *db, int id, int64_t *mark)
{
    db_stmt *st =
        db_query(db, "SELECT last_ms FROM node_id_marks WHERE node_id = $1", "i", (int64_t)id);
    db_status rc = db_step(st);
    *mark = rc == DB_ROW ? db_int(st, 0) : 0;
    db_done(st);
    return rc == DB_ROW ? DB_DONE : rc;
}

/* Moves the mark forward to until_ms (never back): written before any id stamped up to it. */
static db_status reserve_mark(db_conn *db, int id, int64_t until_ms)
{
    return db_exec(db,
                   "INSERT INTO node_id_marks (node_id, last_ms) VALUES ($1, $2) "
                   "ON CONFLICT (node_id) DO UPDATE SET last_ms = excluded.last_ms "
                   "WHERE node_id_marks.last_ms < excluded.last_ms",
                   "ii", (int64_t)id, until_ms);
}

/* After the id is taken: its mark. A clock behind it by more than the generator absorbs keeps
 * the mark as it is (the caller gives the id back and waits, or refuses to start); otherwise
 * the mark is reserved ahead of the clock. */
static db_status check_and_reserve_mark(db_conn *db, lease_job *j, int id)
{
    db_status rc = read_mark(db, id, &j->mark);
    if (rc != DB_DONE)
        return rc;
    int64_t now_ms = j->now / 1000;
    j->behind = j->mark > now_ms + j->l->gen->max_drift_ms;
    if (j->behind)
        return DB_DONE;
    int64_t ahead = now_ms + mark_ahead_ms(j->l);
    j->reserved = j->mark > ahead ? j->mark : ahead;
    return reserve_mark(db, id, j->reserved);
}

/* What the nodes of older releases that still hold a live lease cannot do. Such a node would
 * replay an answer stored as an event reference (idem.c) with an empty body, and would resume
 * a key claimed under the time-ordered processor key scheme with the key of the scheme before
 * it; until its lease is gone this node keeps the bodies and claims under the old scheme. Every
 * lease this release writes says it can do both (LEASE_CAPABILITIES). */
#define LEASE_CAPABILITIES "answers_by_event = 1, processor_key_schemes = 1"

static db_status check_fleet(db_conn *db, node_lease *l, int64_t now)
{
    db_stmt *st = db_query(db,
                           "SELECT COALESCE(MIN(answers_by_event), 1), "
                           "COALESCE(MIN(processor_key_schemes), 1) FROM node_leases "
                           "WHERE expires_at >= $1",
                           "i", now);
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        atomic_store(&l->fleet_reads_event_answers, db_int(st, 0) != 0);
        atomic_store(&l->fleet_knows_processor_key_schemes, db_int(st, 1) != 0);
    }
    db_done(st);
    return rc == DB_ROW ? DB_DONE : rc;
}

/* Takes the id when it is free (*taken), and reads what the fleet can do. */
static db_status take_id(db_conn *db, lease_job *j, int id, bool *taken)
{
    node_lease *l = j->l;
    *taken = false;
    db_status rc = db_exec(db,
                           "INSERT INTO node_leases (node_id, holder, acquired_at, expires_at, "
                           "answers_by_event, processor_key_schemes) VALUES ($1, $2, $3, $4, 1, 1) "
                           "ON CONFLICT (node_id) DO NOTHING",
                           "isii", (int64_t)id, l->holder, j->now, j->now + LEASE_TTL_MS * 1000);
    if (rc != DB_DONE)
        return rc;
    if (db_changes(db) != 1) {
        rc = db_exec(db,
                     "UPDATE node_leases SET " LEASE_CAPABILITIES ", holder = $2, "
                     "acquired_at = $3, expires_at = $4 "
                     "WHERE node_id = $1 AND (expires_at < $3 OR holder = $2 OR "
                     "($5 = 1 AND holder LIKE 'serve:%'))",
                     "isiii", (int64_t)id, l->holder, j->now, j->now + LEASE_TTL_MS * 1000,
                     (int64_t)l->sole_serve);
        if (rc != DB_DONE)
            return rc;
        if (db_changes(db) != 1)
            return DB_DONE;
    }
    rc = check_fleet(db, l, j->now);
    *taken = rc == DB_DONE;
    return rc;
}

static write_result acquire_job(db_conn *db, void *arg)
{
    lease_job *j = arg;
    if (j->requested != NODE_AUTO) {
        bool taken;
        db_status rc = take_id(db, j, j->requested, &taken);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        if (taken) {
            j->l->node_id = j->requested;
            return write_result_of_db(check_and_reserve_mark(db, j, j->requested));
        }
        db_stmt *st = db_query(db, "SELECT holder, expires_at FROM node_leases WHERE node_id = $1",
                               "i", (int64_t)j->requested);
        if (db_step(st) == DB_ROW) {
            snprintf(j->other_holder, sizeof j->other_holder, "%s", db_text(st, 0));
            j->other_until = db_int(st, 1);
        }
        db_done(st);
        return WRITE_OK;
    }
    /* auto: the lowest id that is free or whose lease ran out */
    static char busy[NODE_IDS];
    memset(busy, 0, sizeof busy);
    db_stmt *st = db_query(db,
                           "SELECT node_id FROM node_leases WHERE expires_at >= $1 "
                           "AND NOT ($2 = 1 AND holder LIKE 'serve:%')",
                           "ii", j->now, (int64_t)j->l->sole_serve);
    while (db_step(st) == DB_ROW) {
        int64_t id = db_int(st, 0);
        if (id >= 0 && id < NODE_IDS)
            busy[id] = 1;
    }
    db_done(st);
    for (int id = 0; id < AUTO_NODE_IDS; id++) {
        if (busy[id])
            continue;
        bool taken;
        db_status rc = take_id(db, j, id, &taken);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        if (taken) {
            j->l->node_id = id;
            return write_result_of_db(check_and_reserve_mark(db, j, id));
        }
    }
    return WRITE_OK;
}

/* The id is ours from j->now (µs): the generator uses it, and issues ids only while the lease
 * surely holds (until its end less the margin), stamped after the mark found and no later than
 * the one reserved. */
static void lease_taken(node_lease *l, const lease_job *j)
{
    id_generator_set_node(l->gen, l->node_id);
    id_generator_floor(l->gen, j->mark);
    id_generator_set_mark(l->gen, j->reserved);
    id_generator_set_lease_until(l->gen, j->now / 1000 + LEASE_TTL_MS - LEASE_MARGIN_MS);
}

typedef struct release_ctx {
    node_lease *l;
    bool exact_mark; /* the generator issues no more: its newest id's ms becomes the mark */
    int64_t last_ms;
} release_ctx;

static write_result release_job(db_conn *db, void *arg)
{
    release_ctx *r = arg;
    db_status rc = db_exec(db, "DELETE FROM node_leases WHERE node_id = $1 AND holder = $2", "is",
                           (int64_t)r->l->node_id, r->l->holder);
    if (rc != DB_DONE || !r->exact_mark || db_changes(db) != 1)
        return write_result_of_db(
            rc); /* the id was another's by now: its mark is the new holder's to move */
    /* the reservation ahead of the clock was not all used: a restart need not wait for it.
     * Nothing issued and no mark found: none is kept. */
    if (r->last_ms == INT64_MIN)
        return write_result_of_db(db_exec(db, "DELETE FROM node_id_marks WHERE node_id = $1", "i",
                                          (int64_t)r->l->node_id));
    return write_result_of_db(db_exec(db,
                                      "UPDATE node_id_marks SET last_ms = $2 WHERE node_id = $1",
                                      "ii", (int64_t)r->l->node_id, r->last_ms));
}

/* The clock is behind the id's mark by more than the generator absorbs (it was set back, or
 * this host's clock is behind the one that issued last): the id is given back. One JSON line
 * says so; the answer is how long until the clock passes the mark (ms). */
static int64_t clock_behind_mark(node_lease *l, const lease_job *j, const char *level,
                                 const char *msg)
{
    release_ctx r = {.l = l}; /* the mark stays as found */
    store_run_upkeep(l->store, release_job, &r);
    int64_t behind_ms = j->mark - j->now / 1000;
    char mark[RFC3339_STR_MAX];
    format_rfc3339_ms(j->mark * 1000, mark);
    jsonw line;
    log_begin(&line, level, msg);
    jw_key(&line, "node_id");
    jw_int(&line, l->node_id);
    jw_key(&line, "behind_ms");
    jw_int(&line, behind_ms);
    jw_key(&line, "last_issued_at");
    jw_string(&line, mark);
    log_end(&line);
    l->node_id = -1;
    return behind_ms + 1;
}

static write_result take_lease(node_lease *l, lease_job *j)
{
    write_result w = WRITE_RETRY;
    for (int attempt = 0; attempt < 5 && w == WRITE_RETRY; attempt++) {
        j->now = now_us();
        w = store_run_upkeep(l->store, acquire_job, j);
    }
    return w;
}

/* Takes an id. When the clock is behind the id's mark by more than the generator absorbs: up
 * to CLOCK_WAIT_MAX_MS, the id is given back until the clock passes the mark, then taken
 * again; longer, nothing is taken and err says why. */
static write_result take_lease_waiting_for_the_clock(node_lease *l, lease_job *j, char *err,
                                                     size_t errlen)
{
    err[0] = '\0';
    for (int round = 0;; round++) {
        write_result w = take_lease(l, j);
        if (w != WRITE_OK || l->node_id < 0 || !j->behind)
            return w;
        int id = l->node_id;
        if (j->mark - j->now / 1000 > CLOCK_WAIT_MAX_MS || round == 3) {
            int64_t behind_ms =
                clock_behind_mark(l, j, "error", "the clock is behind this node id's last id");
            char mark[RFC3339_STR_MAX];
            format_rfc3339_ms(j->mark * 1000, mark);
            snprintf(err, errlen,
                     "the clock is %lld s behind the newest id node id %d issued (stamped %s): "
                     "ids made now would sort before it; correct the clock, or start once it "
                     "has passed that time",
                     (long long)(behind_ms / 1000), id, mark);
            return WRITE_OK;
        }
        int64_t wait_ms = clock_behind_mark(
            l, j, "warn", "the clock is behind this node id's last id; waiting for it to pass");
        struct timespec pause = {wait_ms / 1000, wait_ms % 1000 * 1000000L};
        while (nanosleep(&pause, &pause) != 0)
            ;
    }
}

static void say_why_not_leased(char *err, size_t errlen, write_result w, const lease_job *j)
{
    if (w != WRITE_OK)
        snprintf(err, errlen, "cannot lease a node id: the database refused (%s)",
                 write_result_name(w));
    else if (j->requested == NODE_AUTO)
        snprintf(err, errlen, "cannot lease a node id: all %d are held by live nodes",
                 AUTO_NODE_IDS);
    else
        snprintf(err, errlen,
                 "--node-id %d is held by a live node (%s) for %lld s more; give another id "
                 "or --node-id auto",
                 j->requested, j->other_holder,
                 (long long)((j->other_until - j->now) / 1000000 + 1));
}

node_lease *lease_acquire(store *s, int requested, id_generator *gen, lease_role role, char *err,
                          size_t errlen)
{
    /* a serve on PostgreSQL starts while the database is away and leases once it answers */
    bool wait_for_database = role == LEASE_SERVE && store_kind(s) == DB_POSTGRES;
    node_lease *l = calloc(1, sizeof *l);
    l->store = s;
    l->gen = gen;
    l->node_id = -1;
    uint8_t r[4];
    RAND_bytes(r, sizeof r);
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    l->sole_serve = role == LEASE_SERVE && store_kind(s) == DB_SQLITE;
    snprintf(l->holder, sizeof l->holder, "%s:%s:%d:%02x%02x%02x%02x",
             role == LEASE_SERVE ? "serve" : "command", host, (int)getpid(), r[0], r[1], r[2],
             r[3]);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->wake, NULL);

    l->requested = requested;
    l->renews = role == LEASE_SERVE;
    lease_job j = {.l = l, .requested = requested};
    write_result w = take_lease_waiting_for_the_clock(l, &j, err, errlen);
    if (w != WRITE_OK && wait_for_database) {
        /* the database is away: serve (503s, /readyz false) and lease once it answers; until
         * then the generator issues nothing */
        id_generator_set_lease_until(gen, 1);
        log_error("error", "cannot lease a node id yet; retrying until the database answers",
                  write_result_name(w));
        return l;
    }
    if (w != WRITE_OK || l->node_id < 0) {
        if (!err[0]) /* else the clock, said by take_lease_waiting_for_the_clock */
            say_why_not_leased(err, errlen, w, &j);
        pthread_mutex_destroy(&l->lock);
        pthread_cond_destroy(&l->wake);
        free(l);
        return NULL;
    }
    lease_taken(l, &j);
    return l;
}

int lease_node_id(const node_lease *l)
{
    return atomic_load(&l->node_id);
}

bool lease_fleet_reads_event_answers(node_lease *l)
{
    return l && atomic_load(&l->fleet_reads_event_answers);
}

bool lease_fleet_knows_processor_key_schemes(node_lease *l)
{
    return l && atomic_load(&l->fleet_knows_processor_key_schemes);
}

bool lease_held(const node_lease *l)
{
    return atomic_load(&l->node_id) >= 0;
}

/* A lease that started while the database was away: one more try. A held explicit id ends the
 * process, as it would have at start. */
static void lease_retry_acquire(node_lease *l)
{
    lease_job j = {.l = l, .requested = l->requested, .now = now_us()};
    write_result w = store_run_upkeep(l->store, acquire_job, &j);
    if (w != WRITE_OK)
        return;
    if (l->node_id >= 0 && j.behind) {
        /* the clock is behind the id's mark: given back, and tried again at the next round
         * (every LEASE_RENEW_MS) until the clock passes it; a clock too far behind ends the
         * process, as it would have at start */
        bool too_far = j.mark - j.now / 1000 > CLOCK_WAIT_MAX_MS;
        clock_behind_mark(l, &j, too_far ? "fatal" : "warn",
                          too_far ? "the clock is behind this node id's last id; stopping"
                                  : "the clock is behind this node id's last id; waiting for "
                                    "it to pass");
        if (too_far)
            _exit(1);
        return;
    }
    if (l->node_id < 0) {
        jsonw line;
        log_begin(&line, "fatal", "cannot lease a node id: it is held by a live node");
        jw_key(&line, "requested");
        jw_int(&line, l->requested);
        log_end(&line);
        _exit(1);
    }
    lease_taken(l, &j);
    jsonw line;
    log_begin(&line, "info", "node id leased");
    jw_key(&line, "node_id");
    jw_int(&line, l->node_id);
    log_end(&line);
}

typedef struct renew_job {
    node_lease *l;
    int64_t now;
    bool lost;
    int64_t mark;     /* the mark found when the id was taken back (0: not taken back, none) */
    int64_t reserved; /* the mark stored: ids may be stamped up to it */
} renew_job;

static write_result renew_job_run(db_conn *db, void *arg)
{
    renew_job *j = arg;
    int id = j->l->node_id;
    j->mark = 0;
    j->reserved = j->now / 1000 + MARK_AHEAD_MS;
    db_status rc = db_exec(db,
                           "UPDATE node_leases SET expires_at = $3, " LEASE_CAPABILITIES
                           " WHERE node_id = $1 AND holder = $2",
                           "isi", (int64_t)id, j->l->holder, j->now + LEASE_TTL_MS * 1000);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) == 1) {
        rc = reserve_mark(db, id, j->reserved);
        return write_result_of_db(rc == DB_DONE ? check_fleet(db, j->l, j->now) : rc);
    }
    /* our row is gone or another's: take it back only if it is free (expired or absent). A
     * holder between may have issued ids: the new ones follow its mark */
    lease_job take = {.l = j->l, .requested = id, .now = j->now};
    bool taken;
    rc = take_id(db, &take, id, &taken);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    j->lost = !taken;
    if (j->lost)
        return WRITE_OK;
    rc = read_mark(db, id, &j->mark);
    if (rc == DB_DONE && j->mark > j->reserved)
        j->reserved = j->mark;
    return write_result_of_db(rc == DB_DONE ? reserve_mark(db, id, j->reserved) : rc);
}

static void *renew_main(void *arg)
{
    node_lease *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + (int64_t)LEASE_RENEW_MS * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&l->wake, &l->lock, &until);
        if (l->stopping)
            break;
        pthread_mutex_unlock(&l->lock);
        if (!lease_held(l)) {
            lease_retry_acquire(l);
            pthread_mutex_lock(&l->lock);
            continue;
        }
        /* the bound is measured from before the renewal was sent: it can only be earlier
         * than the lease's true end */
        renew_job j = {.l = l, .now = now_us()};
        write_result w = store_run_upkeep(l->store, renew_job_run, &j);
        if (w == WRITE_OK && j.lost) {
            jsonw line;
            log_begin(&line, "fatal", "node id lease taken by another node; stopping");
            jw_key(&line, "node_id");
            jw_int(&line, l->node_id);
            log_end(&line);
            _exit(1);
        }
        if (w == WRITE_OK) {
            id_generator_floor(l->gen, j.mark);
            id_generator_set_mark(l->gen, j.reserved);
            id_generator_set_lease_until(l->gen, j.now / 1000 + LEASE_TTL_MS - LEASE_MARGIN_MS);
        } else {
            jsonw line;
            log_begin(&line, "error", "node id lease not renewed");
            jw_key(&line, "node_id");
            jw_int(&line, l->node_id);
            jw_key(&line, "result");
            jw_string(&line, write_result_name(w));
            log_end(&line);
        }
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

void lease_start_renewal(node_lease *l)
{
    l->renewing = pthread_create(&l->thread, NULL, renew_main, l) == 0;
}

void lease_release(node_lease *l)
{
    if (!l)
        return;
    if (l->renewing) {
        pthread_mutex_lock(&l->lock);
        l->stopping = true;
        pthread_cond_signal(&l->wake);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
    }
    if (lease_held(l)) {
        id_generator_set_lease_until(l->gen, 1); /* no id from now on: the mark is exact */
        release_ctx r = {.l = l, .exact_mark = true, .last_ms = id_generator_last_ms(l->gen)};
        store_run_upkeep(l->store, release_job, &r);
    }
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->wake);
    free(l);
}

int sqlite_serve_lock(const char *url, char *err, size_t errlen)
{
    db_kind kind;
    const char *path;
    if (db_parse_url(url, &kind, &path, err, errlen) != 0)
        return -1;
    if (kind == DB_POSTGRES)
        return 0;
    char lock_path[600];
    snprintf(lock_path, sizeof lock_path, "%s.lock", path);
    /* kept open (and so locked) until the process exits, however it exits */
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", lock_path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen,
                 "another payd serve owns the database %s (it holds %s); one serve per SQLite "
                 "file (use PostgreSQL for several nodes)",
                 path, lock_path);
        close(fd);
        return -1;
    }
    return 0;
}
