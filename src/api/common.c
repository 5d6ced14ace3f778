#include "api/common.h"

#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "core/currency.h"
#include "core/timefmt.h"
#include "processor/processor.h"

void reply_invalid_param(request *req, payd_error err, const char *param, const char *detail)
{
    reply_error_extra(req, err, detail, json_pack("{s:s}", "param", param));
}

bool currency_check(const field *f, json_t *value, void *out, arena *a, const char **detail)
{
    (void)a;
    if (currency_normalize(json_string_value(value), out))
        return true;
    *detail = f->detail; /* the field's one detail, for any refusal of it */
    return false;
}

bool path_id_or_reply(request *req, int param, const char *prefix, uint64_t *out)
{
    if (id_parse(req->params[param], prefix, out) == 0)
        return true;
    reply_error(req, ERR_RESOURCE_MISSING, "no such resource");
    return false;
}

int64_t created_at_of(uint64_t id)
{
    return id_decode(id).unix_ms * 1000;
}

json_t *json_id(const char *prefix, uint64_t id)
{
    char s[ID_STR_MAX];
    id_format(id, prefix, s);
    return json_string(s);
}

json_t *json_time(int64_t unix_us)
{
    char s[32];
    format_rfc3339_ms(unix_us, s);
    return json_string(s);
}

json_t *json_string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

bool etag_list_matches(const char *list, const char *etag, bool weak_ok)
{
    const char *p = list;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',') /* optional white space: SP or HTAB */
            p++;
        if (!*p)
            return false;
        if (*p == '*')
            return true;
        bool weak = !strncmp(p, "W/", 2);
        const char *tag = weak ? p + 2 : p;
        if (*tag != '"')
            return false;
        const char *end = strchr(tag + 1, '"');
        if (!end)
            return false;
        size_t len = (size_t)(end - tag) + 1;
        if ((!weak || weak_ok) && len == strlen(etag) && !strncmp(tag, etag, len))
            return true;
        p = end + 1;
    }
}

void etag_of(int64_t version, char out[ETAG_STR_MAX])
{
    snprintf(out, ETAG_STR_MAX, "\"v%lld\"", (long long)version);
}

bool etag_not_modified(request *req, int64_t version)
{
    char etag[ETAG_STR_MAX];
    etag_of(version, etag);
    const char *inm = request_header(req, "If-None-Match");
    return inm && etag_list_matches(inm, etag, true);
}

void if_match_version(request *req, int64_t body_version, int64_t *expected, bool *from_if_match)
{
    *expected = 0;
    *from_if_match = false;
    const char *im = request_header(req, "If-Match");
    if (im) {
        while (*im == ' ')
            im++;
        if (*im == '*')
            return;
        /* a strong "v<n>" is the only tag we issue; weak tags never match (§9) */
        long long v;
        char close;
        if (sscanf(im, "\"v%lld%c", &v, &close) == 2 && close == '"' && v > 0) {
            *expected = v;
        } else {
            *expected = -1; /* matches no version: the write answers 412 */
        }
        *from_if_match = true;
        return;
    }
    *expected = body_version;
}

void reply_version_conflict(request *req, bool from_if_match, int64_t current_version)
{
    char etag[ETAG_STR_MAX];
    etag_of(current_version, etag);
    if (from_if_match) {
        reply_error_extra(req, ERR_PRECONDITION_FAILED,
                          "If-Match does not name the current version",
                          json_pack("{s:s}", "current_etag", etag));
    } else {
        reply_error_extra(req, ERR_VERSION_CONFLICT, "the version in the body is not current",
                          json_pack("{s:I, s:s}", "current_version", (json_int_t)current_version,
                                    "current_etag", etag));
    }
}

bool path_account_or_reply(request *req, int param, uint64_t *account)
{
    if (!path_id_or_reply(req, param, "acct", account))
        return false;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    if (!account_owned(db, req->user.id, *account, NULL)) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
        return false;
    }
    return true;
}

db_conn *reader_or_reply(request *req)
{
    db_conn *db = store_reader(req->app->store);
    if (!db) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE, "the database is not available");
    }
    return db;
}

db_status sum_fits(db_conn *db, const store_add *add, int value, const char *check_sql, bool *fits)
{
    /* SQLite would store an overflowing sum as a float, PostgreSQL refuses it: neither may
     * happen, so the room is checked first */
    int64_t limit;
    *fits = false;
    if (__builtin_sub_overflow(INT64_MAX, store_held_sum(add, value), &limit) ||
        __builtin_sub_overflow(limit, add->value[value], &limit))
        return DB_DONE;
    db_value params[STORE_ADD_VALUES + 1] = {{.type = 'i', .i = limit}};
    int n = 1;
    for (int i = 0; i < add->count; i++)
        if (add->kind[i] == ADD_KEY)
            params[n++] = (db_value){.type = 'i', .i = add->value[i]};
    db_stmt *st = db_query_values(db, check_sql, params, n);
    db_status rc = db_step(st);
    *fits = rc == DB_ROW && db_int(st, 0) == 1;
    db_done(st);
    return rc == DB_ROW ? DB_DONE : rc;
}

processor *request_processor(const request *req)
{
    return processor_of_mode(req->app, req->user.test);
}

struct processor_wait {
    request *req;
    proc_result *into;
    request_step next;
    void *ctx;
};

processor_wait *processor_wait_for(request *req, proc_result *into, request_step next, void *ctx)
{
    processor_wait *w = arena_alloc(&req->arena, sizeof *w);
    *w = (processor_wait){req, into, next, ctx};
    return w;
}

void processor_answered(proc_result r, db_failure failure, void *arg)
{
    processor_wait *w = arg;
    *w->into = r;
    request_wake(w->req, failure, w->next, w->ctx);
}

bool source_of_mode_or_reply(request *req, const char *source)
{
    if (req->user.test || processor_is_builtin(req->app->processor) ||
        req->app->cfg.live_test_tokens || !processor_test_token(source))
        return true;
    reply_invalid_param(req, ERR_INVALID_PARAMETER, "source",
                        "a live key cannot pay with a test token: use a test key (sk_test_...) "
                        "for test tokens, or a card token of the live processor");
    return false;
}
