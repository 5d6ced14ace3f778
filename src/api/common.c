#include "api/common.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "api/handlers.h"
#include "core/timefmt.h"

static const char *kind_name(field_kind k)
{
    return k == FIELD_STRING ? "a string" : k == FIELD_INTEGER ? "an integer" : "an object";
}

void reply_invalid_param(request *req, payd_error err, const char *param, const char *detail)
{
    reply_error_extra(req, err, detail, json_pack("{s:s}", "param", param));
}

bool check_body_or_reply(request *req, const body_field *fields, int count)
{
    char detail[200];
    const char *name;
    json_t *value;
    json_object_foreach(req->json, name, value)
    {
        bool known = false;
        for (int i = 0; i < count && !known; i++)
            known = !strcmp(fields[i].name, name);
        if (!known) {
            snprintf(detail, sizeof detail, "'%.100s' is not a parameter of this request", name);
            reply_invalid_param(req, ERR_UNKNOWN_PARAMETER, name, detail);
            return false;
        }
    }
    for (int i = 0; i < count; i++) {
        const body_field *f = &fields[i];
        value = json_object_get(req->json, f->name);
        if (!value || json_is_null(value)) {
            if (f->required) {
                snprintf(detail, sizeof detail, "'%s' is required", f->name);
                reply_invalid_param(req, ERR_MISSING_PARAMETER, f->name, detail);
                return false;
            }
            continue;
        }
        bool ok;
        switch (f->kind) {
        case FIELD_STRING: {
            size_t len = json_is_string(value) ? json_string_length(value) : 0;
            ok = json_is_string(value) && (int64_t)len >= f->min && (int64_t)len <= f->max &&
                 strlen(json_string_value(value)) == len; /* no NUL inside */
            if (!ok)
                snprintf(detail, sizeof detail, "'%s' must be %s of %lld to %lld characters",
                         f->name, kind_name(f->kind), (long long)f->min, (long long)f->max);
            break;
        }
        case FIELD_INTEGER:
            ok = json_is_integer(value) && json_integer_value(value) >= f->min &&
                 json_integer_value(value) <= f->max;
            if (!ok)
                snprintf(detail, sizeof detail, "'%s' must be an integer from %lld to %lld",
                         f->name, (long long)f->min, (long long)f->max);
            break;
        default:
            ok = json_is_object(value) && (int64_t)json_object_size(value) <= f->max;
            if (!ok)
                snprintf(detail, sizeof detail, "'%s' must be an object of at most %lld members",
                         f->name, (long long)f->max);
        }
        if (!ok) {
            reply_invalid_param(req, ERR_INVALID_PARAMETER, f->name, detail);
            return false;
        }
    }
    return true;
}

const char *body_string(request *req, const char *name)
{
    return json_string_value(json_object_get(req->json, name));
}

int64_t body_int(request *req, const char *name, int64_t fallback)
{
    json_t *v = json_object_get(req->json, name);
    return json_is_integer(v) ? json_integer_value(v) : fallback;
}

bool body_has(request *req, const char *name)
{
    json_t *v = json_object_get(req->json, name);
    return v && !json_is_null(v);
}

bool path_id_or_reply(request *req, int param, const char *prefix, uint64_t *out)
{
    if (id_parse(req->params[param], prefix, out) == 0)
        return true;
    reply_error(req, ERR_RESOURCE_MISSING, "no such resource");
    return false;
}

bool normalize_currency(const char *in, char out[4])
{
    if (!in || strlen(in) != 3)
        return false;
    for (int i = 0; i < 3; i++) {
        if (!isalpha((unsigned char)in[i]))
            return false;
        out[i] = (char)toupper((unsigned char)in[i]);
    }
    out[3] = '\0';
    return true;
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
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '*')
            return true;
        bool weak = !strncmp(p, "W/", 2);
        const char *tag = weak ? p + 2 : p;
        const char *end = strchr(tag + 1, '"');
        if (*tag != '"' || !end)
            return false;
        size_t len = (size_t)(end - tag) + 1;
        if ((!weak || weak_ok) && len == strlen(etag) && !strncmp(tag, etag, len))
            return true;
        p = end + 1;
    }
    return false;
}

bool etag_not_modified_or_set(request *req, int64_t version)
{
    char etag[32];
    snprintf(etag, sizeof etag, "\"v%lld\"", (long long)version);
    reply_header(req, "ETag", etag);
    const char *inm = request_header(req, "If-None-Match");
    if (inm && etag_list_matches(inm, etag, true)) {
        reply_raw(req, 304, "", 0);
        return true;
    }
    return false;
}

bool if_match_version(request *req, int64_t *expected, bool *from_if_match)
{
    *expected = 0;
    *from_if_match = false;
    const char *im = request_header(req, "If-Match");
    if (im) {
        while (*im == ' ')
            im++;
        if (*im == '*')
            return true;
        /* a strong "v<n>" is the only tag we issue; weak tags never match (§9) */
        long long v;
        char close;
        if (sscanf(im, "\"v%lld%c", &v, &close) == 2 && close == '"' && v > 0) {
            *expected = v;
        } else {
            *expected = -1; /* matches no version: the write answers 412 */
        }
        *from_if_match = true;
        return true;
    }
    if (body_has(req, "version"))
        *expected = body_int(req, "version", 0);
    return true;
}

void reply_version_conflict(request *req, bool from_if_match, int64_t current_version)
{
    char etag[32];
    snprintf(etag, sizeof etag, "\"v%lld\"", (long long)current_version);
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

void reply_etag(request *req, int64_t version)
{
    char etag[32];
    snprintf(etag, sizeof etag, "\"v%lld\"", (long long)version);
    reply_header(req, "ETag", etag);
}

void reply_created(request *req, const char *collection, const char *key, json_t *body)
{
    char location[160];
    snprintf(location, sizeof location, "%s/%s", collection, key);
    reply_header(req, "Location", location);
    reply_json(req, 201, body);
}

int reply_versioned_write(request *req, db_stmt *st, int version_col, bool applied,
                          int64_t expected, bool from_if_match, json_t *(*to_json)(db_stmt *),
                          const char *missing)
{
    int rc = 0;
    if (db_step(st) != DB_ROW) {
        reply_error(req, ERR_RESOURCE_MISSING, missing);
    } else if (applied) {
        reply_etag(req, db_int(st, version_col));
        reply_json(req, 200, to_json(st));
    } else if (expected == 0 || db_int(st, version_col) == expected) {
        rc = DB_BUSY;
    } else {
        reply_version_conflict(req, from_if_match, db_int(st, version_col));
    }
    db_done(st);
    return rc;
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
