/* Sending webhooks again (docs/webhooks.md, "Redelivery and recovery"): one event now, to one
 * endpoint or to every enabled endpoint that wants it, and every delivery of an endpoint that
 * failed since a time. Both answer 202 with what was queued; the delivery worker sends it. The
 * rows they change, and how a worker still holding an old lease is fenced: webhook/recovery.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "webhook/outbox.h"
#include "webhook/recovery.h"

typedef struct redeliver_input {
    input_id endpoint;
} redeliver_input;

static const field redeliver_fields[] = {
    {.name = "endpoint_id", .kind = KIND_ID, IN(redeliver_input, endpoint), .prefix = "we"},
};
const schema events_redeliver_body = SCHEMA(redeliver_input, redeliver_fields);

typedef struct recover_input {
    input_time since;
} recover_input;

static const field recover_fields[] = {
    {.name = "since", .kind = KIND_TIME, .required = true, IN(recover_input, since)},
};
const schema webhooks_recover_body = SCHEMA(recover_input, recover_fields);

typedef struct resend {
    request *req;
    uint64_t target;   /* the event (redeliver) or the endpoint (recover) */
    uint64_t endpoint; /* redeliver: the one endpoint named, 0 for every one that wants it */
    int64_t since, now;
} resend;

/* The caller's endpoint, enabled; else the 404 or the 409, and false. */
static bool endpoint_enabled_or_reply(db_conn *db, request *req, uint64_t endpoint, db_status *rc)
{
    db_stmt *st =
        db_query(db, "SELECT disabled FROM webhook_endpoints WHERE id = $1 AND user_id = $2", "ii",
                 (int64_t)endpoint, (int64_t)req->user.id);
    *rc = db_step(st);
    bool found = *rc == DB_ROW, disabled = found && db_int(st, 0) != 0;
    db_done(st);
    if (*rc == DB_ROW || *rc == DB_DONE) {
        *rc = DB_DONE;
        if (!found)
            reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
        else if (disabled)
            reply_error(req, ERR_WEBHOOK_ENDPOINT_DISABLED,
                        "the webhook endpoint is disabled: enable it (PATCH \"disabled\": false), "
                        "then ask again");
    }
    return found && !disabled;
}

/* Every enabled endpoint of the user that wants `type`, at most the fan-out cap (as the event's
 * first deliveries were), queued again; their ids into `ids`. */
static db_status redeliver_to_subscribers(db_conn *db, resend *r, const char *type, json_t *ids)
{
    uint64_t *endpoints;
    int count;
    db_status rc = webhook_subscribers(db, r->req->user.id, type,
                                       r->req->app->cfg.max_webhook_fanout, &endpoints, &count);
    if (rc != DB_DONE)
        return rc;
    for (int i = 0; i < count && rc == DB_DONE; i++) {
        bool queued;
        rc = webhook_redeliver(db, endpoints[i], r->target, r->now, &queued);
        if (rc == DB_DONE && queued)
            json_array_append_new(ids, json_id("we", endpoints[i]));
    }
    free(endpoints);
    return rc;
}

static write_result queue_redelivery(db_conn *db, void *arg)
{
    resend *r = arg;
    request *req = r->req;
    db_stmt *st = db_query(db, "SELECT type FROM events WHERE id = $1 AND user_id = $2", "ii",
                           (int64_t)r->target, (int64_t)req->user.id);
    db_status rc = db_step(st);
    char type[64] = "";
    if (rc == DB_ROW)
        snprintf(type, sizeof type, "%s", db_text(st, 0));
    db_done(st);
    if (rc != DB_ROW && rc != DB_DONE)
        return write_result_of_db(rc);
    if (rc == DB_DONE) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such event");
        return WRITE_OK;
    }
    if (r->endpoint && !endpoint_enabled_or_reply(db, req, r->endpoint, &rc))
        return write_result_of_db(rc);
    json_t *ids = json_array();
    if (r->endpoint) { /* named: sent even when it does not subscribe to the type */
        bool queued;
        rc = webhook_redeliver(db, r->endpoint, r->target, r->now, &queued);
        if (rc == DB_DONE && queued)
            json_array_append_new(ids, json_id("we", r->endpoint));
    } else {
        rc = redeliver_to_subscribers(db, r, type, ids);
    }
    if (rc != DB_DONE) {
        json_decref(ids);
        return write_result_of_db(rc);
    }
    reply_json(req, 202,
               json_pack("{s:s, s:o, s:o}", "object", "redelivery", "event_id",
                         json_id("evt", r->target), "endpoint_ids", ids));
    return WRITE_OK;
}

step_result events_redeliver(request *req, void *prepared)
{
    (void)prepared;
    const redeliver_input *in = req->input;
    resend *r = arena_alloc(&req->arena, sizeof *r);
    *r = (resend){.req = req, .now = now_us()};
    if (!path_id_or_reply(req, 0, "evt", &r->target))
        return STEP_DONE;
    if (in->endpoint.text && !in->endpoint.id) { /* not an endpoint id: it names nothing */
        reply_error(req, ERR_RESOURCE_MISSING, "no such webhook endpoint");
        return STEP_DONE;
    }
    r->endpoint = in->endpoint.id;
    return resource_commit_then_answer(req, queue_redelivery, r, "redelivery", NULL);
}

static write_result queue_recovery(db_conn *db, void *arg)
{
    resend *r = arg;
    request *req = r->req;
    db_status rc;
    if (!endpoint_enabled_or_reply(db, req, r->target, &rc))
        return write_result_of_db(rc);
    int64_t queued = 0, brought_forward = 0;
    rc = webhook_recover(db, r->target, r->since, r->now, &queued, &brought_forward);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    reply_json(req, 202,
               json_pack("{s:s, s:o, s:o, s:I, s:I}", "object", "webhook_recovery",
                         "webhook_endpoint_id", json_id("we", r->target), "since",
                         json_time(r->since), "queued", (json_int_t)queued, "brought_forward",
                         (json_int_t)brought_forward));
    return WRITE_OK;
}

step_result webhooks_recover(request *req, void *prepared)
{
    (void)prepared;
    const recover_input *in = req->input;
    resend *r = arena_alloc(&req->arena, sizeof *r);
    *r = (resend){.req = req, .since = in->since.us, .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &r->target))
        return STEP_DONE;
    if (r->since > r->now) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "since",
                            "'since' is in the future: nothing has failed since then");
        return STEP_DONE;
    }
    return resource_commit_then_answer(req, queue_recovery, r, "recovery", NULL);
}
