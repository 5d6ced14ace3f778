/* Resource descriptors (resource.h): the GET by id, the answers that carry a row, and their
 * headers, once for every resource. */
#include "api/resource.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "idem/idem.h"

int column_position(const char *columns, const char *column)
{
    const char *p = columns, *end = strstr(columns, " FROM ");
    if (!strncmp(p, "SELECT ", strlen("SELECT ")))
        p += strlen("SELECT ");
    if (!end)
        end = columns + strlen(columns);
    size_t want = strlen(column);
    for (int index = 0; p && end && p < end; index++) {
        while (*p == ' ')
            p++;
        const char *stop = memchr(p, ',', (size_t)(end - p));
        const char *last = stop ? stop : end;
        while (last > p && last[-1] == ' ')
            last--;
        if ((size_t)(last - p) == want && !memcmp(p, column, want))
            return index;
        p = stop ? stop + 1 : NULL;
    }
    return -1;
}

/* The positions of the key and the version among the columns (-1: the row has none). */
static int key_position(const resource *r)
{
    return r->key_column ? column_position(r->columns, r->key_column) : -1;
}

static int version_position(const resource *r)
{
    return r->version_column ? column_position(r->columns, r->version_column) : -1;
}

void resource_writer(request *req, const resource *r, jsonw *w)
{
    if (r->unmarked_rows)
        jw_init(w);
    else
        jw_init_answer(req, w);
}

void resource_headers(request *req, const resource *r, int status, const char *key, int64_t version)
{
    if (r->version_column) {
        char etag[ETAG_STR_MAX];
        etag_of(version, etag);
        reply_header(req, "ETag", etag);
    }
    if (status == 201 && r->path) {
        char location[160];
        snprintf(location, sizeof location, "%s%s", r->path, key);
        reply_header(req, "Location", location);
    }
}

/* The headers of the row st is on: its key is its id (with the prefix) or a column of text. */
static void row_headers(request *req, const resource *r, db_stmt *st, int status)
{
    char id[ID_STR_MAX];
    const char *key = id;
    int key_at = key_position(r), version_at = version_position(r);
    if (key_at > 0)
        key = db_text(st, key_at);
    else
        id_format((uint64_t)db_int(st, 0), r->id_prefix, id);
    resource_headers(req, r, status, key, version_at > 0 ? db_int(st, version_at) : 0);
}

void resource_reply(request *req, const resource *r, db_stmt *st, int status)
{
    row_headers(req, r, st, status);
    jsonw w;
    resource_writer(req, r, &w);
    r->write_row(st, &w);
    reply_jsonw(req, status, &w);
}

static void reply_missing(request *req, const resource *r)
{
    char detail[80];
    snprintf(detail, sizeof detail, "no such %s", r->noun);
    reply_error(req, ERR_RESOURCE_MISSING, detail);
}

void resource_answer_get(request *req, const resource *r, db_stmt *st)
{
    if (db_step(st) != DB_ROW) {
        reply_missing(req, r);
    } else if (r->version_column && etag_not_modified(req, db_int(st, version_position(r)))) {
        row_headers(req, r, st, 304);
        reply_raw(req, 304, "", 0);
    } else {
        resource_reply(req, r, st, 200);
    }
    db_done(st);
}

void resource_get(request *req, const resource *r)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, r->id_prefix, &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (db)
        resource_answer_get(req, r,
                            db_query(db, r->get_sql, "ii", (int64_t)id, (int64_t)req->user.id));
}

void write_redacted_secret(jsonw *w, const char *member, const char *rotate)
{
    jw_key(w, member);
    jw_null(w);
    jw_key(w, "redacted");
    jw_object_begin(w);
    jw_member_string(w, "member", member);
    jw_member_string(w, "code", "secret_shown_once");
    jw_member_string(w, "detail", rotate);
    jw_object_end(w);
}

/* The answer (201, or 200) shows the secret; the key keeps the same answer with the secret
 * redacted, so no stored answer holds it and a replay says how to get a new one. */
static void reply_with_secret(request *req, const resource *r, db_stmt *st,
                              const secret_member *secret, int status)
{
    jsonw shown, kept;
    resource_writer(req, r, &shown);
    resource_writer(req, r, &kept);
    r->write_row(st, &shown);
    r->write_row(st, &kept);
    jw_object_reopen(&shown);
    jw_member_string(&shown, secret->member, secret->value);
    jw_object_end(&shown);
    jw_object_reopen(&kept);
    write_redacted_secret(&kept, secret->member, secret->rotate);
    jw_object_end(&kept);
    reply_jsonw(req, status, &shown);
    reply_keep_instead(req, &kept);
}

static db_status created(request *req, const resource *r, db_stmt *st, bool *skipped,
                         const secret_member *secret)
{
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        row_headers(req, r, st, 201);
        if (secret) {
            reply_with_secret(req, r, st, secret, 201);
        } else {
            jsonw w;
            resource_writer(req, r, &w);
            r->write_row(st, &w);
            reply_jsonw(req, 201, &w);
        }
        rc = DB_DONE;
    } else if (rc == DB_DONE) {
        if (skipped)
            *skipped = true;
        else
            rc = DB_ERROR; /* no ON CONFLICT: a row always comes back */
    }
    db_done(st);
    return rc;
}

db_status resource_created(request *req, const resource *r, db_stmt *st, bool *skipped)
{
    if (skipped)
        *skipped = false;
    return created(req, r, st, skipped, NULL);
}

db_status resource_created_with_secret(request *req, const resource *r, db_stmt *st,
                                       const secret_member *secret)
{
    return created(req, r, st, NULL, secret);
}

db_status resource_changed_with_secret(request *req, const resource *r, db_stmt *st,
                                       const secret_member *secret)
{
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        row_headers(req, r, st, 200);
        reply_with_secret(req, r, st, secret, 200);
        rc = DB_DONE;
    } else if (rc == DB_DONE) {
        reply_missing(req, r);
    }
    db_done(st);
    return rc;
}

db_status resource_versioned_reply(request *req, const resource *r, db_stmt *st, bool applied,
                                   int64_t expected, bool from_if_match)
{
    db_status rc = DB_DONE;
    if (db_step(st) != DB_ROW) {
        reply_missing(req, r);
    } else if (applied) {
        resource_reply(req, r, st, 200);
    } else if (expected == 0 || db_int(st, version_position(r)) == expected) {
        rc = DB_BUSY;
    } else {
        reply_version_conflict(req, from_if_match, db_int(st, version_position(r)));
    }
    db_done(st);
    return rc;
}

db_status user_cap_full_or_reply(db_conn *db, request *req, const user_cap *c, int64_t limit,
                                 bool *full)
{
    *full = false;
    int64_t user = (int64_t)req->user.id;
    if (db_kind_of(db) == DB_POSTGRES) {
        db_stmt *lock = db_query(db, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", "i", user);
        db_status rc = db_step(lock);
        db_done(lock);
        if (rc != DB_ROW && rc != DB_DONE)
            return rc;
    }
    db_stmt *st = db_query(db, c->count_sql, "i", user);
    db_status rc = db_step(st);
    if (rc == DB_ROW)
        *full = db_int(st, 0) >= limit;
    db_done(st);
    if (rc != DB_ROW)
        return rc == DB_DONE ? DB_ERROR : rc;
    if (*full) {
        char detail[200];
        snprintf(detail, sizeof detail, "a user may have at most %lld %s; %s", (long long)limit,
                 c->what, c->remedy);
        reply_error(req, c->code, detail);
    }
    return DB_DONE;
}

bool new_row_id_or_reply(request *req, uint64_t *id, int64_t *created_at)
{
    if (!app_try_next_id(req->app, id)) {
        /* the node id's lease lapsed (docs/concurrency.md): nothing was written for this
         * request, and a key it claimed stays in doubt, so its retry resumes (docs/api.md) */
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE,
                    "this node's id lease lapsed: the database did not answer its renewal in "
                    "time; retry shortly");
        return false;
    }
    *created_at = created_at_of(*id);
    return true;
}

void reply_not_stored(request *req, write_result w, const char *noun, const char *retry_with)
{
    if (w == WRITE_OK || w == WRITE_FENCED)
        return;
    char detail[160];
    int n = snprintf(detail, sizeof detail, "the %s could not be stored", noun);
    if (!retry_with) {
        reply_error(req, ERR_INTERNAL, detail);
        return;
    }
    snprintf(detail + n, sizeof detail - (size_t)n, "; retry with the same %s", retry_with);
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_DATABASE_UNAVAILABLE, detail);
}

typedef struct not_stored {
    const char *noun, *retry_with;
} not_stored;

static step_result answer_unless_stored(request *req, void *arg)
{
    const not_stored *n = arg;
    reply_not_stored(req, req->write_result, n->noun, n->retry_with);
    return STEP_DONE;
}

step_result resource_commit_then_answer(request *req, write_job_fn fn, void *ctx, const char *noun,
                                        const char *retry_with)
{
    not_stored *n = arena_alloc(&req->arena, sizeof *n);
    *n = (not_stored){noun, retry_with};
    return commit_response_then(req, fn, ctx, answer_unless_stored, n);
}

typedef struct change_job {
    write_job_fn fn;
    void *ctx;
    const char *failed;
} change_job;

static write_result run_change(db_conn *db, void *arg)
{
    change_job *c = arg;
    return c->fn(db, c->ctx);
}

static step_result answer_unless_written(request *req, void *arg)
{
    const change_job *c = arg;
    if (req->write_result != WRITE_OK)
        reply_error(req, ERR_INTERNAL, c->failed);
    return STEP_DONE;
}

step_result resource_write_then_answer(request *req, write_job_fn fn, void *ctx, const char *failed)
{
    change_job *c = arena_alloc(&req->arena, sizeof *c);
    *c = (change_job){fn, ctx, failed};
    return request_write_then(req, run_change, c, answer_unless_written);
}
