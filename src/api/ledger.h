#ifndef PAYD_API_LEDGER_H
#define PAYD_API_LEDGER_H
/* The double-entry ledger (docs/ledger.md). Every movement of money is a journal entry of two
 * or more lines that sum to zero, written by the write job that makes the change, in its
 * transaction. A line is a signed amount on one ledger account: a payd account's `available`
 * (its accounts.balance) or `pending` book, or the currency's system account `processor` or
 * `holds`. The writer keeps the payd accounts' books as sums (the caller moves the account's
 * row as it always did: at commit for credits, by a conditional UPDATE for debits); the system
 * accounts keep no row, their balance is the sum of their lines. */
#include <stdint.h>

#include "node/app.h"
#include "request/request.h"
#include "store/db.h"

typedef enum ledger_book { BOOK_AVAILABLE, BOOK_PENDING, BOOK_PROCESSOR, BOOK_HOLDS } ledger_book;

#define LEDGER_MAX_LINES 4 /* a capture's: pending, holds, available, processor */

typedef struct ledger_line {
    uint64_t id;      /* the line's; a txn_ id when it is on a payd account */
    uint64_t account; /* the payd account, 0 for a system account */
    ledger_book book;
    int64_t amount; /* positive raises the ledger account */
} ledger_line;

typedef struct ledger_entry {
    uint64_t id, user, source; /* source: the payment, refund or transfer */
    const char *type;          /* charge, authorization, capture, release, refund, transfer */
    const char *currency;
    int count;
    ledger_line line[LEDGER_MAX_LINES];
} ledger_entry;

/* Gives the entry and each of its lines a fresh id from the node's generator; false while the
 * node-id lease is lapsed (app_try_next_id). */
bool ledger_number(ledger_entry *e, app *a);
/* In a write job: inserts the numbered entry and its lines. DB_ERROR when the lines do not sum
 * to zero (a bug: nothing may be written then). */
db_status ledger_post(db_conn *db, const ledger_entry *e);
/* The entries of the postings table (docs/ledger.md), numbered and posted. */
db_status ledger_post_charge(db_conn *db, app *a, uint64_t user, uint64_t payment, uint64_t account,
                             const char *currency, int64_t amount);
db_status ledger_post_refund(db_conn *db, app *a, uint64_t user, uint64_t refund, uint64_t account,
                             const char *currency, int64_t amount);
db_status ledger_post_transfer(db_conn *db, app *a, uint64_t user, uint64_t transfer, uint64_t from,
                               uint64_t to, const char *currency, int64_t amount);

/* §17: authorization of A (pending +A, holds −A), capture of C (pending −C, holds +C,
 * available +C, processor −C), release of R (pending −R, holds +R); the payment is the source. */
db_status ledger_post_authorization(db_conn *db, app *a, uint64_t user, uint64_t payment,
                                    uint64_t account, const char *currency, int64_t amount);
db_status ledger_post_capture(db_conn *db, app *a, uint64_t user, uint64_t payment,
                              uint64_t account, const char *currency, int64_t amount);
db_status ledger_post_release(db_conn *db, app *a, uint64_t user, uint64_t payment,
                              uint64_t account, const char *currency, int64_t amount);

/* The book's name as stored and shown. */
const char *ledger_book_name(ledger_book b);

#endif
