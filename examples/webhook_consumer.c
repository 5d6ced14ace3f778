/* A webhook consumer that handles every payd event exactly once (docs/webhooks.md).
 *
 * payd delivers at least once: an event may arrive twice (a retry after a lost answer, a node
 * that crashed mid-delivery). So the consumer
 *   1. verifies the signature over the raw body with payd_webhook_verify (a wrong body, secret
 *      or an old timestamp is refused with 400, and payd will not be fooled into "delivered"),
 *   2. in ONE database transaction records the event id (a primary key) and does its work,
 *      so a duplicate finds the id already there and does nothing, and a crash between the two
 *      cannot happen,
 *   3. answers 2xx only after that commit, and also for a duplicate (it is done already).
 *
 *   ./example_webhook_consumer --port 9000 --secret whsec_... --db consumer.db
 *
 * It prints "processed <event id> <type>" for each event handled and "duplicate <event id>"
 * for each repeat. Built by `make` (build/example_webhook_consumer); against an installed
 * library: cc webhook_consumer.c $(pkg-config --cflags --libs paydclient libmicrohttpd
 * sqlite3 jansson). */
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <payd/client.h>

#define MAX_BODY (1024 * 1024)

static const char *secret;
static sqlite3 *db;
static pthread_mutex_t db_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct body {
    char *data;
    size_t len;
    bool too_large;
} body;

/* The business effect of an event, here a row per event type count. Runs inside the same
 * transaction as the dedupe row, so both happen or neither. */
static int apply_event(const char *type)
{
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "INSERT INTO type_counts (type, n) VALUES (?1, 1) "
                       "ON CONFLICT (type) DO UPDATE SET n = n + 1",
                       -1, &st, NULL);
    sqlite3_bind_text(st, 1, type, -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
    sqlite3_finalize(st);
    return rc;
}

/* 200 processed, 200 duplicate, or 500 (payd retries later). */
static int handle_event(const char *id, const char *type)
{
    pthread_mutex_lock(&db_lock);
    int status = 500;
    sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db,
                       "INSERT INTO processed_events (event_id) VALUES (?1) "
                       "ON CONFLICT (event_id) DO NOTHING",
                       -1, &st, NULL);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_TRANSIENT);
    bool stepped = sqlite3_step(st) == SQLITE_DONE;
    sqlite3_finalize(st);
    bool fresh = stepped && sqlite3_changes(db) == 1;
    if (stepped && (!fresh || apply_event(type) == 0) &&
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
        status = 200;
        printf("%s %s %s\n", fresh ? "processed" : "duplicate", id, fresh ? type : "");
        fflush(stdout);
    } else {
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    }
    pthread_mutex_unlock(&db_lock);
    return status;
}

static enum MHD_Result answer(struct MHD_Connection *c, int status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    (void)cls;
    (void)url;
    (void)version;
    body *b = *state;
    if (!b) { /* first call: headers only */
        *state = calloc(1, sizeof *b);
        return MHD_YES;
    }
    if (*upload_size) { /* body chunks */
        if (b->len + *upload_size > MAX_BODY) {
            b->too_large = true;
        } else {
            b->data = realloc(b->data, b->len + *upload_size + 1);
            memcpy(b->data + b->len, upload, *upload_size);
            b->len += *upload_size;
            b->data[b->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "POST") != 0)
        return answer(c, 405, "POST only\n");
    if (b->too_large || !b->data)
        return answer(c, 400, "no body\n");
    /* 1. the signature, over the raw bytes as received */
    const char *signature = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Payd-Signature");
    payd_webhook_check check =
        payd_webhook_verify(secret, signature ? signature : "", b->data, b->len, 0, 0);
    if (check != PAYD_WEBHOOK_OK) {
        fprintf(stderr, "refused: %s\n", payd_webhook_check_name(check));
        return answer(c, 400, payd_webhook_check_name(check));
    }
    /* 2 and 3: dedupe and work in one transaction, then answer */
    json_t *event = json_loadb(b->data, b->len, 0, NULL);
    const char *id = json_string_value(json_object_get(event, "id"));
    const char *type = json_string_value(json_object_get(event, "type"));
    enum MHD_Result ok =
        id && type ? answer(c, handle_event(id, type), "ok\n") : answer(c, 400, "not an event\n");
    json_decref(event);
    return ok;
}

static void on_done(void *cls, struct MHD_Connection *c, void **state,
                    enum MHD_RequestTerminationCode code)
{
    (void)cls;
    (void)c;
    (void)code;
    body *b = *state;
    if (b)
        free(b->data);
    free(b);
    *state = NULL;
}

int main(int argc, char **argv)
{
    int port = 0;
    const char *path = "webhook_consumer.db";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--secret"))
            secret = argv[i + 1];
        else if (!strcmp(argv[i], "--db"))
            path = argv[i + 1];
    }
    if (!port || !secret) {
        fprintf(stderr, "usage: %s --port N --secret whsec_... [--db FILE]\n", argv[0]);
        return 2;
    }
    if (sqlite3_open(path, &db) != SQLITE_OK ||
        sqlite3_exec(db,
                     "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                     "CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY);"
                     "CREATE TABLE IF NOT EXISTS type_counts (type TEXT PRIMARY KEY, n INTEGER);",
                     NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "cannot open %s: %s\n", path, sqlite3_errmsg(db));
        return 1;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, (uint16_t)port, NULL, NULL,
        on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "cannot listen on port %d\n", port);
        return 1;
    }
    printf("listening %d\n", port);
    fflush(stdout);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    int sig;
    sigwait(&stop, &sig);
    MHD_stop_daemon(d);
    sqlite3_close(db);
    return 0;
}
