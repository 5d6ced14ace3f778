/* The common operations: each builds its path and JSON body, then makes one payd_call. */
#include "client/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static payd_status usage(payd_result *result, const char *message)
{
    payd_result_clear(result);
    result->status = PAYD_ERR_USAGE;
    copy_string(result->message, sizeof result->message, message);
    return PAYD_ERR_USAGE;
}

static payd_status nomem(payd_result *result)
{
    payd_result_clear(result);
    result->status = PAYD_ERR_NOMEM;
    copy_string(result->message, sizeof result->message, "out of memory");
    return PAYD_ERR_NOMEM;
}

/* "/v1/<collection>/<escaped id><suffix>", malloc'd. */
static char *resource_path(const char *collection, const char *id, const char *suffix)
{
    char *escaped = payd_escape(id);
    char *path = NULL;
    if (escaped && asprintf(&path, "/v1/%s/%s%s", collection, escaped, suffix) < 0)
        path = NULL;
    free(escaped);
    return path;
}

/* Sends body (which it consumes) to path with method. */
static payd_status send_json(payd_client *client, const char *method, const char *path,
                             json_t *body, const char *idempotency_key, payd_result *result)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (body && !text)
        return nomem(result);
    payd_request request = {
        .method = method, .path = path, .body = text, .idempotency_key = idempotency_key};
    payd_status status = payd_call(client, &request, result);
    free(text);
    return status;
}

static payd_status get_resource(payd_client *client, const char *collection, const char *id,
                                const char *suffix, payd_result *result)
{
    if (!id || !*id)
        return usage(result, "an id is required");
    char *path = resource_path(collection, id, suffix);
    if (!path)
        return nomem(result);
    payd_status status = send_json(client, "GET", path, NULL, NULL, result);
    free(path);
    return status;
}

payd_status payd_payment_create(payd_client *client, const payd_payment_params *p,
                                payd_result *result)
{
    if (!p || !p->account_id || !p->currency || !p->source || p->amount <= 0 ||
        (p->metadata_len && !p->metadata))
        return usage(result, "account_id, a positive amount, currency and source are required");
    json_t *body = json_pack("{s:s, s:I, s:s, s:s}", "account_id", p->account_id, "amount",
                             (json_int_t)p->amount, "currency", p->currency, "source", p->source);
    if (!body)
        return nomem(result);
    if (p->order_id)
        json_object_set_new(body, "order_id", json_string(p->order_id));
    if (p->description)
        json_object_set_new(body, "description", json_string(p->description));
    if (p->capture_method)
        json_object_set_new(body, "capture_method", json_string(p->capture_method));
    if (p->metadata_len) {
        json_t *metadata = json_object();
        for (size_t i = 0; i < p->metadata_len; i++)
            json_object_set_new(metadata, p->metadata[i].name, json_string(p->metadata[i].value));
        json_object_set_new(body, "metadata", metadata);
    }
    return send_json(client, "POST", "/v1/payments", body, p->idempotency_key, result);
}

payd_status payd_payment_get(payd_client *client, const char *payment_id, payd_result *result)
{
    return get_resource(client, "payments", payment_id, "", result);
}

payd_status payd_refund_create(payd_client *client, const char *payment_id, int64_t amount,
                               const char *reason, const char *idempotency_key, payd_result *result)
{
    if (!payment_id || !*payment_id || amount < 0)
        return usage(result, "a payment id and an amount >= 0 are required");
    char *path = resource_path("payments", payment_id, "/refunds");
    json_t *body = json_object();
    if (!path || !body) {
        free(path);
        json_decref(body);
        return nomem(result);
    }
    if (amount > 0) /* 0: leave it out, so the server refunds all that is left */
        json_object_set_new(body, "amount", json_integer((json_int_t)amount));
    if (reason)
        json_object_set_new(body, "reason", json_string(reason));
    payd_status status = send_json(client, "POST", path, body, idempotency_key, result);
    free(path);
    return status;
}

payd_status payd_payment_capture(payd_client *client, const char *payment_id, int64_t amount,
                                 bool final_capture, const char *idempotency_key,
                                 payd_result *result)
{
    if (!payment_id || !*payment_id || amount < 0)
        return usage(result, "a payment id and an amount >= 0 are required");
    char *path = resource_path("payments", payment_id, "/capture");
    json_t *body = json_pack("{s:b}", "final_capture", final_capture);
    if (!path || !body) {
        free(path);
        json_decref(body);
        return nomem(result);
    }
    if (amount > 0) /* 0: leave it out, so the server captures all that is capturable */
        json_object_set_new(body, "amount_to_capture", json_integer((json_int_t)amount));
    payd_status status = send_json(client, "POST", path, body, idempotency_key, result);
    free(path);
    return status;
}

payd_status payd_payment_cancel(payd_client *client, const char *payment_id, const char *reason,
                                const char *idempotency_key, payd_result *result)
{
    if (!payment_id || !*payment_id)
        return usage(result, "a payment id is required");
    char *path = resource_path("payments", payment_id, "/cancel");
    json_t *body = json_object();
    if (!path || !body) {
        free(path);
        json_decref(body);
        return nomem(result);
    }
    if (reason)
        json_object_set_new(body, "cancellation_reason", json_string(reason));
    payd_status status = send_json(client, "POST", path, body, idempotency_key, result);
    free(path);
    return status;
}

payd_status payd_account_create(payd_client *client, const char *currency, const char *name,
                                payd_result *result)
{
    if (!currency)
        return usage(result, "a currency is required");
    json_t *body = json_pack("{s:s}", "currency", currency);
    if (!body)
        return nomem(result);
    if (name)
        json_object_set_new(body, "name", json_string(name));
    return send_json(client, "POST", "/v1/accounts", body, NULL, result);
}

payd_status payd_account_get(payd_client *client, const char *account_id, payd_result *result)
{
    return get_resource(client, "accounts", account_id, "", result);
}

payd_status payd_payments_count(payd_client *client, const char *account_id,
                                const payd_param *filters, size_t filters_len, int64_t *count,
                                payd_result *result)
{
    *count = -1;
    if (!account_id || !*account_id || (filters_len && !filters))
        return usage(result, "an account id is required");
    char *path = resource_path("accounts", account_id, "/payments/count");
    if (!path)
        return nomem(result);
    payd_request request = {
        .method = "GET", .path = path, .query = filters, .query_len = filters_len};
    payd_status status = payd_call(client, &request, result);
    free(path);
    if (status != PAYD_OK)
        return status;
    json_t *answer = json_loadb(result->body ? result->body : "", result->body_len, 0, NULL);
    json_t *n = json_object_get(answer, "count");
    if (json_is_integer(n))
        *count = json_integer_value(n);
    json_decref(answer);
    if (*count < 0) {
        result->status = PAYD_ERR_PROTOCOL;
        copy_string(result->message, sizeof result->message, "the answer has no `count`");
    }
    return result->status;
}

payd_status payd_balance_get(payd_client *client, const char *account_id, payd_result *result)
{
    return get_resource(client, "accounts", account_id, "/balance", result);
}

payd_status payd_balance_transaction_get(payd_client *client, const char *transaction_id,
                                         payd_result *result)
{
    return get_resource(client, "balance_transactions", transaction_id, "", result);
}

payd_list *payd_balance_transactions_list(payd_client *client, const payd_param *query,
                                          size_t query_len)
{
    return payd_list_open(client, "/v1/balance_transactions", query, query_len);
}

payd_list *payd_payments_list(payd_client *client, const char *account_id, const payd_param *query,
                              size_t query_len)
{
    if (!account_id || !*account_id)
        return NULL;
    char *path = resource_path("accounts", account_id, "/payments");
    if (!path)
        return NULL;
    payd_list *list = payd_list_open(client, path, query, query_len);
    free(path);
    return list;
}

payd_status payd_event_redeliver(payd_client *client, const char *event_id, const char *endpoint_id,
                                 const char *idempotency_key, payd_result *result)
{
    if (!event_id || !*event_id)
        return usage(result, "an event id is required");
    char *path = resource_path("events", event_id, "/redeliver");
    json_t *body = json_object();
    if (!path || !body) {
        free(path);
        json_decref(body);
        return nomem(result);
    }
    if (endpoint_id) /* left out: every endpoint that wants the event */
        json_object_set_new(body, "endpoint_id", json_string(endpoint_id));
    payd_status status = send_json(client, "POST", path, body, idempotency_key, result);
    free(path);
    return status;
}

payd_status payd_webhook_endpoint_recover(payd_client *client, const char *endpoint_id,
                                          const char *since, const char *idempotency_key,
                                          payd_result *result)
{
    if (!endpoint_id || !*endpoint_id || !since)
        return usage(result, "an endpoint id and a time (since) are required");
    char *path = resource_path("webhook_endpoints", endpoint_id, "/recover");
    json_t *body = json_pack("{s:s}", "since", since);
    if (!path || !body) {
        free(path);
        json_decref(body);
        return nomem(result);
    }
    payd_status status = send_json(client, "POST", path, body, idempotency_key, result);
    free(path);
    return status;
}
