#include "processor/simulator.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timefmt.h"

static atomic_llong charges_made, refunds_made, deduplicated;
static pthread_mutex_t dice_lock = PTHREAD_MUTEX_INITIALIZER;

static bool roll(const sim_faults *f, double p)
{
    if (!f || p <= 0)
        return false;
    static unsigned state;
    static bool seeded;
    pthread_mutex_lock(&dice_lock);
    if (!seeded) {
        state = f->seed ? f->seed : (unsigned)time(NULL);
        seeded = true;
    }
    double r = (double)rand_r(&state) / RAND_MAX;
    pthread_mutex_unlock(&dice_lock);
    return r < p;
}

static void sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* splitmix64, seeded per thread from the system's generator: ids must not repeat, they need not
 * be secret, and RAND_bytes with a snprintf per byte cost 4 % of the writer's time */
static uint64_t next_random(void)
{
    static _Thread_local uint64_t state;
    static _Thread_local bool seeded;
    if (!seeded) {
        RAND_bytes((unsigned char *)&state, sizeof state);
        /* never one sequence for two threads, even if the system's generator failed */
        state ^= (uint64_t)now_us() ^ (uint64_t)(uintptr_t)&state;
        seeded = true;
    }
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* prefix, '_', 24 hex digits (96 random bits) */
static void new_id(const char *prefix, char out[48])
{
    static const char hex[] = "0123456789abcdef";
    size_t n = strlen(prefix);
    memcpy(out, prefix, n);
    out[n++] = '_';
    uint64_t bits[2] = {next_random(), next_random()};
    for (int i = 0; i < 24; i++)
        out[n++] = hex[(bits[i / 16] >> (4 * (i % 16))) & 0xF];
    out[n] = '\0';
}

typedef struct charge_job {
    const char *key, *currency, *source;
    int64_t amount;
    const char *decline_code; /* NULL: approve */
    bool slow;                /* tok_slow: answers late (after the timeout when it is short) */
    bool hold;                /* authorize only (docs/api.md §17): status 'authorized' */
    int64_t timeout_ms;
    bool created;     /* this call made the charge (false: an earlier call did) */
    db_status failed; /* what a failed record met (sim_charge_in_write answers with it) */
    proc_result result;
    sim_charge_done done; /* sim_charge_start */
    void *done_arg;
} charge_job;

static void read_charge(db_stmt *st, proc_result *r)
{
    snprintf(r->id, sizeof r->id, "%s", db_text(st, 0));
    r->authorized = !strcmp(db_text(st, 1), "authorized");
    r->status =
        !strcmp(db_text(st, 1), "succeeded") || r->authorized ? PROC_APPROVED : PROC_DECLINED;
    snprintf(r->decline_code, sizeof r->decline_code, "%s", db_text(st, 2) ? db_text(st, 2) : "");
}

/* A record the simulator could not write or read back: the processor is unavailable to the
 * caller. WRITE_CONFLICT, as these jobs' -1 always read, so the request does not take its own
 * database for down (WRITE_FAILED would). */
#define SIM_WRITE_FAILED WRITE_CONFLICT

static write_result record_charge(db_conn *db, void *arg)
{
    charge_job *j = arg;
    char id[48];
    new_id("ch", id);
    const char *status = j->decline_code ? "declined" : j->hold ? "authorized" : "succeeded";
    j->failed = db_exec(db,
                        "INSERT INTO processor_charges (processor_key, charge_id, status, "
                        "decline_code, amount, currency, source, created_at, captured) "
                        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                        "ON CONFLICT (processor_key) DO NOTHING",
                        "ssssissii", j->key, id, status, j->decline_code, j->amount, j->currency,
                        j->source, now_us(), !j->decline_code && !j->hold ? j->amount : (int64_t)0);
    if (j->failed != DB_DONE)
        return SIM_WRITE_FAILED;
    j->created = db_changes(db) == 1;
    if (j->created) { /* what was just written is the answer */
        snprintf(j->result.id, sizeof j->result.id, "%s", id);
        j->result.status = j->decline_code ? PROC_DECLINED : PROC_APPROVED;
        j->result.authorized = !j->decline_code && j->hold;
        snprintf(j->result.decline_code, sizeof j->result.decline_code, "%s",
                 j->decline_code ? j->decline_code : "");
        return WRITE_OK;
    }
    db_stmt *st = db_query(db,
                           "SELECT charge_id, status, decline_code FROM processor_charges "
                           "WHERE processor_key = $1",
                           "s", j->key);
    db_status found = db_step(st);
    if (found == DB_ROW)
        read_charge(st, &j->result);
    db_done(st);
    j->failed = found == DB_ROW ? DB_DONE : found == DB_DONE ? DB_ERROR : found;
    return found == DB_ROW ? WRITE_OK : SIM_WRITE_FAILED;
}

/* The test tokens of §5 that decide before any charge: the card's answer, or no answer. */
static charge_job new_charge(const char *key, int64_t amount, const char *currency,
                             const char *source, int64_t timeout_ms)
{
    charge_job j = {.key = key,
                    .amount = amount,
                    .currency = currency,
                    .source = source,
                    .timeout_ms = timeout_ms,
                    .slow = !strcmp(source, "tok_slow")};
    if (!strcmp(source, "tok_chargeDeclined"))
        j.decline_code = "generic_decline";
    else if (!strcmp(source, "tok_insufficientFunds"))
        j.decline_code = "insufficient_funds";
    return j;
}

static bool down_before_charging(const sim_faults *f, const char *source)
{
    return !strcmp(source, "tok_processorDown") || roll(f, f ? f->fail_before : 0);
}

/* What the caller hears once the charge's write ended (rc: the job's result). */
static proc_result charge_answer(const sim_faults *f, const charge_job *j, write_result rc)
{
    proc_result unavailable = {.status = PROC_UNAVAILABLE};
    if (rc != WRITE_OK)
        return unavailable;
    if (!j->created) {
        atomic_fetch_add(&deduplicated, 1);
        return j->result;
    }
    atomic_fetch_add(&charges_made, 1);
    /* the charge is made; these lose its answer on the way back */
    if (j->slow && j->timeout_ms < 2000)
        return unavailable;
    if (!strcmp(j->source, "tok_lostResponse") || roll(f, f ? f->fail_after : 0))
        return unavailable;
    return j->result;
}

proc_result sim_charge(store *s, const sim_faults *f, int64_t timeout_ms, const char *key,
                       int64_t amount, const char *currency, const char *source)
{
    return sim_charge_hold(s, f, timeout_ms, key, amount, currency, source, false);
}

proc_result sim_charge_hold(store *s, const sim_faults *f, int64_t timeout_ms, const char *key,
                            int64_t amount, const char *currency, const char *source, bool hold)
{
    if (f)
        sleep_ms(f->latency_ms);
    if (down_before_charging(f, source))
        return (proc_result){.status = PROC_UNAVAILABLE};
    charge_job j = new_charge(key, amount, currency, source, timeout_ms);
    j.hold = hold;
    if (j.slow) {
        /* a charge already made under this key answers at once */
        proc_result found = sim_find_charge(s, key);
        if (found.status != PROC_NOT_FOUND && found.status != PROC_UNAVAILABLE)
            return found;
        sleep_ms(timeout_ms < 2000 ? timeout_ms : 2000);
    }
    return charge_answer(f, &j, store_write(s, record_charge, &j));
}

bool sim_charge_blocks(const char *source)
{
    return !strcmp(source, "tok_slow");
}

static void charge_written(write_result rc, db_failure failure, const char *error, void *arg)
{
    (void)error; /* the store logged it */
    charge_job *j = arg;
    j->done(charge_answer(NULL, j, rc), failure, j->done_arg);
    free(j);
}

void sim_charge_start(store *s, int64_t timeout_ms, const char *key, int64_t amount,
                      const char *currency, const char *source, sim_charge_done done, void *arg)
{
    if (down_before_charging(NULL, source)) {
        done((proc_result){.status = PROC_UNAVAILABLE}, DB_FAILURE_NONE, arg);
        return;
    }
    charge_job *j = malloc(sizeof *j);
    *j = new_charge(key, amount, currency, source, timeout_ms);
    j->done = done;
    j->done_arg = arg;
    /* no fsync of its own: the payment's record, committed and synced after it, is what
     * makes it durable, and nothing outside payd sees the charge before that */
    store_submit_unsynced(s, record_charge, j, charge_written, j);
}

bool sim_charge_in_write_ok(const char *source)
{
    return strcmp(source, "tok_slow") && strcmp(source, "tok_lostResponse") &&
           strcmp(source, "tok_processorDown");
}

write_result sim_charge_in_write(db_conn *db, const char *key, int64_t amount, const char *currency,
                                 const char *source, proc_result *out, bool *created)
{
    charge_job j = new_charge(key, amount, currency, source, 0);
    write_result rc = record_charge(db, &j);
    *out = rc == WRITE_OK ? j.result : (proc_result){.status = PROC_UNAVAILABLE};
    *created = j.created;
    /* in the caller's job a failure is its database's: a deadlock runs the job again, an outage
     * is a 503 database_unavailable (not a processor's unavailability, as for a job of its own) */
    return rc == WRITE_OK ? WRITE_OK : write_result_of_db(j.failed);
}

write_result sim_withdraw_charge_in_write(db_conn *db, const char *key)
{
    return write_result_of_db(
        db_exec(db, "DELETE FROM processor_charges WHERE processor_key = $1", "s", key));
}

void sim_count_charge(bool created)
{
    atomic_fetch_add(created ? &charges_made : &deduplicated, 1);
}

proc_result sim_find_charge(store *s, const char *key)
{
    proc_result r = {.status = PROC_NOT_FOUND};
    db_conn *db = store_reader(s);
    if (!db)
        return (proc_result){.status = PROC_UNAVAILABLE};
    db_stmt *st = db_query(db,
                           "SELECT charge_id, status, decline_code FROM processor_charges "
                           "WHERE processor_key = $1",
                           "s", key);
    if (db_step(st) == DB_ROW)
        read_charge(st, &r);
    db_done(st);
    return r;
}

typedef struct refund_job {
    const char *key, *charge_id;
    int64_t amount;
    bool created;
    proc_result result;
    sim_charge_done done; /* sim_refund_start */
    void *done_arg;
} refund_job;

static write_result record_refund(db_conn *db, void *arg)
{
    refund_job *j = arg;
    char id[48];
    new_id("rf", id);
    if (db_exec(db,
                "INSERT INTO processor_refunds (processor_key, refund_id, charge_id, amount, "
                "created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (processor_key) DO NOTHING",
                "sssii", j->key, id, j->charge_id, j->amount, now_us()) != DB_DONE)
        return SIM_WRITE_FAILED;
    j->created = db_changes(db) == 1;
    db_stmt *st = db_query(db, "SELECT refund_id FROM processor_refunds WHERE processor_key = $1",
                           "s", j->key);
    write_result rc = db_step(st) == DB_ROW ? WRITE_OK : SIM_WRITE_FAILED;
    if (rc == WRITE_OK) {
        snprintf(j->result.id, sizeof j->result.id, "%s", db_text(st, 0));
        j->result.status = PROC_APPROVED;
    }
    db_done(st);
    return rc;
}

proc_result sim_refund(store *s, const sim_faults *f, const char *key, const char *charge_id,
                       int64_t amount)
{
    if (f)
        sleep_ms(f->latency_ms);
    if (roll(f, f ? f->fail_before : 0))
        return (proc_result){.status = PROC_UNAVAILABLE};
    refund_job j = {.key = key, .charge_id = charge_id, .amount = amount};
    if (store_write(s, record_refund, &j) != WRITE_OK)
        return (proc_result){.status = PROC_UNAVAILABLE};
    atomic_fetch_add(j.created ? &refunds_made : &deduplicated, 1);
    if (j.created && roll(f, f ? f->fail_after : 0))
        return (proc_result){.status = PROC_UNAVAILABLE};
    return j.result;
}

static void refund_written(write_result rc, db_failure failure, const char *error, void *arg)
{
    (void)error; /* the store logged it */
    refund_job *j = arg;
    proc_result r = {.status = PROC_UNAVAILABLE};
    if (rc == WRITE_OK) {
        atomic_fetch_add(j->created ? &refunds_made : &deduplicated, 1);
        r = j->result;
    }
    j->done(r, failure, j->done_arg);
    free(j);
}

void sim_refund_start(store *s, const char *key, const char *charge_id, int64_t amount,
                      sim_charge_done done, void *arg)
{
    refund_job *j = malloc(sizeof *j);
    *j = (refund_job){
        .key = key, .charge_id = charge_id, .amount = amount, .done = done, .done_arg = arg};
    store_submit(s, record_refund, j, refund_written, j);
}

void sim_stats(int64_t *charges, int64_t *refunds, int64_t *dedup)
{
    *charges = atomic_load(&charges_made);
    *refunds = atomic_load(&refunds_made);
    *dedup = atomic_load(&deduplicated);
}

/* ---- holds (docs/api.md §17): captures and releases ---- */

static atomic_llong captures_made, releases_made;

typedef struct hold_job {
    const char *key, *charge_id;
    int64_t amount, release;               /* release < 0: all that remains of the hold */
    bool created, exceeded, missing, lost; /* lost: the charge's source loses answers */
    proc_result result;
} hold_job;

/* One write: the record under its processor key (the same answer again for the same key), and
 * the hold moved by exactly the record's amounts, or nothing when that would pass the hold. */
static write_result record_hold_op(db_conn *db, void *arg)
{
    hold_job *j = arg;
    j->created = j->exceeded = j->missing = false;
    db_stmt *st = db_query(db, "SELECT capture_id FROM processor_captures WHERE processor_key = $1",
                           "s", j->key);
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        snprintf(j->result.id, sizeof j->result.id, "%s", db_text(st, 0));
        j->result.status = PROC_APPROVED;
    }
    db_done(st);
    if (rc != DB_DONE)
        return rc == DB_ROW ? WRITE_OK : SIM_WRITE_FAILED;
    st = db_query(db,
                  "SELECT amount - captured - released, status, source FROM processor_charges "
                  "WHERE charge_id = $1",
                  "s", j->charge_id);
    rc = db_step(st);
    int64_t left = 0;
    bool authorized = false;
    if (rc == DB_ROW) {
        left = db_int(st, 0);
        authorized = !strcmp(db_text(st, 1), "authorized");
        j->lost = !strcmp(db_text(st, 2), "tok_lostResponse");
    }
    db_done(st);
    if (rc < 0)
        return SIM_WRITE_FAILED;
    if (rc != DB_ROW || !authorized) {
        j->missing = true;
        return WRITE_OK;
    }
    int64_t release = j->release < 0 ? left - j->amount : j->release;
    if (j->amount < 0 || release < 0 || j->amount + release > left) {
        j->exceeded = true;
        return WRITE_OK;
    }
    char id[48];
    new_id(j->amount > 0 ? "cp" : "rl", id);
    if (db_exec(db,
                "INSERT INTO processor_captures (processor_key, capture_id, charge_id, amount, "
                "released, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
                "sssiii", j->key, id, j->charge_id, j->amount, release, now_us()) != DB_DONE ||
        db_exec(db,
                "UPDATE processor_charges SET captured = captured + $2, released = released + $3 "
                "WHERE charge_id = $1",
                "sii", j->charge_id, j->amount, release) != DB_DONE)
        return SIM_WRITE_FAILED;
    j->created = true;
    snprintf(j->result.id, sizeof j->result.id, "%s", id);
    j->result.status = PROC_APPROVED;
    return WRITE_OK;
}

proc_result sim_hold_op(store *s, const sim_faults *f, const char *key, const char *charge_id,
                        int64_t amount, int64_t release)
{
    if (f)
        sleep_ms(f->latency_ms);
    if (roll(f, f ? f->fail_before : 0))
        return (proc_result){.status = PROC_UNAVAILABLE};
    hold_job j = {.key = key, .charge_id = charge_id, .amount = amount, .release = release};
    if (store_write(s, record_hold_op, &j) != WRITE_OK)
        return (proc_result){.status = PROC_UNAVAILABLE};
    if (j.missing)
        return (proc_result){.status = PROC_NOT_FOUND};
    if (j.exceeded) {
        proc_result r = {.status = PROC_DECLINED};
        snprintf(r.decline_code, sizeof r.decline_code, "hold_exceeded");
        return r;
    }
    if (!j.created) {
        atomic_fetch_add(&deduplicated, 1);
        return j.result;
    }
    atomic_fetch_add(amount > 0 ? &captures_made : &releases_made, 1);
    /* made; these lose its answer on the way back, as they do a charge's */
    if (j.lost || roll(f, f ? f->fail_after : 0))
        return (proc_result){.status = PROC_UNAVAILABLE};
    return j.result;
}

bool sim_hold_op_exists(store *s, const char *key)
{
    db_conn *db = store_reader(s);
    if (!db)
        return false;
    db_stmt *st =
        db_query(db, "SELECT 1 FROM processor_captures WHERE processor_key = $1", "s", key);
    bool found = db_step(st) == DB_ROW;
    db_done(st);
    return found;
}

proc_hold sim_hold(store *s, const char *charge_id)
{
    proc_hold h = {.status = PROC_NOT_FOUND};
    db_conn *db = store_reader(s);
    if (!db)
        return (proc_hold){.status = PROC_UNAVAILABLE};
    db_stmt *st = db_query(db,
                           "SELECT amount, captured, released, status FROM processor_charges "
                           "WHERE charge_id = $1",
                           "s", charge_id);
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        h = (proc_hold){.status = PROC_APPROVED,
                        .amount = db_int(st, 0),
                        .captured = db_int(st, 1),
                        .released = db_int(st, 2),
                        .authorized = !strcmp(db_text(st, 3), "authorized")};
    } else if (rc != DB_DONE) {
        h.status = PROC_UNAVAILABLE;
    }
    db_done(st);
    return h;
}

void sim_hold_stats(int64_t *captures, int64_t *releases)
{
    *captures = atomic_load(&captures_made);
    *releases = atomic_load(&releases_made);
}
