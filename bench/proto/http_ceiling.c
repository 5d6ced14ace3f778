/* The ceiling of an HTTP library on this machine: a server that answers every request with a
 * static 200 ("ok\n") and does nothing else, so wrk measures the library alone. Two libraries:
 *
 *   mhd  libmicrohttpd, configured as src/server/pipeline.c configures it for payd (epoll, a
 *        thread pool, suspend/resume allowed, a 32 KiB connection memory pool);
 *   h2o  libh2o-evloop, one event loop per thread, each accepting on the shared listener.
 *
 * bench/library_ceiling.sh builds it, starts both beside nginx and measures the three with wrk in
 * alternating rounds; the figures are in bench/RESULTS.md. By hand:
 *
 *   cc -O2 -std=gnu11 -DH2O_USE_LIBUV=0 bench/proto/http_ceiling.c -o http_ceiling \
 *       -lmicrohttpd -lh2o-evloop -lssl -lcrypto -lpthread -lz
 *   ./http_ceiling mhd|h2o PORT THREADS        (listens on 127.0.0.1:PORT until killed)
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <h2o.h>
#include <h2o/http1.h>

static int listen_on(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), on = 1;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 1024) != 0) {
        perror("listen");
        exit(1);
    }
    return fd;
}

/* ---- libmicrohttpd, configured as src/server/pipeline.c configures it ---- */

static enum MHD_Result mhd_answer(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    if (!*con_cls) { /* first call: headers only, as payd */
        *con_cls = conn;
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(3, (char *)"ok\n", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "text/plain");
    enum MHD_Result rc = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return rc;
}

static void run_mhd(int port, int threads)
{
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO, 0, NULL, NULL,
        mhd_answer, NULL, MHD_OPTION_LISTEN_SOCKET, listen_on(port), MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)threads, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "http_ceiling: libmicrohttpd did not start\n");
        exit(1);
    }
    pause();
}

/* ---- libh2o-evloop: one loop per thread ---- */

static h2o_globalconf_t config;
static int shared_listener;

typedef struct loop_thread {
    h2o_context_t ctx;
    h2o_accept_ctx_t accept;
} loop_thread;

static int h2o_answer(h2o_handler_t *self, h2o_req_t *req)
{
    (void)self;
    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL,
                   H2O_STRLIT("text/plain"));
    h2o_send_inline(req, H2O_STRLIT("ok\n"));
    return 0;
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    if (err)
        return;
    loop_thread *t = listener->data;
    h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
    if (sock)
        h2o_accept(&t->accept, sock);
}

static void *loop_main(void *arg)
{
    loop_thread *t = arg;
    h2o_context_init(&t->ctx, h2o_evloop_create(), &config);
    t->accept.ctx = &t->ctx;
    t->accept.hosts = config.hosts;
    h2o_socket_t *sock =
        h2o_evloop_socket_create(t->ctx.loop, dup(shared_listener), H2O_SOCKET_FLAG_DONT_READ);
    sock->data = t;
    h2o_socket_read_start(sock, on_accept);
    while (h2o_evloop_run(t->ctx.loop, INT32_MAX) == 0) {
    }
    return NULL;
}

static void run_h2o(int port, int threads)
{
    h2o_config_init(&config);
    h2o_hostconf_t *host =
        h2o_config_register_host(&config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof *handler);
    handler->on_req = h2o_answer;
    shared_listener = listen_on(port);
    for (int i = 0; i < threads; i++) {
        pthread_t tid;
        loop_thread *t = calloc(1, sizeof *t);
        if (!t || pthread_create(&tid, NULL, loop_main, t) != 0) {
            perror("h2o thread");
            exit(1);
        }
    }
    pause();
}

int main(int argc, char **argv)
{
    int port = argc == 4 ? atoi(argv[2]) : 0, threads = argc == 4 ? atoi(argv[3]) : 0;
    if (port <= 0 || port > 65535 || threads <= 0 || threads > 64 ||
        (strcmp(argv[1], "mhd") && strcmp(argv[1], "h2o"))) {
        fprintf(stderr, "usage: http_ceiling mhd|h2o PORT THREADS (1 to 64)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(argv[1], "mhd"))
        run_mhd(port, threads);
    else
        run_h2o(port, threads);
    return 0;
}
