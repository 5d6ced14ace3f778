/* `payd ledger verify` (docs/ledger.md, "Verify"). Each invariant is one query that selects its
 * violations, so a check costs a scan or a join, never a loop of lookups, and every violation
 * is listed, not only the first. All of them read one snapshot (one read transaction), so a
 * verify beside a running server sees books that were whole at one moment. */
#include "server/ledger_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/jsonw.h"
#include "idem/idem.h"
#include "server/ledger_processor.h"
#include "server/command_line.h"
#include "store/store.h"

#define CHECK_COLUMNS 5

/* How a column of a check's rows is shown: an id with this prefix, a number, or text. */
#define NUMBER NULL
#define TEXT   ""

typedef struct check {
    const char *kind;
    const char *sql;
    int count;
    const char *name[CHECK_COLUMNS];
    const char *prefix[CHECK_COLUMNS]; /* an id's prefix, NUMBER or TEXT */
    bool builtin_processor;            /* only when the processor's records are in this db */
    /* with an external processor, the builtin simulator holds test mode's records only
     * (docs/modes.md): what such a check runs instead (NULL: nothing) */
    const char *test_mode_sql;
    bool in_flight_exempt; /* a row whose processor key (the column after the shown ones) is
                            * still in flight is counted, not reported */
} check;

/* What a payment took, released and still holds (§17): an automatic payment was captured in
 * full when charged, a manual one by its captures. */
#define CAPTURED   "p.amount_captured"
#define RELEASED   "p.amount_released"
#define CAPTURABLE "p.amount_capturable"

/* The builtin processor's books: a charge it made that no payment records and no void returned,
 * a refund it made that no refund of payd's carries, a hold no payment carries and no void
 * released, and a capture or release no payment_captures row of payd's carries (a void's
 * release apart). */
#define PROCESSOR_RECORD_WITHOUT_ENTRY                                                             \
    "SELECT c.charge_id, 'charge', c.amount, c.processor_key FROM processor_charges c "            \
    "LEFT JOIN payments p ON p.processor_charge_id = c.charge_id LEFT JOIN "                       \
    "processor_refunds v ON v.charge_id = c.charge_id AND v.processor_key LIKE '%:void' "          \
    "WHERE c.status = 'succeeded' AND p.id IS NULL AND v.refund_id IS NULL "                       \
    "UNION ALL SELECT pr.refund_id, 'refund', pr.amount, pr.processor_key FROM "                   \
    "processor_refunds pr LEFT JOIN refunds r ON r.processor_key = pr.processor_key "              \
    "WHERE pr.processor_key NOT LIKE '%:void' AND r.id IS NULL "                                   \
    "UNION ALL SELECT c.charge_id, 'authorization', c.amount, c.processor_key FROM "               \
    "processor_charges c LEFT JOIN payments p ON p.processor_charge_id = c.charge_id "             \
    "LEFT JOIN processor_captures v ON v.charge_id = c.charge_id AND v.processor_key "             \
    "LIKE '%:void' WHERE c.status = 'authorized' AND p.id IS NULL AND "                            \
    "v.capture_id IS NULL "                                                                        \
    "UNION ALL SELECT k.capture_id, CASE WHEN k.amount > 0 THEN 'capture' ELSE "                   \
    "'release' END, k.amount + k.released, k.processor_key FROM processor_captures k "             \
    "LEFT JOIN payment_captures c ON c.processor_key = k.processor_key WHERE "                     \
    "k.processor_key NOT LIKE '%:void' AND (c.id IS NULL OR c.amount <> k.amount OR "              \
    "c.released <> k.released)"
/* An entry whose charge, refund, hold, capture or release the builtin processor does not hold;
 * the joins narrow the payments and refunds looked at (to test mode's). */
#define ENTRY_WITHOUT_PROCESSOR_RECORD(payments_join, refunds_join)                                \
    "SELECT e.id, e.type, p.id, 'pay' FROM journal_entries e JOIN payments p "                     \
    "ON p.id = e.source_id " payments_join "LEFT JOIN processor_charges c ON c.charge_id = "       \
    "p.processor_charge_id AND c.status = 'succeeded' WHERE e.type = 'charge' AND "                \
    "c.charge_id IS NULL "                                                                         \
    "UNION ALL SELECT e.id, e.type, r.id, 're' FROM journal_entries e JOIN refunds r "             \
    "ON r.id = e.source_id " refunds_join "LEFT JOIN processor_refunds pr ON pr.processor_key = "  \
    "r.processor_key WHERE e.type = 'refund' AND r.status <> 'pending' AND "                       \
    "pr.refund_id IS NULL "                                                                        \
    "UNION ALL SELECT e.id, e.type, p.id, 'pay' FROM journal_entries e JOIN payments p "           \
    "ON p.id = e.source_id " payments_join "LEFT JOIN processor_charges c ON c.charge_id = "       \
    "p.processor_charge_id AND c.status = 'authorized' WHERE e.type = 'authorization' "            \
    "AND c.charge_id IS NULL "                                                                     \
    "UNION ALL SELECT c.id, c.kind, c.payment_id, 'pay' FROM payment_captures c JOIN payments p "  \
    "ON p.id = c.payment_id " payments_join "LEFT JOIN processor_captures k ON "                   \
    "k.processor_key = c.processor_key WHERE c.status = 'succeeded' AND k.capture_id IS NULL"

/* An entry's source, as its type names it. */
#define SOURCE_PREFIX_SQL                                                                          \
    "CASE e.type WHEN 'refund' THEN 're' WHEN 'transfer' THEN 'tr' ELSE 'pay' END"

static const check checks[] = {
    {.kind = "unbalanced_entry",
     .sql = "SELECT entry_id, currency, SUM(amount) FROM journal_lines "
            "GROUP BY entry_id, currency HAVING SUM(amount) <> 0",
     .count = 3,
     .name = {"entry_id", "currency", "sum"},
     .prefix = {"je", TEXT, NUMBER}},
    {.kind = "book_mismatch",
     .sql = "SELECT a.id, 'available', a.balance, COALESCE(s.available, 0) FROM accounts a "
            "LEFT JOIN (SELECT account_id, SUM(CASE WHEN book = 'available' THEN amount ELSE 0 "
            "END) AS available, SUM(CASE WHEN book = 'pending' THEN amount ELSE 0 END) AS "
            "pending FROM journal_lines WHERE account_id IS NOT NULL GROUP BY account_id) s "
            "ON s.account_id = a.id WHERE a.balance <> COALESCE(s.available, 0) "
            "UNION ALL SELECT a.id, 'pending', a.pending, COALESCE(s.pending, 0) FROM accounts a "
            "LEFT JOIN (SELECT account_id, SUM(CASE WHEN book = 'pending' THEN amount ELSE 0 "
            "END) AS pending FROM journal_lines WHERE account_id IS NOT NULL GROUP BY "
            "account_id) s ON s.account_id = a.id WHERE a.pending <> COALESCE(s.pending, 0)",
     .count = 4,
     .name = {"account_id", "book", "stored", "lines"},
     .prefix = {"acct", TEXT, NUMBER, NUMBER}},
    {.kind = "negative_balance",
     .sql = "SELECT id, 'available', balance FROM accounts WHERE balance < 0 "
            "UNION ALL SELECT id, 'pending', pending FROM accounts WHERE pending < 0",
     .count = 3,
     .name = {"account_id", "book", "value"},
     .prefix = {"acct", TEXT, NUMBER}},
    {.kind = "refunded_exceeds_captured",
     .sql = "SELECT p.id, p.refunded_amount, COALESCE(r.total, 0), " CAPTURED " FROM payments p "
            "LEFT JOIN (SELECT payment_id, SUM(amount) AS total FROM refunds GROUP BY "
            "payment_id) r ON r.payment_id = p.id WHERE p.refunded_amount > " CAPTURED
            " OR COALESCE(r.total, 0) > " CAPTURED,
     .count = 4,
     .name = {"payment_id", "refunded_amount", "refunds", "captured"},
     .prefix = {"pay", NUMBER, NUMBER, NUMBER}},
    {.kind = "capture_mismatch",
     .sql =
         "SELECT p.id, p.amount, " CAPTURED ", " RELEASED ", " CAPTURABLE " FROM payments p "
         "WHERE p.status <> 'failed' AND " CAPTURED " + " RELEASED " + " CAPTURABLE " <> p.amount",
     .count = 5,
     .name = {"payment_id", "amount", "captured", "released", "capturable"},
     .prefix = {"pay", NUMBER, NUMBER, NUMBER, NUMBER}},
    /* one entry per charged payment, per refund (its money left when it was reserved) and per
     * succeeded transfer; none for a failed payment or transfer. A manual payment (§17) has
     * one authorization entry instead of its charge's, one capture entry per capture and one
     * release entry per release (a cancel, a final capture's rest, an expiry) */
    {.kind = "source_entries",
     .sql = "SELECT p.id, 'charge', COUNT(e.id) FROM payments p LEFT JOIN journal_entries e "
            "ON e.source_id = p.id AND e.type = 'charge' GROUP BY p.id, p.status, "
            "p.capture_method HAVING COUNT(e.id) <> CASE WHEN p.status = 'failed' OR "
            "p.capture_method = 'manual' THEN 0 ELSE 1 END "
            "UNION ALL SELECT p.id, 'authorization', COUNT(e.id) FROM payments p LEFT JOIN "
            "journal_entries e ON e.source_id = p.id AND e.type = 'authorization' GROUP BY "
            "p.id, p.status, p.capture_method HAVING COUNT(e.id) <> CASE WHEN p.status <> "
            "'failed' AND p.capture_method = 'manual' THEN 1 ELSE 0 END "
            "UNION ALL SELECT p.id, k.type, COUNT(e.id) FROM payments p CROSS JOIN (SELECT "
            "'capture' AS type UNION ALL SELECT 'release') k LEFT JOIN journal_entries e ON "
            "e.source_id = p.id AND e.type = k.type WHERE p.capture_method = 'manual' GROUP BY "
            "p.id, k.type HAVING COUNT(e.id) <> (SELECT COUNT(*) FROM payment_captures c WHERE "
            "c.payment_id = p.id AND CASE WHEN k.type = 'capture' THEN c.amount ELSE c.released "
            "END > 0) "
            "UNION ALL SELECT r.id, 'refund', COUNT(e.id) FROM refunds r LEFT JOIN "
            "journal_entries e ON e.source_id = r.id AND e.type = 'refund' GROUP BY r.id "
            "HAVING COUNT(e.id) <> 1 "
            "UNION ALL SELECT t.id, 'transfer', COUNT(e.id) FROM transfers t LEFT JOIN "
            "journal_entries e ON e.source_id = t.id AND e.type = 'transfer' GROUP BY t.id, "
            "t.status HAVING COUNT(e.id) <> CASE WHEN t.status = 'succeeded' THEN 1 ELSE 0 END",
     .count = 3,
     .name = {"source", "type", "entries"},
     .prefix = {TEXT, TEXT, NUMBER}},
    {.kind = "entry_without_source",
     .sql = "SELECT e.id, e.type, e.source_id, " SOURCE_PREFIX_SQL " FROM journal_entries e "
            "LEFT JOIN payments p ON p.id = e.source_id LEFT JOIN refunds r ON r.id = "
            "e.source_id LEFT JOIN transfers t ON t.id = e.source_id WHERE (e.type = 'refund' "
            "AND r.id IS NULL) OR (e.type = 'transfer' AND t.id IS NULL) OR (e.type NOT IN "
            "('refund', 'transfer') AND p.id IS NULL)",
     .count = 3,
     .name = {"entry_id", "type", "source"},
     .prefix = {"je", TEXT, TEXT}},
    /* the builtin processor's books: a charge it made that no payment records and no void
     * returned, a refund it made that no refund of payd's carries */
    {.kind = "processor_record_without_entry",
     .sql = PROCESSOR_RECORD_WITHOUT_ENTRY,
     .count = 3,
     .name = {"record", "type", "amount"},
     .prefix = {TEXT, TEXT, NUMBER},
     .builtin_processor = true,
     .test_mode_sql = PROCESSOR_RECORD_WITHOUT_ENTRY,
     .in_flight_exempt = true},
    /* an entry whose charge or refund the processor does not hold (a refund still in doubt,
     * status pending, may not have reached it yet: it is counted in the summary instead) */
    {.kind = "entry_without_processor_record",
     .sql = ENTRY_WITHOUT_PROCESSOR_RECORD("", ""),
     .test_mode_sql =
         ENTRY_WITHOUT_PROCESSOR_RECORD("JOIN users u ON u.id = p.user_id AND u.mode = 'test' ",
                                        "JOIN users u ON u.id = r.user_id AND u.mode = 'test' "),
     .count = 3,
     .name = {"entry_id", "type", "source"},
     .prefix = {"je", TEXT, TEXT},
     .builtin_processor = true},
    /* one processor record, one entry: two payments that carry one charge */
    {.kind = "processor_record_entries",
     .sql = "SELECT p.processor_charge_id, 'charge', COUNT(e.id) FROM payments p JOIN "
            "journal_entries e ON e.source_id = p.id AND e.type = 'charge' GROUP BY "
            "p.processor_charge_id HAVING COUNT(e.id) > 1",
     .count = 3,
     .name = {"record", "type", "entries"},
     .prefix = {TEXT, TEXT, NUMBER}},
};

/* A column of the row st is on, as its check shows it. Some checks select an id and, after
 * the shown columns, the prefix it takes (source columns of several kinds). */
static void write_column(jsonw *w, db_stmt *st, const check *c, int i)
{
    jw_key(w, c->name[i]);
    const char *prefix = c->prefix[i];
    if (prefix == NUMBER) {
        jw_int(w, db_int(st, i));
    } else if (*prefix) {
        char id[ID_STR_MAX];
        id_format((uint64_t)db_int(st, i), prefix, id);
        jw_string(w, id);
    } else if (!strcmp(c->name[i], "source") && !strcmp(c->kind, "source_entries")) {
        /* the source's prefix follows from its type */
        const char *type = db_text(st, 1);
        char id[ID_STR_MAX];
        id_format((uint64_t)db_int(st, i),
                  !strcmp(type, "refund")     ? "re"
                  : !strcmp(type, "transfer") ? "tr"
                                              : "pay",
                  id);
        jw_string(w, id);
    } else if (!strcmp(c->name[i], "source")) {
        char id[ID_STR_MAX];
        id_format((uint64_t)db_int(st, i), db_text(st, c->count), id);
        jw_string(w, id);
    } else {
        jw_string(w, db_text(st, i) ? db_text(st, i) : "");
    }
}

/* The processor keys of operations still in flight: a key still open (started, or in doubt:
 * a retry or the recoverer will record or void its charge) and a charge waiting for its void.
 * Sorted, for bsearch. */
typedef struct key_set {
    char (*keys)[IDEM_PROCESSOR_KEY_MAX];
    size_t count, cap;
} key_set;

static void key_set_add(key_set *set, const char *key)
{
    if (set->count == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 64;
        set->keys = realloc(set->keys, set->cap * sizeof *set->keys);
        if (!set->keys)
            abort();
    }
    snprintf(set->keys[set->count++], IDEM_PROCESSOR_KEY_MAX, "%s", key);
}

static int key_compare(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void read_in_flight(db_conn *db, key_set *set)
{
    db_stmt *st = db_query(db,
                           "SELECT user_id, idem_key, fingerprint, generation, "
                           "processor_key_scheme FROM idempotency_keys "
                           "WHERE state IN ('started', 'in_doubt')",
                           "");
    while (db_step(st) == DB_ROW) {
        char key[IDEM_PROCESSOR_KEY_MAX];
        idem_processor_key((uint64_t)db_int(st, 0), db_text(st, 1), db_text(st, 2), db_int(st, 3),
                           (int)db_int(st, 4), key);
        key_set_add(set, key);
    }
    db_done(st);
    st = db_query(db, "SELECT processor_key FROM charge_voids", "");
    while (db_step(st) == DB_ROW)
        key_set_add(set, db_text(st, 0));
    db_done(st);
    if (set->count)
        qsort(set->keys, set->count, sizeof *set->keys, key_compare);
}

static bool in_flight(const key_set *set, const char *key)
{
    char probe[IDEM_PROCESSOR_KEY_MAX];
    snprintf(probe, sizeof probe, "%s", key ? key : "");
    return set->count && bsearch(probe, set->keys, set->count, sizeof *set->keys, key_compare);
}

/* Runs one check, appending its violations to w (an open array). -1 on a database error. */
static int run_check(db_conn *db, const check *c, const char *sql, const key_set *flying, jsonw *w,
                     int64_t *found, int64_t *exempt)
{
    db_stmt *st = db_query(db, sql, "");
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (c->in_flight_exempt && in_flight(flying, db_text(st, c->count))) {
            (*exempt)++;
            continue;
        }
        jw_object_begin(w);
        jw_member_string(w, "kind", c->kind);
        for (int i = 0; i < c->count; i++)
            write_column(w, st, c, i);
        jw_object_end(w);
        (*found)++;
    }
    db_done(st);
    return rc == DB_DONE ? 0 : -1;
}

static int64_t count_of(db_conn *db, const char *sql)
{
    db_stmt *st = db_query(db, sql, "");
    int64_t n = db_step(st) == DB_ROW ? db_int(st, 0) : -1;
    db_done(st);
    return n;
}

/* The figures of the summary, and each currency's system accounts (their balances are the sums
 * of their lines: no row keeps them). */
static void write_figures(db_conn *db, jsonw *w)
{
    static const struct {
        const char *name, *sql;
    } figures[] = {
        {"entries", "SELECT COUNT(*) FROM journal_entries"},
        {"lines", "SELECT COUNT(*) FROM journal_lines"},
        {"accounts", "SELECT COUNT(*) FROM accounts"},
        {"payments", "SELECT COUNT(*) FROM payments WHERE status <> 'failed'"},
        {"refunds", "SELECT COUNT(*) FROM refunds"},
        {"refunds_in_doubt", "SELECT COUNT(*) FROM refunds WHERE status = 'pending'"},
        {"transfers", "SELECT COUNT(*) FROM transfers WHERE status = 'succeeded'"},
        /* §17: captures and releases reserved, not yet confirmed by the processor */
        {"holds_in_doubt", "SELECT COUNT(*) FROM payment_captures WHERE status = 'pending'"},
    };
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
        jw_member_int(w, figures[i].name, count_of(db, figures[i].sql));
    jw_key(w, "system_accounts");
    jw_object_begin(w);
    db_stmt *st = db_query(db,
                           "SELECT currency, book, SUM(amount) FROM journal_lines "
                           "WHERE account_id IS NULL GROUP BY currency, book ORDER BY 1, 2",
                           "");
    while (db_step(st) == DB_ROW) {
        char key[32];
        snprintf(key, sizeof key, "%s.%s", db_text(st, 0), db_text(st, 1));
        jw_member_int(w, key, db_int(st, 2));
    }
    db_done(st);
    jw_object_end(w);
}

/* Every check in one read snapshot; the JSON on out. Returns the violations, or -1. */
static int64_t verify(db_conn *db, const char *processor, jsonw *w)
{
    bool builtin = !strcmp(processor, "builtin");
    bool pg = db_kind_of(db) == DB_POSTGRES;
    if (db_exec_script(db, pg ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN") !=
        DB_DONE)
        return -1;
    int64_t found = 0;
    jw_object_begin(w);
    jw_member_string(w, "processor", builtin || !strcmp(processor, "none") ? processor : "url");
    write_figures(db, w);
    if (!builtin && strcmp(processor, "none") != 0)
        ledger_processor_stats(processor, w);
    jw_key(w, "violations");
    jw_array_begin(w);
    int rc = 0;
    key_set flying = {0};
    read_in_flight(db, &flying);
    int64_t exempt = 0;
    bool external = !builtin && strcmp(processor, "none") != 0;
    for (size_t i = 0; i < sizeof checks / sizeof checks[0] && rc == 0; i++) {
        const check *c = &checks[i];
        const char *sql = !c->builtin_processor ? c->sql
                          : builtin             ? c->sql
                          : external            ? c->test_mode_sql
                                                : NULL;
        if (sql)
            rc = run_check(db, c, sql, &flying, w, &found, &exempt);
    }
    free(flying.keys);
    if (rc == 0 && !builtin && strcmp(processor, "none") != 0)
        rc = ledger_processor_check(db, processor, w, &found);
    jw_array_end(w);
    /* processor records of operations still in flight: not violations (yet) */
    jw_member_int(w, "in_flight", exempt);
    jw_key(w, "ok");
    jw_bool(w, found == 0);
    jw_member_int(w, "violation_count", found);
    jw_object_end(w);
    db_exec_script(db, "COMMIT");
    return rc == 0 ? found : -1;
}

int ledger_verify_main(int argc, char **argv)
{
    const char *url = cli_flag(argc, argv, "--db");
    if (!url)
        url = getenv("PAYD_DB");
    const char *processor = cli_flag(argc, argv, "--processor");
    if (!processor)
        processor = "builtin";
    if (!url) {
        fprintf(stderr, "usage: payd ledger verify --db URL [--processor builtin|none|URL]\n");
        return 2;
    }
    store *s = cli_open_store(argc, argv); /* --db, else PAYD_DB: the url above */
    if (!s)
        return 2;
    db_conn *db = store_reader(s);
    jsonw w;
    jw_init(&w);
    int64_t found = db ? verify(db, processor, &w) : -1;
    if (found < 0) {
        fprintf(stderr, "payd: ledger verify: %s\n", db ? db_last_error(db) : "no connection");
        jw_free(&w);
    } else {
        char *text = jw_take(&w, NULL);
        printf("%s\n", text);
        free(text);
    }
    store_release_reader(s);
    store_close(s);
    return found < 0 ? 2 : found > 0 ? 1 : 0;
}
