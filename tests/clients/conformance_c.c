/* The C client's conformance run (clients/conformance/README.md): starts the scripted server,
 * and for every scenario loads it, configures libpaydclient's retry policy from its `client`,
 * makes its `call` through the library's own calls, checks `expect`, then asks the server's
 * report whether every request was the one scripted.
 *
 *   conformance_c PYTHON clients/conformance
 *
 * Prints one line per scenario and "N passed, M failed"; exits 1 when any failed. */
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "payd/client.h"

static char base_url[64];

/* ---- the scripted server ---- */

static pid_t server_pid;

static int start_server(const char *python, const char *dir)
{
    int out[2];
    if (pipe(out) != 0)
        return -1;
    char script[1024];
    snprintf(script, sizeof script, "%s/server.py", dir);
    server_pid = fork();
    if (server_pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        execl(python, python, script, "--port", "0", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[256];
    json_t *ready = f && fgets(line, sizeof line, f) ? json_loads(line, 0, NULL) : NULL;
    int port = (int)json_integer_value(json_object_get(ready, "port"));
    json_decref(ready);
    if (f)
        fclose(f);
    if (port <= 0)
        return -1;
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", port);
    return 0;
}

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
    }
}

typedef struct buffer {
    char *data;
    size_t len;
} buffer;

static size_t collect(char *p, size_t size, size_t n, void *ctx)
{
    buffer *b = ctx;
    b->data = realloc(b->data, b->len + size * n + 1);
    memcpy(b->data + b->len, p, size * n);
    b->len += size * n;
    b->data[b->len] = '\0';
    return size * n;
}

/* The server's control routes (/_conformance/...): their JSON answer, or NULL. */
static json_t *control(const char *method, const char *path)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base_url, path);
    CURL *curl = curl_easy_init();
    buffer b = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "POST"))
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(curl);
    json_t *doc = status == 200 && b.data ? json_loads(b.data, 0, NULL) : NULL;
    free(b.data);
    return doc;
}

/* ---- one scenario ---- */

typedef struct outcome {
    payd_result result; /* the call's, or the failing page request's */
    json_t *items;      /* list_payments: the ids yielded */
} outcome;

static void configure(payd_client *client, json_t *policy)
{
    payd_retry_policy p;
    payd_retry_policy_default(&p);
    json_t *v;
    if ((v = json_object_get(policy, "max_retries")))
        p.max_retries = (int)json_integer_value(v);
    if ((v = json_object_get(policy, "base_delay_ms")))
        p.base_delay_ms = json_integer_value(v);
    if ((v = json_object_get(policy, "max_delay_ms")))
        p.max_delay_ms = json_integer_value(v);
    payd_client_set_retry_policy(client, &p);
}

static const char *text(json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

static void run_call(payd_client *client, json_t *call, outcome *out)
{
    const char *op = text(call, "op");
    json_t *params = json_object_get(call, "params");
    if (!strcmp(op, "create_payment")) {
        payd_payment_params p = {
            .account_id = text(params, "account_id"),
            .amount = json_integer_value(json_object_get(params, "amount")),
            .currency = text(params, "currency"),
            .source = text(params, "source"),
            .idempotency_key = text(call, "idempotency_key"), /* null: the client makes one */
        };
        payd_payment_create(client, &p, &out->result);
    } else if (!strcmp(op, "get_payment")) {
        payd_payment_get(client, text(params, "id"), &out->result);
    } else if (!strcmp(op, "list_payments")) {
        char limit[24];
        snprintf(limit, sizeof limit, "%lld",
                 (long long)json_integer_value(json_object_get(params, "limit")));
        payd_param query[] = {{"limit", limit}};
        payd_list *list = payd_payments_list(client, text(params, "account_id"), query, 1);
        out->items = json_array();
        const char *item;
        payd_status st;
        while ((st = payd_list_next(list, &item)) == PAYD_OK && item) {
            json_t *doc = json_loads(item, 0, NULL);
            json_array_append(out->items, json_object_get(doc, "id"));
            json_decref(doc);
        }
        const payd_result *last = payd_list_result(list);
        out->result.status = st;
        out->result.http_status = last->http_status;
        snprintf(out->result.code, sizeof out->result.code, "%s", last->code);
        snprintf(out->result.request_id, sizeof out->result.request_id, "%s", last->request_id);
        payd_list_close(list);
    } else {
        snprintf(out->result.message, sizeof out->result.message, "unknown op %s", op);
        out->result.status = PAYD_ERR_USAGE;
    }
}

/* Appends to why (cap bytes) what differs from `expect`; true when nothing does. */
static bool check(json_t *expect, const outcome *out, char *why, size_t cap)
{
    const payd_result *r = &out->result;
    json_t *want;
    if ((want = json_object_get(expect, "items"))) {
        if (r->status != PAYD_OK || !json_equal(want, out->items)) {
            char *got = json_dumps(out->items, JSON_COMPACT);
            snprintf(why, cap, "items %s (%s)", got ? got : "none", payd_status_name(r->status));
            free(got);
            return false;
        }
        return true;
    }
    if ((want = json_object_get(expect, "result"))) {
        json_t *body = r->body ? json_loads(r->body, 0, NULL) : NULL;
        bool same = r->status == PAYD_OK && body;
        const char *name;
        json_t *value;
        json_object_foreach(want, name, value) same =
            same && json_equal(value, json_object_get(body, name));
        json_decref(body);
        if (!same)
            snprintf(why, cap, "%s HTTP %d: %.200s", payd_status_name(r->status), r->http_status,
                     r->body ? r->body : r->message);
        return same;
    }
    want = json_object_get(expect, "error");
    if (r->status == PAYD_OK) {
        snprintf(why, cap, "succeeded, an error was expected");
        return false;
    }
    json_t *v;
    if ((v = json_object_get(want, "status")) && json_integer_value(v) != r->http_status) {
        snprintf(why, cap, "status %d, expected %lld", r->http_status,
                 (long long)json_integer_value(v));
        return false;
    }
    if ((v = json_object_get(want, "code")) && strcmp(json_string_value(v), r->code) != 0) {
        snprintf(why, cap, "code %s, expected %s", r->code, json_string_value(v));
        return false;
    }
    if ((v = json_object_get(want, "request_id")) &&
        strcmp(json_string_value(v), r->request_id) != 0) {
        snprintf(why, cap, "request_id %s, expected %s", r->request_id, json_string_value(v));
        return false;
    }
    if ((v = json_object_get(want, "param"))) { /* the problem's own member */
        json_t *body = r->body ? json_loads(r->body, 0, NULL) : NULL;
        json_t *param = json_object_get(body, "param");
        bool same = json_is_null(v) ? !param || json_is_null(param) : json_equal(v, param);
        json_decref(body);
        if (!same) {
            snprintf(why, cap, "param differs from %s",
                     json_is_null(v) ? "null" : text(want, "param"));
            return false;
        }
    }
    return true;
}

static bool run_scenario(const char *name, char *why, size_t cap)
{
    char path[512];
    snprintf(path, sizeof path, "/_conformance/load/%s", name);
    json_t *scenario = control("POST", path);
    if (!scenario) {
        snprintf(why, cap, "the server did not load it");
        return false;
    }
    payd_client *client = payd_client_new(base_url, text(scenario, "api_key"));
    configure(client, json_object_get(scenario, "client"));
    outcome out = {0};
    run_call(client, json_object_get(scenario, "call"), &out);
    bool ok = check(json_object_get(scenario, "expect"), &out, why, cap);
    json_t *report = control("GET", "/_conformance/report");
    if (ok && !json_is_true(json_object_get(report, "ok"))) {
        char *failures = json_dumps(json_object_get(report, "failures"), JSON_COMPACT);
        snprintf(why, cap, "the server's report: %s", failures ? failures : "none");
        free(failures);
        ok = false;
    }
    json_decref(report);
    payd_result_clear(&out.result);
    json_decref(out.items);
    payd_client_free(client);
    json_decref(scenario);
    return ok;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: conformance_c PYTHON CONFORMANCE_DIR\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (start_server(argv[1], argv[2]) != 0) {
        fprintf(stderr, "conformance_c: the scripted server did not start\n");
        stop_server();
        return 1;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/scenarios", argv[2]);
    DIR *d = opendir(dir);
    char *names[256];
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d)) && count < 256;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json"))
            names[count++] = strndup(e->d_name, len - 5);
    }
    if (d)
        closedir(d);
    qsort(names, (size_t)count, sizeof *names, by_name);
    int passed = 0, failed = 0;
    for (int i = 0; i < count; i++) {
        char why[512] = "";
        if (run_scenario(names[i], why, sizeof why)) {
            printf("ok   %s\n", names[i]);
            passed++;
        } else {
            printf("FAIL %s: %s\n", names[i], why);
            failed++;
        }
        free(names[i]);
    }
    stop_server();
    curl_global_cleanup();
    printf("%d passed, %d failed\n", passed, failed);
    return failed || count == 0 ? 1 : 0;
}
