/* Building responses: JSON bodies, RFC 9457 problem+json errors, extra headers. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/jsonw.h"
#include "http/server.h"
#include "request/request.h"

const char *request_header(request *req, const char *name)
{
    return req->exchange ? http_exchange_header(req->exchange, name) : NULL;
}

const char *request_query(request *req, const char *name)
{
    return req->exchange ? http_exchange_query(req->exchange, name) : NULL;
}

/* A new body: what was noted about the last one goes with it. */
static void forget_body(request *req)
{
    free(req->resp_body);
    free(req->resp_kept_body);
    req->resp_body = req->resp_kept_body = NULL;
    req->resp_event = 0;
    req->resp_says_mode = false;
}

static void set_body(request *req, int status, char *body)
{
    forget_body(req);
    req->status = status;
    req->resp_body = body;
    req->resp_len = body ? strlen(body) : 0;
}

void reply_json(request *req, int status, json_t *body)
{
    req->error = ERR_NONE;
    set_body(req, status, body ? json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL);
    json_decref(body);
}

void jw_init_answer(request *req, jsonw *w)
{
    jw_init(w);
    /* A write's answer may be stored (an Idempotency-Key's, an event's data), and stored
     * answers are kept without their mode and marked on their way out (docs/modes.md): only a
     * read's answer, never stored, is written with it. */
    bool read = !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
    if (req->authenticated && read && !req->idem)
        w->livemode = !req->user.test;
}

void reply_jsonw(request *req, int status, jsonw *w)
{
    forget_body(req);
    req->error = ERR_NONE;
    req->status = status;
    req->resp_says_mode = w->livemode >= 0 || !req->authenticated;
    req->resp_body = jw_take(w, &req->resp_len);
}

void reply_keep_instead(request *req, jsonw *kept)
{
    free(req->resp_kept_body);
    req->resp_kept_body = jw_take(kept, NULL);
}

void reply_raw(request *req, int status, const char *body, size_t len)
{
    forget_body(req);
    req->status = status;
    req->resp_body = malloc(len + 1);
    memcpy(req->resp_body, body, len);
    req->resp_body[len] = '\0';
    req->resp_len = len;
}

static void drop_header(request *req, const char *name)
{
    for (int i = 0; i < req->resp_header_count; i++)
        if (!strcasecmp(req->resp_headers[i].name, name)) {
            req->resp_headers[i] = req->resp_headers[--req->resp_header_count];
            return;
        }
}

void reply_error_extra(request *req, payd_error err, const char *detail, json_t *extra)
{
    const problem_def *p = problem_lookup(err);
    /* an error replaces a success set by a job whose commit then failed: its Location and
     * ETag named something that does not exist */
    drop_header(req, "Location");
    drop_header(req, "ETag");
    json_t *body = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "type", "about:blank", "title",
                             p->title, "status", p->status, "detail", detail ? detail : p->title,
                             "code", p->code, "request_id", req->request_id);
    if (extra)
        json_object_update(body, extra);
    json_decref(extra);
    set_body(req, p->status, json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER));
    json_decref(body);
    req->error = err;
    req->error_detail = arena_strdup(&req->arena, detail ? detail : p->title);
}

void reply_error(request *req, payd_error err, const char *detail)
{
    reply_error_extra(req, err, detail, NULL);
}

void reply_header(request *req, const char *name, const char *value)
{
    for (int i = 0; i < req->resp_header_count; i++)
        if (!strcasecmp(req->resp_headers[i].name, name)) {
            req->resp_headers[i].value = arena_strdup(&req->arena, value);
            return;
        }
    if (req->resp_header_count == MAX_RESP_HEADERS)
        return;
    req->resp_headers[req->resp_header_count].name = name;
    req->resp_headers[req->resp_header_count].value = arena_strdup(&req->arena, value);
    req->resp_header_count++;
}

void reply_forget(request *req, int header_count)
{
    set_body(req, 0, NULL);
    req->error = ERR_NONE;
    req->error_detail = NULL;
    if (header_count < req->resp_header_count)
        req->resp_header_count = header_count;
}

const char *response_header(request *req, const char *name)
{
    for (int i = 0; i < req->resp_header_count; i++)
        if (!strcasecmp(req->resp_headers[i].name, name))
            return req->resp_headers[i].value;
    return NULL;
}
