/* Webhook endpoints (§15): create (the secret is shown only then, and kept sealed:
 * webhook/secret.h), list, get, update, delete, and each endpoint's delivery attempts (its
 * secret's rotation: webhook_rotation.c). A user
 * holds at most --max-webhook-endpoints. Deliveries themselves are src/webhook/delivery.c. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common.h"
#include "api/enums.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "api/webhook_endpoints.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "webhook/address_policy.h"
#include "webhook/attempt_guard.h"
#include "webhook/delivery.h"
#include "webhook/outbox.h"
#include "webhook/secret.h"

#define MAX_URL 2048

const resource endpoint_resource = {
    .noun = "webhook endpoint",
    RESOURCE_TABLE("webhook_endpoints", ENDPOINT_COLUMNS, "user_id"),
    .id_prefix = "we",
    .path = "/v1/webhook_endpoints/",
    .write_row = webhook_endpoint_write,
};

/* ---- validation ---- */

/* The url field: http(s) only, a host, no user name or password. */
static bool url_check(const field *f, json_t *value, void *out, arena *a, const char **detail)
{
    (void)f;
    const char *url = json_string_value(value);
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL, *password = NULL;
    *detail = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        *detail = "'url' is not a valid absolute URL";
    else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
             (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
        *detail = "'url' must use http or https";
    else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
             curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
        *detail = "'url' must not carry credentials";
    else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
        *detail = "'url' must name a host";
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    if (!*detail)
        *(const char **)out = arena_strdup(a, url);
    return !*detail;
}

/* With --webhook-deny-private every address of the url's host must be global unicast and not
 * this server's own (webhook/address_policy.h). It takes a DNS lookup, so it runs in a step on a
 * thread that may block (url_checked_then), not with the declared checks. */
static bool url_allowed_or_reply(request *req, const char *url)
{
    if (!url || !req->app->cfg.webhook_deny_private)
        return true;
    CURLU *u = curl_url();
    char *host = NULL;
    bool priv = curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
                curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
                !webhook_host_allowed(host);
    curl_free(host);
    curl_url_cleanup(u);
    if (priv)
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "url",
                            "'url' points to an address that is not global unicast (private, "
                            "loopback, reserved or this server's own), which this server refuses");
    return !priv;
}

/* Runs next(req, ctx), on a worker when url must be looked up (url_allowed_or_reply): the
 * lookup may block, and the thread a step starts on must not. */
static step_result url_checked_then(request *req, const char *url, request_step next, void *ctx)
{
    if (url && req->app->cfg.webhook_deny_private)
        return request_blocking_then(req, next, ctx);
    return next(req, ctx);
}

/* The events field: ["*"] or distinct known types, kept as ",a,b," so the outbox INSERT can
 * match. */
static bool events_check(const field *f, json_t *value, void *out, arena *a, const char **detail)
{
    size_t n = json_array_size(value);
    char list[512];
    size_t len = (size_t)snprintf(list, sizeof list, ",");
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        const char *t = json_string_value(json_array_get(value, i));
        bool known = false;
        for (const char *const *e = f->values; t && *e && !known; e++)
            known = !strcmp(*e, t) && (n == 1 || strcmp(t, "*") != 0); /* "*" only alone */
        char needle[64];
        snprintf(needle, sizeof needle, ",%s,", t ? t : "");
        ok = known && !strstr(list, needle);
        if (ok)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s,", t);
    }
    if (!ok)
        *detail = "'events' must be [\"*\"] or a list of distinct event types";
    else
        *(const char **)out = arena_strdup(a, list);
    return ok;
}

typedef struct endpoint_input {
    const char *url;
    const char *events; /* ",a,b,"; NULL: not given */
    const char *description;
    int disabled; /* -1: not given */
} endpoint_input;

#define URL_FIELD                                                                                  \
    .name = "url", .kind = KIND_CUSTOM, IN(endpoint_input, url), .type = "string", .min = 1,       \
    .max = MAX_URL, .format = "uri", .check = url_check
#define EVENTS_FIELD                                                                               \
    .name = "events", .kind = KIND_CUSTOM, IN(endpoint_input, events), .type = "array", .min = 1,  \
    .max = 16, .values = webhook_event_choices, .check = events_check
static const field endpoint_fields[] = {
    {URL_FIELD, .required = true},
    {EVENTS_FIELD, .required = true},
    DESCRIPTION_FIELD(endpoint_input, description, 200),
};
const schema webhooks_create_body = SCHEMA(endpoint_input, endpoint_fields);
/* the description is set at creation only */
static const field endpoint_patch_fields[] = {
    {URL_FIELD},
    {EVENTS_FIELD},
    {.name = "disabled", .kind = KIND_BOOLEAN, IN(endpoint_input, disabled), .absent = -1},
};
const schema webhooks_update_body = SCHEMA(endpoint_input, endpoint_patch_fields);

/* ---- create ---- */

typedef struct new_endpoint {
    request *req;
    uint64_t id;
    const char *url, *description, *events;
    char secret[WEBHOOK_SECRET_MAX];
    char sealed[WEBHOOK_SEALED_MAX]; /* what the row keeps */
    int64_t now;
} new_endpoint;

/* What a replay shows instead of the secret (resource_created_with_secret). */
#define ROTATE_ENDPOINT_SECRET                                                                     \
    "the secret is shown only in the first answer to this request; to rotate it, create a new "    \
    "endpoint with the same url and events, move your receiver to its secret, then delete this "   \
    "one"

static write_result insert_endpoint(db_conn *db, void *arg)
{
    new_endpoint *e = arg;
    request *req = e->req;
    static const user_cap endpoints = {"SELECT COUNT(*) FROM webhook_endpoints WHERE user_id = $1",
                                       ERR_WEBHOOK_ENDPOINT_LIMIT_REACHED, "webhook endpoints",
                                       "delete one to make another"};
    bool full;
    db_status rc =
        user_cap_full_or_reply(db, req, &endpoints, req->app->cfg.max_webhook_endpoints, &full);
    if (rc != DB_DONE || full)
        return write_result_of_db(rc);
    const secret_member secret = {"secret", e->secret, ROTATE_ENDPOINT_SECRET};
    return write_result_of_db(resource_created_with_secret(
        req, &endpoint_resource,
        db_query(db,
                 "INSERT INTO webhook_endpoints (id, user_id, url, events, description, secret, "
                 "disabled, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7) "
                 "RETURNING " ENDPOINT_COLUMNS,
                 "iissssi", (int64_t)e->id, (int64_t)req->user.id, e->url, e->events,
                 e->description, e->sealed, e->now),
        &secret));
}

/* After the url's check: the secret, then the cap, the row and the key's answer (the key claimed
 * in the same job) in one commit. */
static step_result create_endpoint(request *req, void *arg)
{
    new_endpoint *e = arg;
    if (!url_allowed_or_reply(req, e->url))
        return STEP_DONE;
    if (!new_row_id_or_reply(req, &e->id, &e->now))
        return STEP_DONE;
    if (webhook_secret_new(e->secret) != 0 ||
        webhook_secret_seal(req->app->cursor_key, e->id, e->secret, e->sealed) != 0) {
        reply_error(req, ERR_INTERNAL, "no randomness for the secret");
        return STEP_DONE;
    }
    return resource_commit_then_answer(req, insert_endpoint, e, "webhook endpoint", NULL);
}

step_result webhooks_create(request *req, void *prepared)
{
    (void)prepared;
    const endpoint_input *in = req->input;
    new_endpoint *e = arena_alloc(&req->arena, sizeof *e);
    *e = (new_endpoint){
        .req = req, .url = in->url, .events = in->events, .description = in->description};
    return url_checked_then(req, e->url, create_endpoint, e);
}

/* ---- read ---- */

void webhooks_get(request *req)
{
    resource_get(req, &endpoint_resource);
}

static const list_query endpoints_list_query = {
    .name = "webhook_endpoints",
    .of = &endpoint_resource,
    .parent_column = "user_id",
};

void webhooks_list(request *req)
{
    list_page(req, &endpoints_list_query, req->user.id, NULL);
}

/* ---- update, delete ---- */

typedef struct endpoint_change {
    request *req;
    uint64_t id;
    const char *url, *events; /* NULL when unchanged */
    int disabled;             /* -1 when unchanged */
    bool delete;
    int64_t now;
} endpoint_change;

static write_result change_endpoint(db_conn *db, void *arg)
{
    endpoint_change *c = arg;
    request *req = c->req;
    db_status rc;
    if (c->delete) {
        rc = db_exec(db, "DELETE FROM webhook_endpoints WHERE id = $1 AND user_id = $2", "ii",
                     (int64_t)c->id, (int64_t)req->user.id);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        if (db_changes(db) == 0) {
            reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
            return WRITE_OK;
        }
        /* what was still due goes with it; the attempts stay readable until retention */
        rc = db_exec(db, "DELETE FROM webhook_deliveries WHERE endpoint_id = $1", "i",
                     (int64_t)c->id);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        reply_json(req, 200,
                   json_pack("{s:o, s:s, s:b}", "id", json_id("we", c->id), "object",
                             "webhook_endpoint", "deleted", 1));
        return WRITE_OK;
    }
    rc = db_exec(db,
                 "UPDATE webhook_endpoints SET url = COALESCE($3, url), "
                 "events = CASE WHEN $4 = '' THEN events ELSE $4 END, "
                 "disabled = CASE WHEN $5 < 0 THEN disabled ELSE $5 END, updated_at = $6, "
                 /* enabled again: its streak of failures starts over (webhook/recovery.h) */
                 "failing_since = CASE WHEN $5 = 0 THEN NULL ELSE failing_since END "
                 "WHERE id = $1 AND user_id = $2",
                 "iissii", (int64_t)c->id, (int64_t)req->user.id, c->url,
                 c->events ? c->events : "", (int64_t)c->disabled, c->now);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    resource_answer_get(
        req, &endpoint_resource,
        db_query(db, endpoint_resource.get_sql, "ii", (int64_t)c->id, (int64_t)req->user.id));
    return WRITE_OK;
}

static step_result update_endpoint(request *req, void *arg)
{
    endpoint_change *c = arg;
    if (!url_allowed_or_reply(req, c->url))
        return STEP_DONE;
    return resource_write_then_answer(req, change_endpoint, c,
                                      "the webhook endpoint could not be updated");
}

step_result webhooks_update(request *req, void *prepared)
{
    (void)prepared;
    const endpoint_input *in = req->input;
    endpoint_change *c = arena_alloc(&req->arena, sizeof *c);
    *c = (endpoint_change){.req = req,
                           .url = in->url,
                           .events = in->events,
                           .disabled = in->disabled,
                           .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &c->id))
        return STEP_DONE;
    return url_checked_then(req, c->url, update_endpoint, c);
}

step_result webhooks_delete(request *req, void *prepared)
{
    (void)prepared;
    endpoint_change *c = arena_alloc(&req->arena, sizeof *c);
    *c = (endpoint_change){.req = req, .delete = true, .disabled = -1, .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &c->id))
        return STEP_DONE;
    return resource_write_then_answer(req, change_endpoint, c,
                                      "the webhook endpoint could not be deleted");
}

/* ---- attempts ---- */

#define ATTEMPT_COLUMNS                                                                            \
    "id, event_id, attempt, response_status, latency_ms, error, next_attempt_at, outcome, "        \
    "created_at, endpoint_id"

static json_t *attempt_json(db_stmt *st)
{
    return json_pack(
        "{s:o, s:s, s:o, s:o, s:I, s:o, s:I, s:o, s:s, s:o, s:o}", "id",
        json_id("wha", (uint64_t)db_int(st, 0)), "object", "webhook_attempt", "webhook_endpoint_id",
        json_id("we", (uint64_t)db_int(st, 9)), "event_id", json_id("evt", (uint64_t)db_int(st, 1)),
        "attempt", (json_int_t)db_int(st, 2), "response_status",
        db_is_null(st, 3) ? json_null() : json_integer(db_int(st, 3)), "latency_ms",
        (json_int_t)db_int(st, 4), "error", json_string_or_null(webhook_error_word(db_text(st, 5))),
        "outcome", db_text(st, 7), "next_attempt_at",
        db_is_null(st, 6) ? json_null() : json_time(db_int(st, 6)), "created_at",
        json_time(db_int(st, 8)));
}

static const list_query attempts_list_query = {
    .name = "webhook_attempts",
    .select = "SELECT " ATTEMPT_COLUMNS " FROM webhook_attempts",
    .parent_column = "endpoint_id",
    .to_json = attempt_json,
};

void webhooks_deliveries(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "we", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query(db, "SELECT 1 FROM webhook_endpoints WHERE id = $1 AND user_id = $2",
                           "ii", (int64_t)id, (int64_t)req->user.id);
    bool owned = db_step(st) == DB_ROW;
    db_done(st);
    if (!owned) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
        return;
    }
    list_page(req, &attempts_list_query, id, NULL);
}

/* ---- secrets stored before they were sealed ---- */

typedef struct plain_secret {
    int64_t endpoint_id;
    char *secret;
} plain_secret;

/* Every endpoint secret still in the clear, sealed where it is: how many, or -1. The UPDATE names
 * the plain text it replaces, so nodes starting together seal each row once. */
static int seal_plain_endpoint_secrets(db_conn *db, const uint8_t server_secret[32])
{
    db_stmt *st = db_query(db,
                           "SELECT id, secret FROM webhook_endpoints "
                           "WHERE substr(secret, 1, 7) <> 'sealed:'",
                           "");
    plain_secret *rows = NULL;
    size_t count = 0, cap = 0;
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            rows = realloc(rows, cap * sizeof *rows);
        }
        rows[count++] = (plain_secret){db_int(st, 0), strdup(db_text(st, 1))};
    }
    db_done(st);
    for (size_t i = 0; i < count && rc == DB_DONE; i++) {
        char sealed[WEBHOOK_SEALED_MAX];
        rc = webhook_secret_seal(server_secret, (uint64_t)rows[i].endpoint_id, rows[i].secret,
                                 sealed) == 0
                 ? db_exec(db,
                           "UPDATE webhook_endpoints SET secret = $2 WHERE id = $1 AND secret = $3",
                           "iss", rows[i].endpoint_id, sealed, rows[i].secret)
                 : DB_ERROR;
    }
    for (size_t i = 0; i < count; i++)
        free(rows[i].secret);
    free(rows);
    return rc == DB_DONE ? (int)count : -1;
}

/* A stored create answer that shows its secret ("…,"secret":"whsec_…"}", the member a create
 * adds last) as the answer a create stores now: the same with the secret redacted. NULL when
 * body is not such an answer. */
static char *redact_stored_answer(const char *body)
{
    const char *member = strstr(body, ",\"secret\":\"whsec_");
    const char *end = member ? strchr(member + strlen(",\"secret\":\""), '"') : NULL;
    if (!end || strcmp(end, "\"}") != 0)
        return NULL;
    jsonw w;
    jw_init(&w);
    char *row = malloc((size_t)(member - body) + 2);
    memcpy(row, body, (size_t)(member - body));
    memcpy(row + (member - body), "}", 2);
    jw_raw(&w, row, "{}");
    free(row);
    jw_object_reopen(&w);
    write_redacted_secret(&w, "secret", ROTATE_ENDPOINT_SECRET);
    jw_object_end(&w);
    return jw_take(&w, NULL);
}

typedef struct stored_answer {
    int64_t user_id;
    char *key, *body;
} stored_answer;

/* Every stored answer of an endpoint's create that shows its secret, redacted as a replay of a
 * create shows it now: how many, or -1. */
static int redact_stored_answers(db_conn *db)
{
    db_stmt *st = db_query(db,
                           "SELECT user_id, idem_key, response_body FROM idempotency_keys "
                           "WHERE method = 'POST' AND path = '/v1/webhook_endpoints' "
                           "AND response_body LIKE '%\"secret\":\"whsec%'",
                           "");
    stored_answer *rows = NULL;
    size_t count = 0, cap = 0;
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW) {
        char *redacted = redact_stored_answer(db_text(st, 2));
        if (!redacted)
            continue;
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            rows = realloc(rows, cap * sizeof *rows);
        }
        rows[count++] = (stored_answer){db_int(st, 0), strdup(db_text(st, 1)), redacted};
    }
    db_done(st);
    for (size_t i = 0; i < count && rc == DB_DONE; i++)
        rc = db_exec(db,
                     "UPDATE idempotency_keys SET response_body = $3 "
                     "WHERE user_id = $1 AND idem_key = $2",
                     "iss", rows[i].user_id, rows[i].key, rows[i].body);
    for (size_t i = 0; i < count; i++) {
        free(rows[i].key);
        free(rows[i].body);
    }
    free(rows);
    return rc == DB_DONE ? (int)count : -1;
}

int webhook_secrets_seal_existing(db_conn *db, const uint8_t server_secret[32])
{
    /* SQLite: the plain texts replaced are zeroed in their pages, not left in free space, and
     * once they are replaced the WAL, which still holds the old pages, is emptied */
    bool sqlite = db_kind_of(db) == DB_SQLITE;
    if ((sqlite && db_exec_script(db, "PRAGMA secure_delete = ON") != DB_DONE) ||
        db_exec(db, "BEGIN", "") != DB_DONE)
        return -1;
    int sealed = seal_plain_endpoint_secrets(db, server_secret);
    int redacted = sealed < 0 ? -1 : redact_stored_answers(db);
    if (redacted < 0 || db_exec(db, "COMMIT", "") != DB_DONE) {
        db_exec(db, "ROLLBACK", "");
        return -1;
    }
    if (sqlite && sealed + redacted > 0 &&
        db_exec_script(db, "PRAGMA wal_checkpoint(TRUNCATE)") != DB_DONE)
        return -1;
    return sqlite && db_exec_script(db, "PRAGMA secure_delete = OFF") != DB_DONE ? -1 : 0;
}
