#include "http/workers.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct work_item {
    worker_fn fn;
    void *item;
    struct work_item *next;
} work_item;

struct worker_pool {
    pthread_mutex_t lock;
    pthread_cond_t has_work;
    work_item *head, *tail;
    bool stopping;
    int count;
    pthread_t threads[];
};

static void *worker_main(void *arg)
{
    worker_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->has_work, &p->lock);
        work_item *w = p->head;
        if (!w) {
            pthread_mutex_unlock(&p->lock);
            break;
        }
        p->head = w->next;
        if (!p->head)
            p->tail = NULL;
        pthread_mutex_unlock(&p->lock);
        worker_fn fn = w->fn;
        void *item = w->item;
        free(w);
        fn(item);
    }
    return NULL;
}

worker_pool *worker_pool_start(int threads)
{
    worker_pool *p = calloc(1, sizeof *p + (size_t)threads * sizeof(pthread_t));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->has_work, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 512 * 1024); /* requests are shallow; keep RSS small */
    for (p->count = 0; p->count < threads; p->count++)
        pthread_create(&p->threads[p->count], &attr, worker_main, p);
    pthread_attr_destroy(&attr);
    return p;
}

void worker_pool_submit(worker_pool *p, worker_fn fn, void *item)
{
    work_item *w = malloc(sizeof *w);
    w->fn = fn;
    w->item = item;
    w->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail)
        p->tail->next = w;
    else
        p->head = w;
    p->tail = w;
    pthread_cond_signal(&p->has_work);
    pthread_mutex_unlock(&p->lock);
}

void worker_pool_stop(worker_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->has_work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->count; i++)
        pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->has_work);
    free(p);
}
