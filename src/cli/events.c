/* payctl's event and webhook commands that need more than a table row (commands.c has the
 * plain ones): `webhooks create`, whose events are a list, and `listen`, which follows
 * /v1/events and forwards each event, signed, to a local URL (like `stripe listen`).
 *
 * listen keeps its place in a state file: a created_at (`since`) and the ids already forwarded
 * from that time on. It records an event only after the local URL answered 2xx, and rewrites
 * the file atomically each time, so a restart of payctl or of the server neither loses an event
 * nor forwards again one that was forwarded successfully. Between passes it long-polls
 * (GET /v1/events?wait=N), so an event is forwarded as soon as it is written; `since` stays
 * --settle behind the newest event forwarded, so one committed a moment late by another node,
 * with an earlier created_at, is still found by the next pass. */
#include <curl/curl.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
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

#define LISTEN_WAIT_S 25 /* the long-poll's wait: below the client's 30 s attempt timeout */

typedef struct listen_state {
    char path[1024];
    char since[RFC3339_STR_MAX]; /* forward what was created from here on... */
    json_t *seen;                /* ...but not these ids: forwarded already, created >= since */
    char secret[128];
    int64_t newest_us; /* the newest created_at forwarded or seen (0: none yet) */
} listen_state;

/* A secret of 24 random bytes, "whsec_<base64>", as Standard Webhooks shows them. */
static void new_secret(char *out, size_t cap)
{
    unsigned char raw[24], text[40];
    RAND_bytes(raw, sizeof raw);
    EVP_EncodeBlock(text, raw, sizeof raw);
    snprintf(out, cap, "whsec_%s", (const char *)text);
}

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
    } else {
        /* a first start forwards what happens from now on, unless --since says otherwise */
        int64_t at;
        if (since && parse_rfc3339(since, &at) != 0) {
            fprintf(stderr, "payctl: --since takes an RFC 3339 time, not \"%s\"\n", since);
            return EXIT_USAGE;
        }
        format_rfc3339_ms(since ? at : now_us(), s->since);
        if (secret)
            snprintf(s->secret, sizeof s->secret, "%s", secret);
        else
            new_secret(s->secret, sizeof s->secret);
        s->seen = json_array();
    }
    char probe[PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX];
    if (payd_webhook_sign_standard(s->secret, "evt", 0, "", 0, probe, sizeof probe) != 0) {
        fprintf(stderr, "payctl: the secret must be whsec_ and base64 (Standard Webhooks)\n");
        return EXIT_USAGE;
    }
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

/* POSTs one event, signed as payd signs it (Payd-Signature and the Standard Webhooks headers);
 * the local URL's status, or 0 without an answer. */
static long forward(CURL *curl, const char *url, const listen_state *s, const char *id,
                    const char *body)
{
    int64_t now = (int64_t)time(NULL);
    char signature[160], standard[PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX], header[200];
    payd_webhook_sign(s->secret, now, body, strlen(body), signature, sizeof signature);
    payd_webhook_sign_standard(s->secret, id, now, body, strlen(body), standard,
                               sizeof standard); /* the secret was checked at start */
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(header, sizeof header, "Payd-Signature: %s", signature);
    h = curl_slist_append(h, header);
    snprintf(header, sizeof header, "Payd-Event-Id: %s", id);
    h = curl_slist_append(h, header);
    snprintf(header, sizeof header, "webhook-id: %s", id);
    h = curl_slist_append(h, header);
    snprintf(header, sizeof header, "webhook-timestamp: %lld", (long long)now);
    h = curl_slist_append(h, header);
    snprintf(header, sizeof header, "webhook-signature: %s", standard);
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

/* Every event created from `since` on (of the --events types), oldest first, into *out.
 * EXIT_OK, or what report() says of the failure. */
static int read_since(invocation *inv, const listen_state *s, json_t **out)
{
    const char *types = option_value(inv, "events");
    payd_param query[] = {{"created_gte", s->since}, {"limit", "100"}, {"type", types}};
    payd_list *list = payd_list_open(inv->client, "/v1/events", query, types ? 3 : 2);
    json_t *events = json_array();
    const char *item;
    payd_status st;
    while ((st = payd_list_next(list, &item)) == PAYD_OK && item)
        json_array_insert_new(events, 0, json_loads(item, 0, NULL)); /* → oldest first */
    int code = st == PAYD_OK ? EXIT_OK : report(payd_list_result(list));
    payd_list_close(list);
    *out = events;
    return code;
}

/* Moves `since` up to --settle behind the newest event forwarded, and forgets the ids created
 * before it: the list stays as short as the window. */
static void advance_since(listen_state *s, const json_t *events, int64_t settle_ms)
{
    int64_t since;
    if (!s->newest_us || parse_rfc3339(s->since, &since) != 0 ||
        s->newest_us - settle_ms * 1000 <= since)
        return;
    format_rfc3339_ms(s->newest_us - settle_ms * 1000, s->since);
    parse_rfc3339(s->since, &since);
    json_t *kept = json_array();
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event)
    {
        const char *id = json_string_value(json_object_get(event, "id"));
        int64_t created;
        if (id && seen_before(s, id) &&
            parse_rfc3339(json_string_value(json_object_get(event, "created_at")), &created) == 0 &&
            created >= since)
            json_array_append_new(kept, json_string(id));
    }
    json_decref(s->seen);
    s->seen = kept;
}

/* One pass: every event from `since` on not forwarded yet, oldest first, forwarded in order.
 * Stops at the first the local URL refuses (it is tried again next pass). Returns EXIT_OK, or
 * EXIT_GAVE_UP when something could not be forwarded or read. */
static int forward_due(invocation *inv, CURL *curl, listen_state *s, int64_t settle_ms)
{
    json_t *events;
    int code = read_since(inv, s, &events);
    const char *url = option_value(inv, "forward-to");
    size_t i;
    json_t *event;
    json_array_foreach(events, i, event)
    {
        if (code != EXIT_OK)
            break;
        const char *id = json_string_value(json_object_get(event, "id"));
        const char *type = json_string_value(json_object_get(event, "type"));
        const char *created = json_string_value(json_object_get(event, "created_at"));
        int64_t created_us;
        if (!id || !created || parse_rfc3339(created, &created_us) != 0)
            continue;
        if (!seen_before(s, id)) {
            char *body = json_dumps(event, JSON_COMPACT | JSON_PRESERVE_ORDER);
            long status = forward(curl, url, s, id, body);
            free(body);
            printf("%s %s %s -> %ld\n", created, id, type ? type : "", status);
            fflush(stdout);
            if (status < 200 || status >= 300) {
                code = EXIT_GAVE_UP;
                break;
            }
            json_array_append_new(s->seen, json_string(id));
            if (save_state(s) != 0)
                code = EXIT_GAVE_UP;
        }
        if (created_us > s->newest_us)
            s->newest_us = created_us;
    }
    if (code == EXIT_OK) {
        advance_since(s, events, settle_ms);
        if (save_state(s) != 0)
            code = EXIT_GAVE_UP;
    }
    json_decref(events);
    return code;
}

/* Waits until the server has an event newer than the newest one seen (a long-poll of up to
 * LISTEN_WAIT_S), or the wait ends. False when the server could not be asked. */
static bool wait_for_more(invocation *inv, const listen_state *s)
{
    char after[RFC3339_STR_MAX];
    if (s->newest_us) /* created_at is shown to the millisecond */
        format_rfc3339_ms(s->newest_us + 1000, after);
    else
        snprintf(after, sizeof after, "%s", s->since);
    char wait[8];
    snprintf(wait, sizeof wait, "%d", LISTEN_WAIT_S);
    const char *types = option_value(inv, "events");
    payd_param query[] = {{"created_gte", after}, {"limit", "1"}, {"wait", wait}, {"type", types}};
    payd_request request = {
        .method = "GET", .path = "/v1/events", .query = query, .query_len = types ? 4 : 3};
    payd_result r = {0};
    bool answered = payd_call(inv->client, &request, &r) == PAYD_OK;
    if (!answered)
        report(&r);
    payd_result_clear(&r);
    return answered;
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
    if (code != EXIT_OK || save_state(&s) != 0) {
        json_decref(s.seen);
        return code != EXIT_OK ? code : EXIT_GAVE_UP;
    }
    fprintf(stderr, "payctl: forwarding events from %s to %s, signed with %s\n", s.since,
            option_value(inv, "forward-to"), s.secret);
    CURL *curl = curl_easy_init();
    bool once = option_given(inv, "once");
    for (;;) {
        code = forward_due(inv, curl, &s, settle_ms);
        if (once)
            break;
        /* after a failure, or when the server cannot be asked, a pause before the next pass */
        if (code != EXIT_OK || !wait_for_more(inv, &s)) {
            struct timespec pause = {interval_ms / 1000, (interval_ms % 1000) * 1000000};
            nanosleep(&pause, NULL);
        }
    }
    curl_easy_cleanup(curl);
    json_decref(s.seen);
    return code;
}
