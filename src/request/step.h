#ifndef PAYD_REQUEST_STEP_H
#define PAYD_REQUEST_STEP_H
/* Continuations: a request that waits for a write job holds no thread.
 *
 * A handler is written as steps. A step either answers the request (STEP_DONE) or ends by
 * starting a wait and naming the step that follows it (STEP_WAITING): request_write_then
 * queues a write job and returns; when the job's batch has committed, the writer's thread runs
 * the next step at once. A payment through the builtin processor thus goes HTTP thread →
 * writer (claim) → writer (charge) → writer (record) → HTTP thread: no thread sleeps for it.
 *
 * A step that may block (an HTTP processor call, a synchronous write, a pooled PostgreSQL
 * read) first asks for a thread that may: request_blocking_then hands it to a worker when it
 * runs on a writer's thread. Without a runner (the recoverer, tests) every wait simply blocks,
 * so the same steps serve both. */
#include "request/request.h"
#include "store/store.h"

typedef enum { STEP_DONE, STEP_WAITING } step_result;
typedef step_result (*request_step)(request *req, void *ctx);

/* What the server provides to run requests as continuations (server/pipeline.c): callbacks
 * typed in request/'s terms, handed down by server/ (the rule: docs/architecture.md, Modules). */
typedef struct request_runner {
    /* The request has its answer: settle its key and send it. */
    void (*finish)(request *req);
    /* Runs step(req, ctx) on a thread that may block. */
    void (*on_worker)(request *req, request_step step, void *ctx);
} request_runner;

/* Runs fn(db, ctx) as a write job, then next(req, ctx) with req->write_result set to what it
 * came to (the job's write_result, or the store's WRITE_FAILED). Returns what the request's thread
 * should return. When the request has no answer yet, each run of fn starts with none (a batch may
 * run its jobs again; see step.c); an answer set before the job is left as it is, and fn must not
 * answer then. */
step_result request_write_then(request *req, write_job_fn fn, void *ctx, request_step next);
/* Runs next(req, ctx) on a thread that may block: here when this one may. */
step_result request_blocking_then(request *req, request_step next, void *ctx);
/* Whether this thread must not block for req: a writer's or an HTTP thread of a request that
 * has a runner. The one place that decides (see STEP_MAY_BLOCK). */
bool request_must_hand_off(const request *req);
/* A step that may block (a processor call, a pooled read, a synchronous write) says so, naming
 * itself, before the part that blocks: STEP_MAY_BLOCK(req, this_step, ctx). Where it runs is
 * decided here, not by the handler: on a thread that must not block, the step is handed to a
 * worker and runs again from its start there, and this thread returns STEP_WAITING; on a
 * worker, or without a runner (the recoverer, tests), it goes on at once. */
#define STEP_MAY_BLOCK(req, step, ctx)                                                             \
    do {                                                                                           \
        if (request_must_hand_off(req))                                                            \
            return request_blocking_then((req), (step), (ctx));                                    \
    } while (0)
/* Ends a wait that is not a write job (a processor's answer, started by the step that returned
 * STEP_WAITING): runs next(req, ctx) here, on a thread that must not block, as after a write job
 * (failure: what the wait met in the database, which the request's answer reads). */
void request_wake(request *req, db_failure failure, request_step next, void *ctx);
/* Runs a step and, when it answered, finishes the request (the runner's part). */
void request_continue(request *req, request_step step, void *ctx);

#endif
