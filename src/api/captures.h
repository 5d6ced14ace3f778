#ifndef PAYD_API_CAPTURES_H
#define PAYD_API_CAPTURES_H
/* Authorize now, capture later (docs/api.md §17): the captures and releases of a manual
 * payment's hold (api/captures.c). */
#include <stdbool.h>
#include <stdint.h>

#include "node/app.h"

#define MAX_CAPTURES 50 /* captures per payment (§17) */

typedef enum hold_kind { HOLD_CAPTURE, HOLD_RELEASE, HOLD_EXPIRY } hold_kind;

/* A payment's hold as one read of its row shows it. */
typedef struct hold_state {
    char status[24];
    int64_t capturable, captured, released, refunded, capture_count;
} hold_state;

typedef enum hold_verdict {
    HOLD_OK,
    HOLD_NOT_CAPTURABLE, /* 409 payment_not_capturable */
    HOLD_EXCEEDS,        /* 409 amount_exceeds_capturable */
    HOLD_TOO_MANY,       /* 409 too_many_captures */
} hold_verdict;

/* What one operation moves: captured and released out of the hold, what it leaves capturable,
 * and the payment's status after it. */
typedef struct hold_change {
    int64_t captured, released, capturable;
    const char *status;
} hold_change;

/* Pure: the change a capture (of want, 0: all that is capturable; final releases the rest)
 * or a release (HOLD_RELEASE: all that is capturable) makes to h, or why it cannot. Whatever
 * it answers, h's captured + released + capturable is kept. */
hold_verdict hold_plan(const hold_state *h, hold_kind kind, int64_t want, bool final,
                       hold_change *out);

/* The recoverer's part (§17): releases the holds past capture_before at the processor and
 * cancels their payments ("expired"), and finishes an expiry whose release was left in doubt.
 * Safe on several nodes at once. Returns how many it expired. Blocks (processor calls). */
int captures_expire_due(app *a);

#endif
