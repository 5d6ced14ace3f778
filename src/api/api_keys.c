/* The caller's own API keys (§13): GET and POST /v1/api_keys, DELETE /v1/api_keys/{id}.
 * POST takes no Idempotency-Key on purpose: its answer holds the new key, and the idempotency
 * engine would keep a copy of it in plain text. A request cannot revoke the key it was made with
 * (409 api_key_in_use): rotate by creating the new key, moving clients to it, then revoking the
 * old one with the new one. */
#include "api/api_keys.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"
#include "server/auth.h"

void api_key_generate(new_api_key *k, uint64_t id, uint64_t user, const char *name,
                      int64_t created_at)
{
    memset(k, 0, sizeof *k);
    k->id = id;
    k->user = user;
    k->name = name;
    k->created_at = created_at;
    auth_new_key(k->key, k->hash);
    snprintf(k->prefix, sizeof k->prefix, "%.*s", API_KEY_PREFIX_LEN, k->key);
}

db_status api_key_insert(db_conn *db, const new_api_key *k)
{
    return db_exec(db,
                   "INSERT INTO api_keys (id, user_id, name, key_hash, prefix, status, created_at) "
                   "VALUES ($1, $2, $3, $4, $5, 'active', $6)",
                   "iisssi", (int64_t)k->id, (int64_t)k->user, k->name, k->hash, k->prefix,
                   k->created_at);
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

json_t *api_key_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:o, s:o, s:s, s:s, s:o, s:o}", "id",
                     json_id("key", (uint64_t)db_int(st, 0)), "object", "api_key", "user_id",
                     json_id("usr", (uint64_t)db_int(st, 1)), "name",
                     json_string_or_null(db_text(st, 2)), "prefix", db_text(st, 3), "status",
                     db_text(st, 4), "created_at", json_time(db_int(st, 5)), "revoked_at",
                     db_is_null(st, 6) ? json_null() : json_time(db_int(st, 6)));
}

static const char *const key_statuses[] = {"active", "revoked", NULL};

static const list_query api_keys_list_query = {
    .name = "api_keys",
    .select = "SELECT " API_KEY_COLUMNS " FROM api_keys",
    .parent_column = "user_id",
    .created_index = 5,
    .id_index = 0,
    .status_column = "status",
    .statuses = key_statuses,
    .to_json = api_key_json,
};

void api_keys_list(request *req)
{
    list_page(req, &api_keys_list_query, req->user.id, NULL);
}

static int insert_key(db_conn *db, void *arg)
{
    return api_key_insert(db, arg) == DB_DONE ? 0 : -1;
}

void api_keys_create(request *req)
{
    static const body_field fields[] = {
        {"name", FIELD_STRING, false, 1, 100},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return;
    new_api_key key;
    uint64_t id = app_next_id(req->app);
    api_key_generate(&key, id, req->user.id, body_string(req, "name"), created_at_of(id));
    if (store_write(req->app->store, insert_key, &key) != 0) {
        reply_error(req, ERR_INTERNAL, "the API key could not be stored");
        return;
    }
    json_t *body =
        json_pack("{s:o, s:s, s:o, s:o, s:s, s:s, s:o, s:n, s:s}", "id", json_id("key", id),
                  "object", "api_key", "user_id", json_id("usr", req->user.id), "name",
                  json_string_or_null(key.name), "prefix", key.prefix, "status", "active",
                  "created_at", json_time(key.created_at), "revoked_at", "api_key", key.key);
    reply_header(req, "Cache-Control", "no-store"); /* the key is in this answer, and only here */
    char id_text[32];
    snprintf(id_text, sizeof id_text, "%s", json_string_value(json_object_get(body, "id")));
    reply_created(req, "/v1/api_keys", id_text, body);
}

typedef struct revoke_job {
    uint64_t key_id, user;
    json_t *key; /* the key after the job; NULL: no such key of this user */
} revoke_job;

static int revoke_key(db_conn *db, void *arg)
{
    revoke_job *job = arg;
    db_stmt *st = api_key_revoke(db, job->key_id, job->user, now_us());
    if (!st)
        return -1;
    json_decref(job->key); /* a job may run again after a conflict */
    job->key = db_step(st) == DB_ROW ? api_key_json(st) : NULL;
    db_done(st);
    return 0;
}

void api_keys_revoke(request *req)
{
    revoke_job job = {.user = req->user.id};
    if (!path_id_or_reply(req, 0, "key", &job.key_id))
        return;
    if (job.key_id == req->user.key_id) {
        reply_error(req, ERR_API_KEY_IN_USE,
                    "this request was made with that key; revoke it with another of your keys");
        return;
    }
    if (store_write(req->app->store, revoke_key, &job) != 0) {
        json_decref(job.key);
        reply_error(req, ERR_INTERNAL, "the API key could not be revoked");
        return;
    }
    if (!job.key) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such API key");
        return;
    }
    /* This node forgets the key at once; the others once their cache entry expires. */
    auth_cache_clear(req->app->auth);
    reply_json(req, 200, job.key);
}
