#ifndef PAYD_HTTP_WORKERS_H
#define PAYD_HTTP_WORKERS_H
/* Threads that run requests which wait: for the group-commit writer or for the processor.
 * The libmicrohttpd thread suspends the connection and hands the request here, so it goes on
 * serving other connections while this one waits. */
typedef struct worker_pool worker_pool;
typedef void (*worker_fn)(void *item);

worker_pool *worker_pool_start(int threads, worker_fn fn);
void worker_pool_submit(worker_pool *p, void *item);
/* Runs every queued item, then joins the threads. */
void worker_pool_stop(worker_pool *p);

#endif
