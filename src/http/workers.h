#ifndef PAYD_HTTP_WORKERS_H
#define PAYD_HTTP_WORKERS_H
/* Threads for the work of a request that may block: a call to an HTTP processor, a handler
 * that waits for its write jobs. The HTTP thread (or a writer finishing a job) hands the work
 * here, so it goes on serving others meanwhile. */
typedef struct worker_pool worker_pool;
typedef void (*worker_fn)(void *item);

worker_pool *worker_pool_start(int threads);
/* Runs fn(item) on one of the pool's threads. */
void worker_pool_submit(worker_pool *p, worker_fn fn, void *item);
/* Runs every queued item, then joins the threads. */
void worker_pool_stop(worker_pool *p);

#endif
