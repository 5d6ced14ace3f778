/* payctl's event and webhook commands that need more than a table row (commands.c has the
 * plain ones): `webhooks create`, whose events are a list, and `listen`, which follows
 * /v1/events and forwards each event, signed, to a local URL (like `stripe listen`).
 *
 * listen keeps its place in a state file: the created_at it has reached and the ids already
 * forwarded at that millisecond. It advances only after the local URL answered 2xx, and
 * rewrites the file atomically each time, so a restart of payctl or of the server neither
 * loses an event nor forwards again one that was forwarded successfully. Events younger than
 * --settle are left for the next poll, so one committed a moment late by another node is not
 * passed over. */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/timefmt.h"
#include "core/units.h"

static int report(const payd_result *r)
{
    fprintf(stderr, "payctl: %s (HTTP %d%s%s): %s\n", payd_status_name(r->status), r->http_status,
            r->code[0] ? " " : "", r->code, r->message);
    return r->status == PAYD_ERR_HTTP && r->http_status < 500 && r->http_status != 429
               ? EXIT_REFUSED
               : EXIT_GAVE_UP;
}

/* ---- webhooks create ---- */

int run_webhooks_create(invocation *inv)
{
    json_t *body = json_object();
    json_object_set_new(body, "url", json_string(option_value(inv, "endpoint")));
    json_t *events = json_array();
    const char *list = option_value(inv, "events");
    char *copy = strdup(list ? list : "*");
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        json_array_append_new(events, json_string(t));
    free(copy);
    json_object_set_new(body, "events", events);
    if (option_value(inv, "description"))
        json_object_set_new(body, "description", json_string(option_value(inv, "description")));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    payd_request request = {.method = "POST",
                            .path = "/v1/webhook_endpoints",
                            .body = text,
                            .idempotency_key = option_value(inv, "idempotency-key")};
    payd_result r = {0};
    payd_call(inv->client, &request, &r);
    free(text);
    if (r.body && r.body_len)
        print_json(stdout, r.body, r.body_len, inv->pretty);
    int code = r.status == PAYD_OK ? EXIT_OK : report(&r);
    payd_result_clear(&r);
    return code;
}

/* ---- listen ---- */

typedef struct listen_state {
    char path[1024];
    char since[RFC3339_STR_MAX]; /* the created_at reached */
    json_t *seen;                /* ids forwarded at exactly `since` */
    char secret[128];
} listen_state;

static int load_state(listen_state *s, const char *since, const char *secret)
{
    json_t *saved = json_load_file(s->path, 0, NULL);
    const char *t = json_string_value(json_object_get(saved, "since"));
    const char *k = json_string_value(json_object_get(saved, "secret"));
    if (saved && (!t || !k || !json_is_array(json_object_get(saved, "seen")))) {
        fprintf(stderr, "payctl: %s is not a listen state file\n", s->path);
        json_decref(saved);
        return EXIT_USAGE;
    }
    if (saved) {
        snprintf(s->since, sizeof s->since, "%s", t);
        snprintf(s->secret, sizeof s->secret, "%s", secret ? secret : k);
        s->seen = json_incref(json_object_get(saved, "seen"));
        json_decref(saved);
        return EXIT_OK;
    }
    /* a first start forwards what happens from now on, unless --since says otherwise */
    int64_t at;
    if (since && parse_rfc3339(since, &at) != 0) {
        fprintf(stderr, "payctl: --since takes an RFC 3339 time, not \"%s\"\n", since);
        return EXIT_USAGE;
    }
    format_rfc3339_ms(since ? at : now_us(), s->since);
    if (secret) {
        snprintf(s->secret, sizeof s->secret, "%s", secret);
    } else {
        unsigned char raw[24];
        RAND_bytes(raw, sizeof raw);
        int len = snprintf(s->secret, sizeof s->secret, "whsec_");
        for (size_t i = 0; i < sizeof raw; i++)
            len += snprintf(s->secret + len, sizeof s->secret - (size_t)len, "%02x", raw[i]);
    }
    s->seen = json_array();
    return EXIT_OK;
}

/* Writes the state beside its file and renames it into place: a crash leaves the old or the
 * new state, never half of one. */
static int save_state(const listen_state *s)
{
    char temp[1100];
    snprintf(temp, sizeof temp, "%s.tmp", s->path);
    json_t *doc =
        json_pack("{s:s, s:O, s:s}", "since", s->since, "seen", s->seen, "secret", s->secret);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    bool ok = fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text) && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    free(text);
    ok = ok && rename(temp, s->path) == 0;
    if (!ok)
        fprintf(stderr, "payctl: cannot write %s\n", s->path);
    return ok ? 0 : -1;
}

static bool seen_before(const listen_state *s, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(s->seen, i, v) if (!strcmp(json_string_value(v), id)) return true;
    return false;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

/* POSTs one event, signed as payd signs it; the local URL's status, or 0 without an answer. */
static long forward(CURL *curl, const char *url, const listen_state *s, const char *id,
                    const char *body)
{
    char signature[160], header[200];
    payd_webhook_sign(s->secret, (int64_t)time(NULL), body, strlen(body), signature,
                      sizeof signature);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(header, sizeof header, "Payd-Signature: %s", signature);
    h = curl_slist_append(h, header);
    snprintf(header, sizeof header, "Payd-Event-Id: %s", id);
    h = curl_slist_append(h, header);
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    long status = 0;
    if (curl_easy_perform(curl) == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    return status;
}

/* One pass: every event from `since` on, oldest first, forwarded in order. Stops at the
 * first the local URL refuses (it is tried again next pass). Returns EXIT_OK, or
 * EXIT_GAVE_UP when something could not be forwarded or read. */
static int forward_due(invocation *inv, CURL *curl, listen_state *s, int64_t settle_ms)
{
    payd_param query[] = {{"created_gte", s->since}, {"limit", "100"}};
    payd_list *list = payd_list_open(inv->client, "/v1/events", query, 2);
    json_t *events = json_array();
    const char *item;
    payd_status st;
    while ((st = payd_list_next(list, &item)) == PAYD_OK && item)
        json_array_insert_new(events, 0, json_string(item)); /* newest first → oldest first */
    int code = EXIT_OK;
    if (st != PAYD_OK)
        code = report(payd_list_result(list));
    payd_list_close(list);
    const char *url = option_value(inv, "forward-to");
    int64_t newest_due = now_us() - settle_ms * 1000;
    size_t i;
    json_t *text;
    json_array_foreach(events, i, text)
    {
        if (code != EXIT_OK)
            break;
        const char *body = json_string_value(text);
        json_t *event = json_loads(body, 0, NULL);
        const char *id = json_string_value(json_object_get(event, "id"));
        const char *type = json_string_value(json_object_get(event, "type"));
        const char *created = json_string_value(json_object_get(event, "created_at"));
        int64_t created_us = 0;
        if (!id || !created || parse_rfc3339(created, &created_us) != 0) {
            json_decref(event);
            continue;
        }
        if (created_us > newest_due) { /* too young: the next pass takes it */
            json_decref(event);
            break;
        }
        if (!strcmp(created, s->since) && seen_before(s, id)) {
            json_decref(event);
            continue;
        }
        long status = forward(curl, url, s, id, body);
        printf("%s %s %s -> %ld\n", created, id, type ? type : "", status);
        fflush(stdout);
        if (status >= 200 && status < 300) {
            if (strcmp(created, s->since) != 0) {
                snprintf(s->since, sizeof s->since, "%s", created);
                json_array_clear(s->seen);
            }
            json_array_append_new(s->seen, json_string(id));
            if (save_state(s) != 0)
                code = EXIT_GAVE_UP;
        } else {
            code = EXIT_GAVE_UP;
        }
        json_decref(event);
    }
    json_decref(events);
    return code;
}

int run_listen(invocation *inv)
{
    listen_state s = {0};
    const char *state = option_value(inv, "state");
    snprintf(s.path, sizeof s.path, "%s", state ? state : "payctl-listen.json");
    int64_t interval_ms = 1000, settle_ms = 1000;
    const char *interval = option_value(inv, "interval"), *settle = option_value(inv, "settle");
    if ((interval && parse_duration_ms(interval, &interval_ms) != 0) ||
        (settle && parse_duration_ms(settle, &settle_ms) != 0)) {
        fputs("payctl: --interval and --settle take a duration (500ms, 1s)\n", stderr);
        return EXIT_USAGE;
    }
    int code = load_state(&s, option_value(inv, "since"), option_value(inv, "secret"));
    if (code != EXIT_OK)
        return code;
    if (save_state(&s) != 0) {
        json_decref(s.seen);
        return EXIT_GAVE_UP;
    }
    fprintf(stderr, "payctl: forwarding events from %s to %s, signed with %s\n", s.since,
            option_value(inv, "forward-to"), s.secret);
    CURL *curl = curl_easy_init();
    bool once = option_given(inv, "once");
    for (;;) {
        code = forward_due(inv, curl, &s, settle_ms);
        if (once)
            break;
        struct timespec pause = {interval_ms / 1000, (interval_ms % 1000) * 1000000};
        nanosleep(&pause, NULL);
    }
    curl_easy_cleanup(curl);
    json_decref(s.seen);
    return code;
}
