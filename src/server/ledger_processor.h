#ifndef PAYD_SERVER_LEDGER_PROCESSOR_H
#define PAYD_SERVER_LEDGER_PROCESSOR_H
/* `payd ledger verify --processor URL`: the processor's side of the books read from a running
 * `payd processor-sim` (docs/ledger.md, "Verify"): GET /charges/{id} for each charge a payment
 * records, GET /stats for the summary. */
#include <stdint.h>

#include "core/jsonw.h"
#include "store/db.h"

/* Appends to w (an open array) a violation for each charged payment whose charge the processor
 * does not hold as succeeded, or whose refunds there differ from payd's. -1 when the
 * processor cannot be read. */
int ledger_processor_check(db_conn *db, const char *url, jsonw *w, int64_t *found);
/* Writes member "processor_stats": GET /stats's answer, or null. */
void ledger_processor_stats(const char *url, jsonw *w);

#endif
