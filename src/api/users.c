/* The caller's own user (§9): GET with a strong ETag, PATCH under optimistic concurrency. The
 * version check and the write are one UPDATE (`... AND version = $expected`), so of two writers
 * holding the same ETag exactly one wins; the other is told so (412 for If-Match, 409 for a body
 * version) with the version it would have to start from. */
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "core/timefmt.h"

#define USER_COLUMNS "id, name, email, version, created_at, updated_at"

static json_t *user_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:s, s:o, s:I, s:o, s:o}", "id",
                     json_id("usr", (uint64_t)db_int(st, 0)), "object", "user", "name",
                     db_text(st, 1), "email", json_string_or_null(db_text(st, 2)), "version",
                     (json_int_t)db_int(st, 3), "created_at", json_time(db_int(st, 4)),
                     "updated_at", json_time(db_int(st, 5)));
}

void users_me(request *req)
{
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query(db, "SELECT " USER_COLUMNS " FROM users WHERE id = $1", "i",
                           (int64_t)req->user.id);
    if (db_step(st) == DB_ROW) {
        if (!etag_not_modified_or_set(req, db_int(st, 3)))
            reply_json(req, 200, user_json(st));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such user");
    }
    db_done(st);
}

typedef struct user_patch {
    request *req;
    const char *name, *email; /* NULL: unchanged */
    int64_t expected;         /* 0: any version */
    bool from_if_match;
    int64_t now;
} user_patch;

static int patch_user(db_conn *db, void *arg)
{
    user_patch *p = arg;
    request *req = p->req;
    /* nothing to change (only a version): checked like a write, but nothing is bumped */
    int64_t bump = p->name || p->email ? 1 : 0;
    db_status rc =
        db_exec(db,
                "UPDATE users SET name = COALESCE($2, name), "
                "email = COALESCE($3, email), version = version + $4, "
                "updated_at = CASE WHEN $4 = 1 THEN $5 ELSE updated_at END "
                "WHERE id = $1 AND (version = $6 OR $6 = 0)",
                "issiii", (int64_t)req->user.id, p->name, p->email, bump, p->now, p->expected);
    if (rc != DB_DONE)
        return rc;
    bool applied = db_changes(db) == 1;
    return reply_versioned_write(req,
                                 db_query(db, "SELECT " USER_COLUMNS " FROM users WHERE id = $1",
                                          "i", (int64_t)req->user.id),
                                 3, applied, p->expected, p->from_if_match, user_json,
                                 "no such user");
}

static bool valid_email(const char *s)
{
    const char *at = strchr(s, '@');
    return at && at != s && at[1] && !strchr(at + 1, '@') && !strpbrk(s, " \t\r\n");
}

void users_update(request *req)
{
    static const body_field fields[] = {
        {"name", FIELD_STRING, false, 1, 100},
        {"email", FIELD_STRING, false, 3, 254},
        VERSION_FIELD,
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return;
    user_patch p = {.req = req,
                    .name = body_string(req, "name"),
                    .email = body_string(req, "email"),
                    .now = now_us()};
    if (p.email && !valid_email(p.email)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "email", "email must be an address");
        return;
    }
    if_match_version(req, &p.expected, &p.from_if_match);
    if (store_write(req->app->store, patch_user, &p) != 0)
        reply_error(req, ERR_INTERNAL, "the user could not be updated");
}
