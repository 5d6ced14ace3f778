#include "request/step.h"

#include "core/log.h"
#include "node/app.h"

typedef struct pending_write {
    request *req;
    write_job_fn fn;
    request_step next;
    void *ctx;        /* fn's and next's */
    bool unanswered;  /* the request had no answer when the job was queued */
    int header_count; /* the response's headers then */
} pending_write;

/* A job queued before the request has its answer starts every run with none. A batch run again
 * runs its jobs again, and on PostgreSQL other connections may commit between the runs, so a
 * run can see another state than the one before it: a refund that found nothing left to refund
 * on its first run (and answered 409) may reserve on its second, which answers nothing yet, and
 * must not keep the 409. A job queued after the answer (the void of a charge no payment will
 * carry, while the answer says the key was lost) leaves it alone. */
static write_result run_request_job(db_conn *db, void *arg)
{
    pending_write *w = arg;
    if (w->unanswered)
        reply_forget(w->req, w->header_count);
    return w->fn(db, w->ctx);
}

void request_continue(request *req, request_step step, void *ctx)
{
    if (step(req, ctx) == STEP_DONE)
        req->runner->finish(req);
    /* STEP_WAITING: the request belongs to whoever finishes the wait; not touched again here */
}

void request_wake(request *req, db_failure failure, request_step next, void *ctx)
{
    store *s = req->app->store; /* the request may be gone once its step has run */
    log_set_request_id(req->request_id);
    db_failure threads_own = db_thread_failure();
    db_thread_failure_reset();
    db_note_failure(failure);
    req->may_block = false;
    request_continue(req, next, ctx);
    store_thread_done(s); /* a PostgreSQL reader a step took goes back */
    db_thread_failure_reset();
    db_note_failure(threads_own);
    log_set_request_id(NULL);
}

/* On the writer's thread, right after the job's batch ended. */
static void write_done(write_result result, db_failure failure, const char *error, void *arg)
{
    pending_write *w = arg;
    request *req = w->req;
    if (error) { /* the store failed it */
        log_set_request_id(req->request_id);
        log_error("error", "write job failed", error);
    }
    req->write_result = result;
    request_wake(req, failure, w->next, w->ctx);
}

step_result request_write_then(request *req, write_job_fn fn, void *ctx, request_step next)
{
    pending_write *w = arena_alloc(&req->arena, sizeof *w);
    *w = (pending_write){req, fn, next, ctx, req->status == 0, req->resp_header_count};
    if (!req->runner) {
        req->write_result = store_write(req->app->store, run_request_job, w);
        return next(req, ctx);
    }
    /* a PostgreSQL reader this thread holds for the request goes back while it waits */
    if (req->may_block)
        store_thread_done(req->app->store);
    store_submit(req->app->store, run_request_job, w, write_done, w);
    return STEP_WAITING;
}

bool request_must_hand_off(const request *req)
{
    return req->runner && !req->may_block;
}

step_result request_blocking_then(request *req, request_step next, void *ctx)
{
    if (!request_must_hand_off(req))
        return next(req, ctx);
    req->runner->on_worker(req, next, ctx);
    return STEP_WAITING;
}
