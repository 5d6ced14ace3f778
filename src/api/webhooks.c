/* Webhook endpoints (§15): create (the secret is shown only then), list, get, update, delete,
 * and each endpoint's delivery attempts. Deliveries themselves are src/webhook/delivery.c. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "webhook/delivery.h"

#define ENDPOINT_COLUMNS "id, url, events, description, disabled, created_at, updated_at"
#define MAX_URL          2048

/* The stored ",a,b," list as a JSON array. */
static json_t *events_array(const char *stored)
{
    json_t *out = json_array();
    const char *p = stored + (*stored == ',');
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (end > p)
            json_array_append_new(out, json_stringn(p, (size_t)(end - p)));
        p = *end ? end + 1 : end;
    }
    return out;
}

static json_t *endpoint_json(db_stmt *st)
{
    return json_pack(
        "{s:o, s:s, s:s, s:o, s:o, s:b, s:o, s:o}", "id", json_id("we", (uint64_t)db_int(st, 0)),
        "object", "webhook_endpoint", "url", db_text(st, 1), "events", events_array(db_text(st, 2)),
        "description", json_string_or_null(db_text(st, 3)), "disabled", db_int(st, 4) != 0,
        "created_at", json_time(db_int(st, 5)), "updated_at", json_time(db_int(st, 6)));
}

/* ---- validation ---- */

static bool unknown_fields_or_reply(request *req, const char *const *allowed)
{
    const char *name;
    json_t *value;
    json_object_foreach(req->json, name, value)
    {
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = !strcmp(*a, name);
        if (!known) {
            char detail[160];
            snprintf(detail, sizeof detail, "'%.100s' is not a parameter of this request", name);
            reply_invalid_param(req, ERR_UNKNOWN_PARAMETER, name, detail);
            return false;
        }
    }
    return true;
}

static bool host_is_private(const char *host)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char bare[256];
    size_t len = strlen(host);
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof bare) {
        memcpy(bare, host + 1, len - 2);
        bare[len - 2] = '\0';
        host = bare;
    }
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return false; /* unresolvable now; the delivery's own socket check refuses it later */
    bool priv = false;
    for (struct addrinfo *r = res; r && !priv; r = r->ai_next)
        priv = webhook_address_private(r->ai_addr);
    freeaddrinfo(res);
    return priv;
}

/* http(s) only, a host, no user name or password; with --webhook-deny-private no address of
 * the host may be loopback or private. */
static bool url_or_reply(request *req, json_t *value)
{
    const char *detail = NULL;
    if (!json_is_string(value) || json_string_length(value) < 1 ||
        json_string_length(value) > MAX_URL ||
        strlen(json_string_value(value)) != json_string_length(value)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "url", "'url' must be a URL string");
        return false;
    }
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL, *password = NULL;
    if (curl_url_set(u, CURLUPART_URL, json_string_value(value), 0) != CURLUE_OK)
        detail = "'url' is not a valid absolute URL";
    else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
             (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0))
        detail = "'url' must use http or https";
    else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
             curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK)
        detail = "'url' must not carry credentials";
    else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host)
        detail = "'url' must name a host";
    else if (req->app->cfg.webhook_deny_private && host_is_private(host))
        detail = "'url' points to a loopback or private address, which this server refuses";
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(password);
    curl_url_cleanup(u);
    if (detail)
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "url", detail);
    return !detail;
}

/* ["*"] or known types, without repeats, stored as ",a,b," so the outbox INSERT can match. */
static bool events_or_reply(request *req, json_t *value, char *out, size_t cap)
{
    size_t n = json_is_array(value) ? json_array_size(value) : 0;
    bool ok = n >= 1 && n <= 16;
    size_t len = (size_t)snprintf(out, cap, ",");
    for (size_t i = 0; i < n && ok; i++) {
        const char *t = json_string_value(json_array_get(value, i));
        bool known = t && !strcmp(t, "*") && n == 1;
        for (const char *const *e = event_types; t && *e && !known; e++)
            known = !strcmp(*e, t);
        char needle[64];
        snprintf(needle, sizeof needle, ",%s,", t ? t : "");
        ok = known && !strstr(out, needle);
        if (ok)
            len += (size_t)snprintf(out + len, cap - len, "%s,", t);
    }
    if (!ok)
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "events",
                            "'events' must be [\"*\"] or a list of distinct event types");
    return ok;
}

static bool description_or_reply(request *req, json_t *value, const char **out)
{
    *out = NULL;
    if (!value || json_is_null(value))
        return true;
    if (!json_is_string(value) || json_string_length(value) > 200 ||
        strlen(json_string_value(value)) != json_string_length(value)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "description",
                            "'description' must be a string of at most 200 characters");
        return false;
    }
    *out = json_string_value(value);
    return true;
}

/* ---- create ---- */

typedef struct new_endpoint {
    request *req;
    uint64_t id;
    const char *url, *description;
    char events[512];
    char secret[80];
    int64_t now;
} new_endpoint;

static int insert_endpoint(db_conn *db, void *arg)
{
    new_endpoint *e = arg;
    db_status rc = db_exec(db,
                           "INSERT INTO webhook_endpoints (id, user_id, url, events, description, "
                           "secret, disabled, created_at, updated_at) "
                           "VALUES ($1, $2, $3, $4, $5, $6, 0, $7, $7)",
                           "iissssi", (int64_t)e->id, (int64_t)e->req->user.id, e->url, e->events,
                           e->description, e->secret, e->now);
    if (rc != DB_DONE)
        return rc;
    db_stmt *st = db_query(db, "SELECT " ENDPOINT_COLUMNS " FROM webhook_endpoints WHERE id = $1",
                           "i", (int64_t)e->id);
    if (db_step(st) != DB_ROW) {
        db_done(st);
        return DB_ERROR;
    }
    json_t *body = endpoint_json(st);
    db_done(st);
    json_object_set_new(body, "secret", json_string(e->secret));
    char id[ID_STR_MAX];
    id_format(e->id, "we", id);
    reply_created(e->req, "/v1/webhook_endpoints", id, body);
    return 0;
}

void webhooks_create(request *req)
{
    static const char *const allowed[] = {"url", "events", "description", NULL};
    new_endpoint e = {.req = req};
    if (!unknown_fields_or_reply(req, allowed))
        return;
    json_t *url = json_object_get(req->json, "url");
    json_t *events = json_object_get(req->json, "events");
    if (!url || json_is_null(url)) {
        reply_invalid_param(req, ERR_MISSING_PARAMETER, "url", "'url' is required");
        return;
    }
    if (!events || json_is_null(events)) {
        reply_invalid_param(req, ERR_MISSING_PARAMETER, "events", "'events' is required");
        return;
    }
    if (!url_or_reply(req, url) || !events_or_reply(req, events, e.events, sizeof e.events) ||
        !description_or_reply(req, json_object_get(req->json, "description"), &e.description))
        return;
    e.url = json_string_value(url);
    uint8_t raw[24];
    if (RAND_bytes(raw, sizeof raw) != 1) {
        reply_error(req, ERR_INTERNAL, "no randomness for the secret");
        return;
    }
    int len = snprintf(e.secret, sizeof e.secret, "whsec_");
    for (size_t i = 0; i < sizeof raw; i++)
        len += snprintf(e.secret + len, sizeof e.secret - (size_t)len, "%02x", raw[i]);
    e.id = app_next_id(req->app);
    e.now = created_at_of(e.id);
    if (commit_response(req, insert_endpoint, &e) != 0)
        reply_error(req, ERR_INTERNAL, "the webhook endpoint could not be stored");
}

/* ---- read ---- */

void webhooks_get(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "we", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query(
        db, "SELECT " ENDPOINT_COLUMNS " FROM webhook_endpoints WHERE id = $1 AND user_id = $2",
        "ii", (int64_t)id, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW)
        reply_json(req, 200, endpoint_json(st));
    else
        reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
    db_done(st);
}

static const list_query endpoints_list_query = {
    .name = "webhook_endpoints",
    .select = "SELECT " ENDPOINT_COLUMNS " FROM webhook_endpoints",
    .parent_column = "user_id",
    .created_index = 5,
    .id_index = 0,
    .to_json = endpoint_json,
};

void webhooks_list(request *req)
{
    list_page(req, &endpoints_list_query, req->user.id, NULL);
}

/* ---- update, delete ---- */

typedef struct endpoint_change {
    request *req;
    uint64_t id;
    const char *url;
    char events[512]; /* "" when unchanged */
    int disabled;     /* -1 when unchanged */
    bool delete;
    int64_t now;
} endpoint_change;

static int change_endpoint(db_conn *db, void *arg)
{
    endpoint_change *c = arg;
    request *req = c->req;
    db_status rc;
    if (c->delete) {
        rc = db_exec(db, "DELETE FROM webhook_endpoints WHERE id = $1 AND user_id = $2", "ii",
                     (int64_t)c->id, (int64_t)req->user.id);
        if (rc != DB_DONE)
            return rc;
        if (db_changes(db) == 0) {
            reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
            return 0;
        }
        /* what was still due goes with it; the attempts stay readable until retention */
        rc = db_exec(db, "DELETE FROM webhook_deliveries WHERE endpoint_id = $1", "i",
                     (int64_t)c->id);
        if (rc != DB_DONE)
            return rc;
        reply_json(req, 200,
                   json_pack("{s:o, s:s, s:b}", "id", json_id("we", c->id), "object",
                             "webhook_endpoint", "deleted", 1));
        return 0;
    }
    rc = db_exec(db,
                 "UPDATE webhook_endpoints SET url = COALESCE($3, url), "
                 "events = CASE WHEN $4 = '' THEN events ELSE $4 END, "
                 "disabled = CASE WHEN $5 < 0 THEN disabled ELSE $5 END, updated_at = $6 "
                 "WHERE id = $1 AND user_id = $2",
                 "iissii", (int64_t)c->id, (int64_t)req->user.id, c->url, c->events,
                 (int64_t)c->disabled, c->now);
    if (rc != DB_DONE)
        return rc;
    db_stmt *st = db_query(
        db, "SELECT " ENDPOINT_COLUMNS " FROM webhook_endpoints WHERE id = $1 AND user_id = $2",
        "ii", (int64_t)c->id, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW)
        reply_json(req, 200, endpoint_json(st));
    else
        reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
    db_done(st);
    return 0;
}

void webhooks_update(request *req)
{
    static const char *const allowed[] = {"url", "events", "disabled", "description", NULL};
    endpoint_change c = {.req = req, .disabled = -1, .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &c.id) || !unknown_fields_or_reply(req, allowed))
        return;
    json_t *url = json_object_get(req->json, "url");
    json_t *events = json_object_get(req->json, "events");
    json_t *disabled = json_object_get(req->json, "disabled");
    if (json_object_get(req->json, "description")) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "description",
                            "'description' is set only at creation");
        return;
    }
    if (url && !json_is_null(url)) {
        if (!url_or_reply(req, url))
            return;
        c.url = json_string_value(url);
    }
    if (events && !json_is_null(events) && !events_or_reply(req, events, c.events, sizeof c.events))
        return;
    if (disabled && !json_is_null(disabled)) {
        if (!json_is_boolean(disabled)) {
            reply_invalid_param(req, ERR_INVALID_PARAMETER, "disabled",
                                "'disabled' must be true or false");
            return;
        }
        c.disabled = json_is_true(disabled);
    }
    if (store_write(req->app->store, change_endpoint, &c) != 0)
        reply_error(req, ERR_INTERNAL, "the webhook endpoint could not be updated");
}

void webhooks_delete(request *req)
{
    endpoint_change c = {.req = req, .delete = true, .disabled = -1, .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &c.id))
        return;
    if (store_write(req->app->store, change_endpoint, &c) != 0)
        reply_error(req, ERR_INTERNAL, "the webhook endpoint could not be deleted");
}

/* ---- attempts ---- */

#define ATTEMPT_COLUMNS                                                                            \
    "id, event_id, attempt, response_status, latency_ms, error, next_attempt_at, outcome, "        \
    "created_at, endpoint_id"

static json_t *attempt_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:o, s:o, s:I, s:o, s:I, s:o, s:s, s:o, s:o}", "id",
                     json_id("wha", (uint64_t)db_int(st, 0)), "object", "webhook_attempt",
                     "webhook_endpoint_id", json_id("we", (uint64_t)db_int(st, 9)), "event_id",
                     json_id("evt", (uint64_t)db_int(st, 1)), "attempt", (json_int_t)db_int(st, 2),
                     "response_status",
                     db_is_null(st, 3) ? json_null() : json_integer(db_int(st, 3)), "latency_ms",
                     (json_int_t)db_int(st, 4), "error", json_string_or_null(db_text(st, 5)),
                     "outcome", db_text(st, 7), "next_attempt_at",
                     db_is_null(st, 6) ? json_null() : json_time(db_int(st, 6)), "created_at",
                     json_time(db_int(st, 8)));
}

static const list_query attempts_list_query = {
    .name = "webhook_attempts",
    .select = "SELECT " ATTEMPT_COLUMNS " FROM webhook_attempts",
    .parent_column = "endpoint_id",
    .created_index = 8,
    .id_index = 0,
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
