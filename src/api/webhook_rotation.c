/* A webhook endpoint's secret rotation (docs/webhooks.md, "Rotating the secret"):
 * POST /v1/webhook_endpoints/{id}/rotate_secret {"expire_previous_in"?} makes a new secret,
 * shown only in its answer, and keeps the one it replaces to sign beside it until
 * expire_previous_in seconds have passed. One previous secret is kept: a rotation during an
 * overlap replaces it with the secret that was current until then. */
#include "api/common.h"
#include "api/handlers.h"
#include "api/webhook_endpoints.h"
#include "core/timefmt.h"
#include "webhook/secret.h"

#define DEFAULT_OVERLAP_S 86400  /* a day, for a receiver to move to the new secret */
#define MAX_OVERLAP_S     604800 /* a week */

/* What a replay shows instead of the new secret (resource_changed_with_secret). */
#define ROTATE_AGAIN                                                                               \
    "the secret is shown only in the first answer to this request; rotate again (with a new "      \
    "Idempotency-Key) to get a new one"

typedef struct rotate_input {
    int64_t expire_previous_in; /* seconds */
} rotate_input;

static const field rotate_fields[] = {
    {.name = "expire_previous_in",
     .kind = KIND_INTEGER,
     IN(rotate_input, expire_previous_in),
     .min = 0,
     .max = MAX_OVERLAP_S,
     .absent = DEFAULT_OVERLAP_S},
};
const schema webhooks_rotate_secret_body = SCHEMA(rotate_input, rotate_fields);

typedef struct rotation {
    request *req;
    uint64_t id;
    int64_t overlap_us, now;
    char secret[WEBHOOK_SECRET_MAX];
    char sealed[WEBHOOK_SEALED_MAX];
} rotation;

/* One UPDATE: the sealed current secret moves to previous_secret as it is (it is sealed for the
 * same endpoint, so it opens there), the new one takes its place. With no overlap no previous
 * secret is kept. */
static write_result rotate_secret(db_conn *db, void *arg)
{
    rotation *r = arg;
    request *req = r->req;
    const secret_member secret = {"secret", r->secret, ROTATE_AGAIN};
    return write_result_of_db(resource_changed_with_secret(
        req, &endpoint_resource,
        db_query(db,
                 "UPDATE webhook_endpoints SET "
                 "previous_secret = CASE WHEN CAST($3 AS BIGINT) > 0 THEN secret END, "
                 "previous_secret_expires_at = "
                 "  CASE WHEN CAST($3 AS BIGINT) > 0 THEN CAST($4 AS BIGINT) END, "
                 "secret = $5, updated_at = $6 WHERE id = $1 AND user_id = $2 "
                 "RETURNING " ENDPOINT_COLUMNS,
                 "iiiisi", (int64_t)r->id, (int64_t)req->user.id, r->overlap_us,
                 r->now + r->overlap_us, r->sealed, r->now),
        &secret));
}

step_result webhooks_rotate_secret(request *req, void *prepared)
{
    (void)prepared;
    const rotate_input *in = req->input;
    rotation *r = arena_alloc(&req->arena, sizeof *r);
    *r = (rotation){.req = req, .overlap_us = in->expire_previous_in * 1000000, .now = now_us()};
    if (!path_id_or_reply(req, 0, "we", &r->id))
        return STEP_DONE;
    if (webhook_secret_new(r->secret) != 0 ||
        webhook_secret_seal(req->app->cursor_key, r->id, r->secret, r->sealed) != 0) {
        reply_error(req, ERR_INTERNAL, "no randomness for the secret");
        return STEP_DONE;
    }
    return resource_commit_then_answer(req, rotate_secret, r, "webhook endpoint", NULL);
}
