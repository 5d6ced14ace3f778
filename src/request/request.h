#ifndef PAYD_REQUEST_REQUEST_H
#define PAYD_REQUEST_REQUEST_H
/* One HTTP request as handlers see it: matched route, path parameters, parsed JSON body,
 * authenticated user, and the response being built. Everything lives in the request's arena.
 * The request layer sits above the node (node/: app state, auth) and below the idempotency
 * engine, which fills the key a request holds (struct idem_claim, request/claim.h). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "request/problem.h"
#include "node/auth.h"
#include "store/store.h"

struct http_exchange;
struct app;
struct route;
struct idem_claim;
struct request_runner;

#define MAX_PATH_PARAMS  4
#define MAX_RESP_HEADERS 16
#define REQUEST_ID_MAX   129
#define MAX_REQUEST_BODY (64 * 1024)

typedef struct header_pair {
    const char *name, *value;
} header_pair;

typedef struct request {
    struct app *app;
    struct http_exchange *exchange; /* NULL for requests replayed by the recoverer */
    arena arena;
    const char *method, *path;
    const struct route *route;
    const char *params[MAX_PATH_PARAMS];
    json_t *json; /* the parsed body of a POST/PUT/PATCH */
    void *input;  /* the route's declared body and query, decoded (http/schema.h) */
    user_info user;
    bool authenticated;
    char request_id[REQUEST_ID_MAX];
    int64_t start_ns;
    bool admitted;            /* route, edge checks, auth and rate limit have run */
    bool counted_in_progress; /* holds one of its API key's --max-in-progress-per-key */
    struct idem_claim *idem;  /* set when the idempotency engine claimed a key for this request */
    uint8_t *body_digest; /* SHA-256 of method, path, Content-Type and raw body (replay cache) */
    /* continuations (request/step.h) */
    const struct request_runner *runner; /* NULL: every wait blocks the thread */
    bool may_block;                      /* this thread may wait: a worker, not a writer */
    write_result write_result;           /* what the last write job came to */
    void *prepared; /* what the route's prepare step read and checked, for its handler */

    /* the response */
    int status;
    char *resp_body;
    size_t resp_len;
    payd_error error;         /* ERR_NONE for a success */
    const char *error_detail; /* the problem's detail, for the failure log */
    bool resp_recorded;   /* the idempotency engine stored this response in the handler's commit */
    uint64_t resp_event;  /* an event recorded this very body as its data (0: none); any new
                           * body clears it */
    bool resp_says_mode;  /* every object of resp_body says its mode (jw_init_answer): the
                           * pipeline need not mark it; any new body clears it */
    char *resp_kept_body; /* what an idempotency key keeps of this answer instead of resp_body
                           * (NULL: resp_body itself): a create that shows a secret keeps it
                           * redacted (reply_keep_instead); any new body clears it */
    header_pair resp_headers[MAX_RESP_HEADERS];
    int resp_header_count;

    /* what the access log names besides the above (server/access_log.h) */
    char client_ip[48];          /* the connection's peer ("": unknown) */
    char forwarded_for[48];      /* the client a trusted proxy named ("": none) */
    const char *user_agent;      /* in the arena, cut to a bound; NULL: none */
    int64_t bytes_in, bytes_out; /* body bytes received and answered */
    const char *problem_code;    /* a 4xx or 5xx answer's code, from the problem table */
} request;

/* Frees a request (malloc'd, its arena inited) with its body, answer and key's record: the
 * pipeline's when its exchange completes, the recoverer's when its key is settled. */
void request_free(request *req);

/* Request headers and query arguments (NULL when absent). */
const char *request_header(request *req, const char *name);
const char *request_query(request *req, const char *name);

/* Responses. reply_json takes ownership of body. */
void reply_json(request *req, int status, json_t *body);
void reply_error(request *req, payd_error err, const char *detail);
/* reply_error with extra members (for example "param" or "existing_order_id"); takes ownership. */
void reply_error_extra(request *req, payd_error err, const char *detail, json_t *extra);
void reply_header(request *req, const char *name, const char *value);
/* Forgets the answer, and every header after the first header_count: a write job run again
 * (its batch retried) answers afresh. */
void reply_forget(request *req, int header_count);
const char *response_header(request *req, const char *name);
struct jsonw;
/* A writer for this request's answer. A read's: every object it writes says the request's mode
 * (jw_member_object, docs/modes.md), so the answer needs no marking on its way out. A write's
 * answer may be stored, and is kept unmarked (marked on its way out). */
void jw_init_answer(request *req, struct jsonw *w);
/* Takes the writer's text as the JSON body. */
void reply_jsonw(request *req, int status, struct jsonw *w);
/* What a stored idempotency key keeps of the answer just set, instead of the answer itself (an
 * answer that shows a secret: kept without it). Takes the writer's text. */
void reply_keep_instead(request *req, struct jsonw *kept);
/* Sets a raw, already serialized response (replays). */
void reply_raw(request *req, int status, const char *body, size_t len);

#endif
