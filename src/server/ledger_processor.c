/* The processor's side of `payd ledger verify` when it is a `payd processor-sim` (its books
 * live in its own database): one GET /charges/{id} per charged payment, on one kept-alive
 * connection. */
#include "server/ledger_processor.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"

typedef struct body {
    char *data;
    size_t len;
} body;

static size_t collect(char *ptr, size_t size, size_t n, void *arg)
{
    body *b = arg;
    size_t add = size * n;
    char *grown = realloc(b->data, b->len + add + 1);
    if (!grown)
        return 0;
    memcpy(grown + b->len, ptr, add);
    b->data = grown;
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

/* GET base+path: the status (0 when there was no answer) and the parsed JSON body. */
static long get_json(CURL *curl, const char *base, const char *path, json_t **out)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    body b = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    *out = b.data ? json_loads(b.data, 0, NULL) : NULL;
    free(b.data);
    return status;
}

void ledger_processor_stats(const char *url, jsonw *w)
{
    CURL *curl = curl_easy_init();
    json_t *stats = NULL;
    long status = curl ? get_json(curl, url, "/stats", &stats) : 0;
    jw_key(w, "processor_stats");
    char *text = status == 200 && stats ? json_dumps(stats, JSON_COMPACT) : NULL;
    jw_raw(w, text, "null");
    free(text);
    json_decref(stats);
    if (curl)
        curl_easy_cleanup(curl);
}

static void violation(jsonw *w, const char *kind, const char *type, uint64_t payment,
                      const char *charge, const char *detail, int64_t *found)
{
    char id[ID_STR_MAX];
    id_format(payment, "pay", id);
    jw_object_begin(w);
    jw_member_string(w, "kind", kind);
    jw_member_string(w, "type", type);
    jw_member_string(w, "source", id);
    jw_member_string(w, "record", charge);
    jw_member_string(w, "detail", detail);
    jw_object_end(w);
    (*found)++;
}

/* A manual payment's hold (§17) against the processor's: what it captured and released, and
 * in how many calls, between what payd confirmed and all payd reserved (a reserved one still
 * pending may or may not have reached it). */
static void check_hold(json_t *j, db_stmt *st, uint64_t payment, const char *charge, jsonw *w,
                       int64_t *found)
{
    static const struct {
        const char *member, *what;
        int confirmed, reserved; /* the columns of st */
    } sides[] = {{"captured", "capture", 5, 6},
                 {"released", "release", 7, 8},
                 {"captures", "capture", 9, 10},
                 {"releases", "release", 11, 12}};
    for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
        int64_t at = json_integer_value(json_object_get(j, sides[i].member));
        if (at < db_int(st, sides[i].confirmed))
            violation(w, "entry_without_processor_record", sides[i].what, payment, charge,
                      "captures or releases payd confirmed are missing at the processor", found);
        if (at > db_int(st, sides[i].reserved))
            violation(w, "processor_record_without_entry", sides[i].what, payment, charge,
                      "the processor captured or released more than payd recorded", found);
    }
}

/* One charged payment against the processor's charge: held as succeeded and not voided, with
 * at least the refunds payd confirmed and at most all payd reserved; a manual payment's as a
 * hold (check_hold). */
static int check_charge(CURL *curl, const char *url, db_stmt *st, jsonw *w, int64_t *found)
{
    uint64_t payment = (uint64_t)db_int(st, 0);
    const char *charge = db_text(st, 1) ? db_text(st, 1) : "";
    int64_t confirmed = db_int(st, 2), reserved = db_int(st, 3);
    char *escaped = curl_easy_escape(curl, charge, 0);
    char path[256];
    snprintf(path, sizeof path, "/charges/%s", escaped ? escaped : "");
    curl_free(escaped);
    json_t *j = NULL;
    long status = get_json(curl, url, path, &j);
    int rc = 0;
    if (status == 404) {
        violation(w, "entry_without_processor_record", "charge", payment, charge,
                  "the processor holds no such charge", found);
    } else if (status != 200 || !json_is_object(j)) {
        rc = -1; /* the processor did not answer: nothing can be said */
    } else if (!json_is_string(json_object_get(j, "status")) ||
               strcmp(json_string_value(json_object_get(j, "status")),
                      strcmp(db_text(st, 4), "manual") ? "succeeded" : "authorized") != 0 ||
               json_is_true(json_object_get(j, "voided"))) {
        violation(w, "entry_without_processor_record", "charge", payment, charge,
                  "the processor's charge is declined or voided", found);
    } else {
        int64_t refunded = json_integer_value(json_object_get(j, "refunded"));
        if (refunded < confirmed)
            violation(w, "entry_without_processor_record", "refund", payment, charge,
                      "refunds payd confirmed are missing at the processor", found);
        if (refunded > reserved)
            violation(w, "processor_record_without_entry", "refund", payment, charge,
                      "the processor refunded more than payd recorded", found);
        if (!strcmp(db_text(st, 4), "manual"))
            check_hold(j, st, payment, charge, w, found);
    }
    json_decref(j);
    return rc;
}

/* Each charged payment: its charge, its refunds (confirmed, all reserved), its capture method,
 * and its hold's figures (§17) as sums over its payment_captures rows, confirmed then all:
 * captured, released, captures, releases. */
#define HOLD_SUM(expr, cond)                                                                       \
    ", (SELECT COALESCE(SUM(" expr "), 0) FROM payment_captures c WHERE c.payment_id = p.id " cond \
    ")"
#define CONFIRMED  "AND c.status = 'succeeded'"
#define IS_CAPTURE "CASE WHEN c.amount > 0 THEN 1 ELSE 0 END"
#define IS_RELEASE "CASE WHEN c.amount = 0 THEN 1 ELSE 0 END"
/* clang-format off */
#define HOLD_SUMS                                                                                  \
    HOLD_SUM("c.amount", CONFIRMED) HOLD_SUM("c.amount", "")                                       \
    HOLD_SUM("c.released", CONFIRMED) HOLD_SUM("c.released", "")                                   \
    HOLD_SUM(IS_CAPTURE, CONFIRMED) HOLD_SUM(IS_CAPTURE, "")                                       \
    HOLD_SUM(IS_RELEASE, CONFIRMED) HOLD_SUM(IS_RELEASE, "")
/* clang-format on */
/* live mode's payments only: test mode's charges are the builtin simulator's (docs/modes.md) */
static const char CHARGED_PAYMENTS_SQL[] =
    "SELECT p.id, p.processor_charge_id, COALESCE(SUM(CASE WHEN r.status = 'succeeded' THEN "
    "r.amount ELSE 0 END), 0), COALESCE(SUM(r.amount), 0), p.capture_method" HOLD_SUMS
    " FROM payments p JOIN users u ON u.id = p.user_id AND u.mode = 'live' "
    "LEFT JOIN refunds r ON r.payment_id = p.id WHERE p.status <> 'failed' "
    "GROUP BY p.id, p.processor_charge_id, p.capture_method";

int ledger_processor_check(db_conn *db, const char *url, jsonw *w, int64_t *found)
{
    CURL *curl = curl_easy_init();
    if (!curl)
        return -1;
    db_stmt *st = db_query(db, CHARGED_PAYMENTS_SQL, "");
    int rc = 0;
    db_status step;
    while (rc == 0 && (step = db_step(st)) == DB_ROW)
        rc = check_charge(curl, url, st, w, found);
    if (rc == 0 && step != DB_DONE)
        rc = -1;
    db_done(st);
    curl_easy_cleanup(curl);
    return rc;
}
