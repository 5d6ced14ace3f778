#include "processor/processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/metrics.h"
#include "processor/http_processor.h"
#include "processor/simulator.h"

struct processor {
    app *a;
    http_processor *remote; /* NULL: the builtin simulator */
};

processor *processor_create(app *a, const char *spec, char *err, size_t errlen)
{
    processor *p = calloc(1, sizeof *p);
    p->a = a;
    if (!strcmp(spec, "builtin"))
        return p;
    if (!strncmp(spec, "http://", 7) || !strncmp(spec, "https://", 8)) {
        p->remote = http_processor_create(spec, a->cfg.processor_timeout_ms);
        if (p->remote)
            return p;
        snprintf(err, errlen, "cannot start the HTTP processor client for '%s'", spec);
        free(p);
        return NULL;
    }
    snprintf(err, errlen, "--processor must be builtin or http://HOST:PORT, got '%s'", spec);
    free(p);
    return NULL;
}

void processor_free(processor *p)
{
    if (!p)
        return;
    http_processor_free(p->remote);
    free(p);
}

bool processor_is_builtin(const processor *p)
{
    return p->remote == NULL;
}

processor *processor_of_mode(app *a, bool test)
{
    return test && a->test_processor ? a->test_processor : a->processor;
}

bool processor_test_token(const char *source)
{
    static const char *const tokens[] = {"tok_visa",
                                         "tok_mastercard",
                                         "tok_chargeDeclined",
                                         "tok_insufficientFunds",
                                         "tok_lostResponse",
                                         "tok_processorDown",
                                         "tok_slow"};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        if (!strcmp(source, tokens[i]))
            return true;
    return false;
}

static const char *outcome_name(proc_status s)
{
    static const char *names[] = {"approved", "declined", "unavailable", "not_found"};
    return names[s];
}

/* Every charge's outcome is counted here, blocking or started. */
static void count_charge(processor *p, proc_result r)
{
    metrics_count_processor(p->a->metrics, "charge", outcome_name(r.status));
}

proc_result processor_charge(processor *p, const char *key, int64_t amount, const char *currency,
                             const char *source)
{
    proc_result r = p->remote ? http_processor_charge(p->remote, key, amount, currency, source)
                              : sim_charge(p->a->store, NULL, p->a->cfg.processor_timeout_ms, key,
                                           amount, currency, source);
    count_charge(p, r);
    return r;
}

/* An HTTP processor's charge waits on the processor's own thread (http_processor_charge_start);
 * the builtin one waits on the store's writer, except for tokens that sleep. */
bool processor_charge_blocks(const processor *p, const char *source)
{
    return p->remote ? false : sim_charge_blocks(source);
}

typedef struct started_call {
    processor *p;
    processor_charge_done done;
    void *arg;
} started_call;

static void charge_answered(proc_result r, db_failure failure, void *arg)
{
    started_call c = *(started_call *)arg;
    free(arg);
    count_charge(c.p, r);
    c.done(r, failure, c.arg);
}

void processor_charge_start(processor *p, const char *key, int64_t amount, const char *currency,
                            const char *source, processor_charge_done done, void *arg)
{
    started_call *c = malloc(sizeof *c);
    *c = (started_call){p, done, arg};
    if (p->remote) {
        http_processor_charge_start(p->remote, key, amount, currency, source, charge_answered, c);
        return;
    }
    sim_charge_start(p->a->store, p->a->cfg.processor_timeout_ms, key, amount, currency, source,
                     charge_answered, c);
}

bool processor_charges_in_write(const processor *p, const char *source)
{
    return !p->remote && sim_charge_in_write_ok(source);
}

write_result processor_charge_in_write(processor *p, db_conn *db, const char *key, int64_t amount,
                                       const char *currency, const char *source, proc_result *out,
                                       bool *created)
{
    (void)p; /* the builtin processor's tables are in the job's own database */
    return sim_charge_in_write(db, key, amount, currency, source, out, created);
}

write_result processor_withdraw_in_write(processor *p, db_conn *db, const char *key)
{
    (void)p;
    return sim_withdraw_charge_in_write(db, key);
}

void processor_count_charge_in_write(processor *p, proc_result r, bool created)
{
    sim_count_charge(created);
    count_charge(p, r);
}

proc_result processor_find_charge(processor *p, const char *key)
{
    proc_result r =
        p->remote ? http_processor_find_charge(p->remote, key) : sim_find_charge(p->a->store, key);
    metrics_count_processor(p->a->metrics, "find_charge", outcome_name(r.status));
    return r;
}

proc_result processor_refund(processor *p, const char *key, const char *charge_id, int64_t amount)
{
    proc_result r = p->remote ? http_processor_refund(p->remote, key, charge_id, amount)
                              : sim_refund(p->a->store, NULL, key, charge_id, amount);
    metrics_count_processor(p->a->metrics, "refund", outcome_name(r.status));
    return r;
}

static void refund_answered(proc_result r, db_failure failure, void *arg)
{
    started_call c = *(started_call *)arg;
    free(arg);
    metrics_count_processor(c.p->a->metrics, "refund", outcome_name(r.status));
    c.done(r, failure, c.arg);
}

void processor_refund_start(processor *p, const char *key, const char *charge_id, int64_t amount,
                            processor_charge_done done, void *arg)
{
    started_call *c = malloc(sizeof *c);
    *c = (started_call){p, done, arg};
    if (p->remote) {
        http_processor_refund_start(p->remote, key, charge_id, amount, refund_answered, c);
        return;
    }
    sim_refund_start(p->a->store, key, charge_id, amount, refund_answered, c);
}

/* ---- holds (docs/api.md §17) ---- */

proc_result processor_authorize(processor *p, const char *key, int64_t amount, const char *currency,
                                const char *source)
{
    proc_result r = p->remote ? http_processor_authorize(p->remote, key, amount, currency, source)
                              : sim_charge_hold(p->a->store, NULL, p->a->cfg.processor_timeout_ms,
                                                key, amount, currency, source, true);
    metrics_count_processor(p->a->metrics, "authorize", outcome_name(r.status));
    return r;
}

proc_result processor_capture(processor *p, const char *key, const char *charge_id, int64_t amount,
                              int64_t release)
{
    proc_result r = p->remote ? http_processor_capture(p->remote, key, charge_id, amount, release)
                              : sim_hold_op(p->a->store, NULL, key, charge_id, amount, release);
    metrics_count_processor(p->a->metrics, "capture", outcome_name(r.status));
    return r;
}

proc_result processor_release(processor *p, const char *key, const char *charge_id, int64_t amount)
{
    proc_result r = p->remote ? http_processor_release(p->remote, key, charge_id, amount)
                              : sim_hold_op(p->a->store, NULL, key, charge_id, 0, amount);
    metrics_count_processor(p->a->metrics, "release", outcome_name(r.status));
    return r;
}

proc_hold processor_hold(processor *p, const char *charge_id)
{
    return p->remote ? http_processor_hold(p->remote, charge_id) : sim_hold(p->a->store, charge_id);
}
