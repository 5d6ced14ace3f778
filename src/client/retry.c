/* One logical call: the retry loop of docs/api.md §14 around single HTTP exchanges.
 *
 * What is retried: no answer at all (connection refused or dropped, timeout), 5xx, 429 and
 * 409 request_in_progress. Every other 4xx is final: repeating it cannot change the answer.
 * How long to wait: core/backoff.c. When to stop: after max_retries retries, when the next
 * attempt would start after the deadline, or when the server asks for more than max_delay. */
#include "client/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backoff.h"

/* Is this failure one that §14 retries? http_status 0: there was no answer at all. */
static bool retry_is_retryable(long http_status, const char *problem_code, CURLcode transport)
{
    if (http_status == 0) {
        /* No answer. Only the caller's own mistakes are final; anything on the way is not. */
        switch (transport) {
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
        case CURLE_OUT_OF_MEMORY:
        case CURLE_BAD_FUNCTION_ARGUMENT:
        case CURLE_WRITE_ERROR:
            return false;
        default:
            return true;
        }
    }
    if (http_status >= 500 || http_status == 429)
        return true;
    return http_status == 409 && strcmp(problem_code, "request_in_progress") == 0;
}

/* An Idempotency-Key is 1-255 visible ASCII characters (§2); anything else would also let a
 * caller smuggle a line break into the request headers. */
static bool valid_idempotency_key(const char *key)
{
    size_t len = strlen(key);
    if (len == 0 || len > 255)
        return false;
    for (const char *p = key; *p; p++)
        if (*p < 0x21 || *p > 0x7e)
            return false;
    return true;
}

static char *build_url(const payd_client *client, const payd_request *req)
{
    size_t cap = strlen(client->base_url) + strlen(req->path) + 2;
    char **escaped = calloc(req->query_len ? req->query_len : 1, sizeof *escaped);
    if (!escaped)
        return NULL;
    char *url = NULL;
    for (size_t i = 0; i < req->query_len; i++) {
        escaped[i] = payd_escape(req->query[i].value ? req->query[i].value : "");
        if (!escaped[i])
            goto done;
        cap += strlen(req->query[i].name) + strlen(escaped[i]) + 2;
    }
    url = malloc(cap);
    if (!url)
        goto done;
    char *w = url + sprintf(url, "%s%s", client->base_url, req->path);
    char separator = strchr(req->path, '?') ? '&' : '?';
    for (size_t i = 0; i < req->query_len; i++) {
        w += sprintf(w, "%c%s=%s", separator, req->query[i].name, escaped[i]);
        separator = '&';
    }
done:
    for (size_t i = 0; i < req->query_len; i++)
        free(escaped[i]);
    free(escaped);
    return url;
}

/* The problem+json `code` and `detail` of an error answer, when it has them. */
static void read_problem(const http_attempt *attempt, char *code, size_t code_size, char *detail,
                         size_t detail_size)
{
    code[0] = detail[0] = '\0';
    if (attempt->http_status < 400 || !attempt->body)
        return;
    json_t *problem = json_loadb(attempt->body, attempt->body_len, 0, NULL);
    if (!json_is_object(problem)) {
        json_decref(problem);
        return;
    }
    copy_string(code, code_size, json_string_value(json_object_get(problem, "code")));
    const char *text = json_string_value(json_object_get(problem, "detail"));
    if (!text)
        text = json_string_value(json_object_get(problem, "title"));
    copy_string(detail, detail_size, text);
    json_decref(problem);
}

/* Moves the final attempt into the caller's result. */
static void fill_result(payd_result *result, http_attempt *attempt, const char *code,
                        const char *detail)
{
    result->http_status = (int)attempt->http_status;
    copy_string(result->code, sizeof result->code, code);
    copy_string(result->message, sizeof result->message,
                attempt->http_status ? detail : attempt->transport_error);
    copy_string(result->request_id, sizeof result->request_id, attempt->request_id);
    if (!result->request_id[0] && attempt->http_status >= 400 && attempt->body) {
        /* a problem names its request in its body too: that one when no header did (a proxy
         * in between may drop X-Request-Id) */
        json_t *problem = json_loadb(attempt->body, attempt->body_len, 0, NULL);
        copy_string(result->request_id, sizeof result->request_id,
                    json_string_value(json_object_get(problem, "request_id")));
        json_decref(problem);
    }
    copy_string(result->etag, sizeof result->etag, attempt->etag);
    copy_string(result->location, sizeof result->location, attempt->location);
    result->replayed = attempt->replayed;
    result->body = attempt->body;
    result->body_len = attempt->body_len;
    attempt->body = NULL;
}

static payd_status fail(payd_result *result, payd_status status, const char *message)
{
    result->status = status;
    copy_string(result->message, sizeof result->message, message);
    return status;
}

/* After a retryable failure: how long to wait, or why to give up instead. */
static payd_give_up plan_retry(payd_client *client, const http_attempt *attempt, int attempt_no,
                               int64_t retry_after_ms, int64_t now, int64_t deadline,
                               int64_t *delay_ms)
{
    const payd_retry_policy *policy = &client->policy;
    const backoff_policy delays = {.base_ms = policy->base_delay_ms,
                                   .max_delay_ms = policy->max_delay_ms};
    if (attempt->http_status == 0 && attempt->transport == CURLE_OPERATION_TIMEDOUT &&
        now >= deadline)
        return PAYD_GIVE_UP_DEADLINE; /* the deadline itself cut this attempt short */
    if (attempt_no > policy->max_retries)
        return PAYD_GIVE_UP_MAX_RETRIES;
    if (backoff_next_delay_ms(&delays, attempt_no, client_random_unit(), retry_after_ms,
                              delay_ms) != 0)
        return PAYD_GIVE_UP_RETRY_AFTER;
    if (*delay_ms >= deadline - now)
        return PAYD_GIVE_UP_DEADLINE; /* no use sleeping only to fail on waking */
    return PAYD_GIVE_UP_NONE;
}

payd_status payd_call(payd_client *client, const payd_request *req, payd_result *result)
{
    payd_result_clear(result);
    if (!client || !req || !req->method || !req->path || req->path[0] != '/' ||
        (req->query_len && !req->query))
        return fail(result, PAYD_ERR_USAGE, "a request needs a method and a path starting '/'");

    /* One key per logical call, chosen before the first attempt and sent with every retry. */
    bool is_post = strcmp(req->method, "POST") == 0;
    if (is_post && req->idempotency_key) {
        if (!valid_idempotency_key(req->idempotency_key))
            return fail(result, PAYD_ERR_USAGE,
                        "an Idempotency-Key is 1-255 visible ASCII characters");
        copy_string(result->idempotency_key, sizeof result->idempotency_key, req->idempotency_key);
    } else if (is_post && payd_uuid4(result->idempotency_key) != 0) {
        return fail(result, PAYD_ERR_NOMEM, "no random bytes for an Idempotency-Key");
    }

    char *url = build_url(client, req);
    if (!url)
        return fail(result, PAYD_ERR_NOMEM, "out of memory");

    const payd_retry_policy *policy = &client->policy;
    int64_t started = client_monotonic_ms(client);
    int64_t deadline = policy->deadline_ms > 0 ? started + policy->deadline_ms : INT64_MAX;
    http_exchange exchange = {
        .method = req->method,
        .url = url,
        .body = req->body,
        .idempotency_key = is_post ? result->idempotency_key : NULL,
        .if_match = req->if_match,
    };

    for (int attempt_no = 1;; attempt_no++) {
        int64_t attempt_start = client_monotonic_ms(client);
        int64_t remaining = deadline - attempt_start;
        exchange.timeout_ms =
            remaining < policy->attempt_timeout_ms ? remaining : policy->attempt_timeout_ms;
        if (exchange.timeout_ms < 1) /* a sleep overshot the deadline; 0 would mean no limit */
            exchange.timeout_ms = 1;

        http_attempt attempt;
        if (http_perform(client, &exchange, &attempt) != 0) {
            free(url);
            return fail(result, PAYD_ERR_NOMEM, "out of memory");
        }
        int64_t now = client_monotonic_ms(client);
        result->attempts = attempt_no;
        char code[sizeof result->code], detail[sizeof result->message];
        read_problem(&attempt, code, sizeof code, detail, sizeof detail);
        int64_t retry_after_ms = -1;
        if (attempt.retry_after[0] &&
            backoff_parse_retry_after(attempt.retry_after, client_wall_clock_ms(client),
                                      &retry_after_ms) != 0)
            retry_after_ms = -1; /* unreadable: our own backoff alone decides */

        bool answered = attempt.http_status != 0;
        bool succeeded = answered && attempt.http_status < 400;
        result->retryable =
            !succeeded && retry_is_retryable(attempt.http_status, code, attempt.transport);
        int64_t delay_ms = 0;
        if (result->retryable)
            result->give_up =
                plan_retry(client, &attempt, attempt_no, retry_after_ms, now, deadline, &delay_ms);
        payd_next_step next = PAYD_STEP_DONE;
        if (result->retryable)
            next = result->give_up == PAYD_GIVE_UP_NONE ? PAYD_STEP_RETRY : PAYD_STEP_GIVE_UP;

        if (client->observer) {
            payd_attempt report = {
                .method = req->method,
                .path = req->path,
                .attempt = attempt_no,
                .http_status = (int)attempt.http_status,
                .code = code,
                .error = answered ? "" : attempt.transport_error,
                .retry_after_ms = retry_after_ms,
                .elapsed_ms = now - attempt_start,
                .next = next,
                .delay_ms = delay_ms,
                .give_up = result->give_up,
                .idempotency_key = result->idempotency_key,
            };
            client->observer(client->observer_ctx, &report);
        }
        if (next == PAYD_STEP_RETRY) {
            http_attempt_clear(&attempt);
            client_sleep_ms(client, delay_ms);
            continue;
        }

        if (succeeded)
            result->status = PAYD_OK;
        else if (result->give_up == PAYD_GIVE_UP_DEADLINE)
            result->status = PAYD_ERR_DEADLINE;
        else
            result->status = answered ? PAYD_ERR_HTTP : PAYD_ERR_NETWORK;
        fill_result(result, &attempt, code, detail);
        http_attempt_clear(&attempt);
        free(url);
        return result->status;
    }
}
