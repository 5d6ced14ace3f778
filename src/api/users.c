/* The caller's own user (§9): GET with a strong ETag, PATCH under optimistic concurrency. The
 * version check and the write are one UPDATE (`... AND version = $expected`), so of two writers
 * holding the same ETag exactly one wins; the other is told so (412 for If-Match, 409 for a body
 * version) with the version it would have to start from. */
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "core/timefmt.h"

#define USER_COLUMNS "id, name, email, version, created_at, updated_at"

static void write_user_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "usr", (uint64_t)db_int(st, 0));
    jw_member_object(w, "user");
    jw_member_string(w, "name", db_text(st, 1));
    jw_member_string(w, "email", db_text(st, 2));
    jw_member_int(w, "version", db_int(st, 3));
    jw_member_time(w, "created_at", db_int(st, 4));
    jw_member_time(w, "updated_at", db_int(st, 5));
    jw_object_end(w);
}

/* A user owns itself: its GET is by the caller's own id (users_me), never a path's. */
static const resource user_resource = {
    .noun = "user",
    RESOURCE_TABLE("users", USER_COLUMNS, "id"),
    .id_prefix = "usr",
    .version_column = "version",
    .write_row = write_user_row,
};

void users_me(request *req)
{
    db_conn *db = reader_or_reply(req);
    if (db)
        resource_answer_get(req, &user_resource,
                            db_query(db, user_resource.get_sql, "ii", (int64_t)req->user.owner,
                                     (int64_t)req->user.owner));
}

/* PATCH /v1/users/me (§9) */
typedef struct user_input {
    const char *name, *email; /* NULL: unchanged */
    int64_t version;          /* 0: not given */
} user_input;

static const field user_fields[] = {
    {.name = "name", .kind = KIND_STRING, IN(user_input, name), .min = 1, .max = 100},
    {.name = "email", .kind = KIND_EMAIL, IN(user_input, email), .min = 3, .max = 254},
    VERSION_FIELD(user_input, version),
};
const schema users_update_body = SCHEMA(user_input, user_fields);

typedef struct user_patch {
    request *req;
    const char *name, *email; /* NULL: unchanged */
    int64_t expected;         /* 0: any version */
    bool from_if_match;
    int64_t now;
} user_patch;

static write_result patch_user(db_conn *db, void *arg)
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
                "issiii", (int64_t)req->user.owner, p->name, p->email, bump, p->now, p->expected);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    bool applied = db_changes(db) == 1;
    return write_result_of_db(
        resource_versioned_reply(req, &user_resource,
                                 db_query(db, user_resource.get_sql, "ii", (int64_t)req->user.owner,
                                          (int64_t)req->user.owner),
                                 applied, p->expected, p->from_if_match));
}

step_result users_update(request *req, void *prepared)
{
    (void)prepared;
    const user_input *in = req->input;
    user_patch *p = arena_alloc(&req->arena, sizeof *p);
    *p = (user_patch){.req = req, .name = in->name, .email = in->email, .now = now_us()};
    if_match_version(req, in->version, &p->expected, &p->from_if_match);
    return resource_write_then_answer(req, patch_user, p, "the user could not be updated");
}
