/* The caller's own API keys (§13): GET and POST /v1/api_keys, DELETE /v1/api_keys/{id}.
 * POST honours an Idempotency-Key: the key keeps the answer with the new key redacted
 * (resource_created_with_secret), so a repeat makes no second key and no stored answer holds
 * one. A user holds at most --max-api-keys active keys. A request cannot revoke the key it was
 * made with (409 api_key_in_use): rotate by creating the new key, moving clients to it, then
 * revoking the old one with the new one. */
#include "api/api_keys.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "node/auth.h"

void api_key_generate(new_api_key *k, uint64_t id, uint64_t user, uint64_t owner, bool test,
                      const char *name, int64_t created_at)
{
    memset(k, 0, sizeof *k);
    k->id = id;
    k->user = user;
    k->owner = owner;
    k->test = test;
    k->name = name;
    k->created_at = created_at;
    auth_new_key(test, k->key, k->hash);
    snprintf(k->prefix, sizeof k->prefix, "%.*s", API_KEY_PREFIX_LEN, k->key);
}

db_stmt *api_key_insert(db_conn *db, const new_api_key *k)
{
    return db_query(
        db,
        "INSERT INTO api_keys (id, user_id, name, key_hash, prefix, status, created_at, mode, "
        "owner_id) VALUES ($1, $2, $3, $4, $5, 'active', $6, $7, $8) RETURNING " API_KEY_COLUMNS,
        "iisssisi", (int64_t)k->id, (int64_t)k->user, k->name, k->hash, k->prefix, k->created_at,
        k->test ? "test" : "live", (int64_t)k->owner);
}

static db_status find_twin(db_conn *db, uint64_t owner, uint64_t *twin)
{
    db_stmt *st = db_query(db, "SELECT id FROM users WHERE live_user_id = $1", "i", (int64_t)owner);
    db_status rc = db_step(st);
    *twin = rc == DB_ROW ? (uint64_t)db_int(st, 0) : 0;
    db_done(st);
    return rc == DB_ROW ? DB_DONE : rc;
}

db_status api_key_test_twin(db_conn *db, uint64_t owner, uint64_t new_id, int64_t now,
                            uint64_t *twin)
{
    db_status rc = find_twin(db, owner, twin);
    if (rc != DB_DONE || *twin)
        return rc;
    /* The twin copies the user's name and email; api_key_hash (unused since schema 3, but NOT
     * NULL UNIQUE) gets a value no key hash can take. Two makers at once: the unique index on
     * live_user_id keeps one, and both find it. */
    char placeholder[40];
    snprintf(placeholder, sizeof placeholder, "twin:%llu", (unsigned long long)new_id);
    rc = db_exec(db,
                 "INSERT INTO users (id, name, email, api_key_hash, rate_limit, version, "
                 "created_at, updated_at, mode, live_user_id) "
                 "SELECT $1, name, email, $2, NULL, 1, $3, $3, 'test', id FROM users "
                 "WHERE id = $4 AND mode = 'live' ON CONFLICT (live_user_id) DO NOTHING",
                 "isii", (int64_t)new_id, placeholder, now, (int64_t)owner);
    if (rc != DB_DONE)
        return rc;
    return find_twin(db, owner, twin);
}

db_status api_key_store(db_conn *db, const new_api_key *k)
{
    db_stmt *st = api_key_insert(db, k);
    db_status rc = db_step(st);
    db_done(st);
    return rc == DB_ROW ? DB_DONE : rc == DB_DONE ? DB_ERROR : rc;
}

db_stmt *api_key_revoke(db_conn *db, uint64_t key_id, uint64_t user, int64_t now)
{
    if (db_exec(db,
                "UPDATE api_keys SET status = 'revoked', revoked_at = $3 "
                "WHERE id = $1 AND (user_id = $2 OR $2 = 0) AND status = 'active'",
                "iii", (int64_t)key_id, (int64_t)user, now) != DB_DONE)
        return NULL;
    return db_query(db,
                    "SELECT " API_KEY_COLUMNS " FROM api_keys "
                    "WHERE id = $1 AND (user_id = $2 OR $2 = 0)",
                    "ii", (int64_t)key_id, (int64_t)user);
}

void write_api_key_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "key", (uint64_t)db_int(st, 0));
    jw_member_string(w, "object", "api_key");
    jw_key(w, "livemode"); /* its own mode: a live key can make a test key */
    jw_bool(w, strcmp(db_text(st, 7), "test") != 0);
    jw_member_id(w, "user_id", "usr", (uint64_t)db_int(st, 1));
    jw_member_string(w, "name", db_text(st, 2));
    jw_member_string(w, "prefix", db_text(st, 3));
    jw_member_string(w, "status", db_text(st, 4));
    jw_member_string(w, "mode", db_text(st, 7));
    jw_member_time(w, "created_at", db_int(st, 5));
    if (db_is_null(st, 6)) {
        jw_key(w, "revoked_at");
        jw_null(w);
    } else {
        jw_member_time(w, "revoked_at", db_int(st, 6));
    }
    jw_object_end(w);
}

/* Keys are listed and revoked, never read one by one: the Location a 201 names answers DELETE. */
static const resource api_key_resource = {
    .noun = "API key",
    RESOURCE_TABLE("api_keys", API_KEY_COLUMNS, "user_id"),
    .id_prefix = "key",
    .path = "/v1/api_keys/",
    .write_row = write_api_key_row,
};

static const list_query api_keys_list_query = {
    .name = "api_keys",
    .of = &api_key_resource,
    .parent_column = "user_id",
    .status_column = "status",
};

void api_keys_list(request *req)
{
    list_page(req, &api_keys_list_query, req->user.id, NULL);
}

/* POST /v1/api_keys */
typedef struct api_key_input {
    const char *name, *mode; /* mode NULL: the request's own */
} api_key_input;

static const char *const api_key_modes[] = {"test", "live", NULL};

static const field api_key_fields[] = {
    {.name = "name", .kind = KIND_STRING, IN(api_key_input, name), .min = 1, .max = 100},
    {.name = "mode", .kind = KIND_ENUM, IN(api_key_input, mode), .values = api_key_modes},
};
const schema api_keys_create_body = SCHEMA(api_key_input, api_key_fields);

typedef struct key_job {
    request *req;
    new_api_key key;
    uint64_t twin_id; /* the id a test twin is made under, if the user has none yet */
} key_job;

/* What a replay shows instead of the key (resource_created_with_secret). */
#define ROTATE_API_KEY                                                                             \
    "the key is shown only in the first answer to this request; if it was lost, create another "   \
    "key and revoke this one with it"

static write_result insert_key(db_conn *db, void *arg)
{
    key_job *job = arg;
    request *req = job->req;
    /* the cap is per mode: a live key making a test key counts the twin's keys */
    static const user_cap active_keys = {
        "SELECT COUNT(*) FROM api_keys WHERE user_id = $1 AND status = 'active'",
        ERR_API_KEY_LIMIT_REACHED, "active API keys", "revoke one to make another"};
    static const user_cap active_test_keys = {
        "SELECT COUNT(*) FROM api_keys WHERE status = 'active' AND user_id = "
        "(SELECT id FROM users WHERE live_user_id = $1)",
        ERR_API_KEY_LIMIT_REACHED, "active API keys of a mode", "revoke one to make another"};
    bool for_twin = job->key.test && !req->user.test;
    if (for_twin) {
        db_status twin_rc = api_key_test_twin(db, req->user.owner, job->twin_id,
                                              job->key.created_at, &job->key.user);
        if (twin_rc != DB_DONE)
            return write_result_of_db(twin_rc);
        if (!job->key.user) /* read as a constraint would be, as it always was */
            return WRITE_CONFLICT;
        /* the twin's own creates lock the twin's row (user_cap_full_or_reply): so does this
         * one, so that the two count one after the other */
        if (db_kind_of(db) == DB_POSTGRES) {
            db_stmt *lock = db_query(db, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", "i",
                                     (int64_t)job->key.user);
            db_status lock_rc = db_step(lock);
            db_done(lock);
            if (lock_rc != DB_ROW && lock_rc != DB_DONE)
                return write_result_of_db(lock_rc);
        }
    }
    bool full;
    db_status rc = user_cap_full_or_reply(db, req, for_twin ? &active_test_keys : &active_keys,
                                          req->app->cfg.max_api_keys, &full);
    if (rc != DB_DONE || full)
        return write_result_of_db(rc);
    /* the key itself is in this answer, and only here */
    const secret_member key = {"api_key", job->key.key, ROTATE_API_KEY};
    return write_result_of_db(
        resource_created_with_secret(req, &api_key_resource, api_key_insert(db, &job->key), &key));
}

static step_result key_stored(request *req, void *arg)
{
    (void)arg;
    write_result w = req->write_result;
    if (w == WRITE_OK && req->status == 201)
        reply_header(req, "Cache-Control", "no-store");
    reply_not_stored(req, w, "API key", NULL);
    return STEP_DONE;
}

step_result api_keys_create(request *req, void *prepared)
{
    (void)prepared;
    const api_key_input *in = req->input;
    key_job *job = arena_alloc(&req->arena, sizeof *job);
    job->req = req;
    uint64_t id;
    int64_t created_at;
    if (!new_row_id_or_reply(req, &id, &created_at))
        return STEP_DONE;
    /* a key of the request's own mode unless asked; a test key never makes a live one */
    bool test = in->mode ? !strcmp(in->mode, "test") : req->user.test;
    if (req->user.test && !test) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "mode",
                            "a test key can make test keys only; make live keys with a live key");
        return STEP_DONE;
    }
    int64_t twin_created_at;
    if (test && !req->user.test && !new_row_id_or_reply(req, &job->twin_id, &twin_created_at))
        return STEP_DONE;
    api_key_generate(&job->key, id, req->user.id, req->user.owner, test, in->name, created_at);
    /* the Idempotency-Key, when sent, is claimed in this same job (commit_response_then) */
    return commit_response_then(req, insert_key, job, key_stored, NULL);
}

typedef struct revoke_job {
    request *req;
    uint64_t key_id, user;
} revoke_job;

static write_result revoke_key(db_conn *db, void *arg)
{
    revoke_job *job = arg;
    db_stmt *st = api_key_revoke(db, job->key_id, job->user, now_us());
    if (!st) /* the update or its read failed: a database error, not a refusal */
        return WRITE_FAILED;
    resource_answer_get(job->req, &api_key_resource, st);
    return WRITE_OK;
}

static step_result key_revoked(request *req, void *arg)
{
    (void)arg;
    if (req->write_result != WRITE_OK) {
        reply_error(req, ERR_INTERNAL, "the API key could not be revoked");
        return STEP_DONE;
    }
    /* This node forgets the key at once; the others once their cache entry expires. */
    if (req->status == 200)
        auth_cache_clear(req->app->auth);
    return STEP_DONE;
}

step_result api_keys_revoke(request *req, void *prepared)
{
    (void)prepared;
    revoke_job *job = arena_alloc(&req->arena, sizeof *job);
    *job = (revoke_job){.req = req, .user = req->user.id};
    if (!path_id_or_reply(req, 0, "key", &job->key_id))
        return STEP_DONE;
    if (job->key_id == req->user.key_id) {
        reply_error(req, ERR_API_KEY_IN_USE,
                    "this request was made with that key; revoke it with another of your keys");
        return STEP_DONE;
    }
    return request_write_then(req, revoke_key, job, key_revoked);
}
