#include "processor/processor.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "processor/http_processor.h"
#include "processor/simulator.h"
#include "server/metrics.h"

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
        return p;
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

static const char *outcome_name(proc_status s)
{
    static const char *names[] = {"approved", "declined", "unavailable", "not_found"};
    return names[s];
}

proc_result processor_charge(processor *p, const char *key, int64_t amount, const char *currency,
                             const char *source)
{
    proc_result r = p->remote ? http_processor_charge(p->remote, key, amount, currency, source)
                              : sim_charge(p->a->store, NULL, p->a->cfg.processor_timeout_ms, key,
                                           amount, currency, source);
    metrics_count_processor(p->a->metrics, "charge", outcome_name(r.status));
    return r;
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

int processor_valid_source(const char *s)
{
    if (strncmp(s, "tok_", 4) != 0)
        return 0;
    size_t n = 0;
    for (const char *c = s + 4; *c; c++, n++)
        if (!isalnum((unsigned char)*c) && *c != '_')
            return 0;
    return n >= 1 && n <= 64;
}
