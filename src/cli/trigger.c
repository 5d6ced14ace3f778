/* payctl trigger EVENT (like `stripe trigger`): makes, in test mode, the objects whose change
 * fires the event, through the API as any client would (each POST with its own Idempotency-Key,
 * retried as §14 says), and prints each object made as one JSON line. A live key is refused
 * before anything is made: trigger moves no real money (docs/modes.md). */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

/* One call; its JSON answer (NULL when the call failed, having said why). refused_ok: a final
 * 4xx is an expected answer here (a decline, an overdraft), printed like any other. */
static json_t *call(invocation *inv, const char *method, const char *path, json_t *body,
                    bool refused_ok, int *exit_code)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    payd_request request = {.method = method, .path = path, .body = text};
    payd_result r = {0};
    payd_call(inv->client, &request, &r);
    free(text);
    json_t *answer = r.body && r.body_len ? json_loadb(r.body, r.body_len, 0, NULL) : NULL;
    bool refused = r.status == PAYD_ERR_HTTP && r.http_status < 500 && r.http_status != 429;
    if (r.status != PAYD_OK && !(refused && refused_ok)) {
        fprintf(stderr, "payctl: trigger: %s %s: %s (HTTP %d%s%s): %s\n", method, path,
                payd_status_name(r.status), r.http_status, r.code[0] ? " " : "", r.code, r.message);
        *exit_code = refused ? EXIT_REFUSED : EXIT_GAVE_UP;
        json_decref(answer);
        answer = NULL;
    } else if (answer && strcmp(method, "GET") != 0) {
        print_json(stdout, r.body, r.body_len, false);
    }
    payd_result_clear(&r);
    return answer;
}

static const char *id_of(const json_t *object)
{
    const char *id = json_string_value(json_object_get(object, "id"));
    return id ? id : "";
}

/* A fresh name for what must be unique per user (biz_seq, external id, sku). */
static void unique(char *out, size_t size, const char *prefix)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(out, size, "%s-%lld%09ld-%d", prefix, (long long)ts.tv_sec, ts.tv_nsec, rand() % 1000);
}

static json_t *new_account(invocation *inv, int *exit_code)
{
    return call(inv, "POST", "/v1/accounts",
                json_pack("{s:s, s:s}", "currency", "USD", "name", "payctl trigger"), false,
                exit_code);
}

static json_t *new_payment(invocation *inv, const json_t *account, const char *source, bool manual,
                           int *exit_code)
{
    json_t *body = json_pack("{s:s, s:i, s:s, s:s}", "account_id", id_of(account), "amount", 2000,
                             "currency", "USD", "source", source);
    if (manual)
        json_object_set_new(body, "capture_method", json_string("manual"));
    return call(inv, "POST", "/v1/payments", body, !strcmp(source, "tok_chargeDeclined"),
                exit_code);
}

/* Each event type and what fires it. */
typedef int (*fixture)(invocation *inv, json_t *account);

static int fire_account(invocation *inv, json_t *account)
{
    (void)inv, (void)account; /* the account every fixture makes first */
    return EXIT_OK;
}

static int fire_payment(invocation *inv, json_t *account, const char *source, bool manual,
                        const char *then)
{
    int code = EXIT_OK;
    json_t *payment = new_payment(inv, account, source, manual, &code);
    if (payment && then) {
        char path[128];
        snprintf(path, sizeof path, "/v1/payments/%s/%s", id_of(payment), then);
        json_t *body = !strcmp(then, "refunds") ? json_pack("{s:i}", "amount", 500)
                       : !strcmp(then, "capture")
                           ? json_pack("{s:i, s:b}", "amount_to_capture", 1500, "final_capture", 1)
                           : json_pack("{s:s}", "cancellation_reason", "requested_by_customer");
        json_decref(call(inv, "POST", path, body, false, &code));
    }
    json_decref(payment);
    return code;
}

static int fire_succeeded(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_visa", false, NULL);
}
static int fire_failed(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_chargeDeclined", false, NULL);
}
static int fire_authorized(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_visa", true, NULL);
}
static int fire_captured(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_visa", true, "capture");
}
static int fire_canceled(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_visa", true, "cancel");
}
static int fire_refund(invocation *inv, json_t *a)
{
    return fire_payment(inv, a, "tok_visa", false, "refunds");
}

static int fire_order(invocation *inv, json_t *account, bool cancel)
{
    (void)account;
    int code = EXIT_OK;
    char external[64];
    unique(external, sizeof external, "trigger");
    json_t *order = call(inv, "POST", "/v1/orders",
                         json_pack("{s:s, s:i, s:s}", "external_order_id", external, "amount", 2000,
                                   "currency", "USD"),
                         false, &code);
    if (order && cancel) {
        char path[128];
        snprintf(path, sizeof path, "/v1/orders/%s/status", id_of(order));
        json_decref(
            call(inv, "PUT", path, json_pack("{s:s}", "status", "cancelled"), false, &code));
    }
    json_decref(order);
    return code;
}
static int fire_order_created(invocation *inv, json_t *a)
{
    return fire_order(inv, a, false);
}
static int fire_order_changed(invocation *inv, json_t *a)
{
    return fire_order(inv, a, true);
}

/* A transfer from the account: funded first when it must succeed, more than it holds when it
 * must fail (409 insufficient_funds, and the event of the failed transfer). */
static int fire_transfer(invocation *inv, json_t *account, bool succeed)
{
    int code = EXIT_OK;
    if (succeed)
        code = fire_payment(inv, account, "tok_visa", false, NULL);
    json_t *to = code == EXIT_OK ? new_account(inv, &code) : NULL;
    if (to) {
        char seq[64];
        unique(seq, sizeof seq, "trigger");
        json_decref(call(inv, "POST", "/v1/transfers",
                         json_pack("{s:s, s:s, s:s, s:i, s:s}", "biz_seq", seq, "from_account",
                                   id_of(account), "to_account", id_of(to), "amount",
                                   succeed ? 500 : 100000000, "currency", "USD"),
                         !succeed, &code));
    }
    json_decref(to);
    return code;
}
static int fire_transfer_succeeded(invocation *inv, json_t *a)
{
    return fire_transfer(inv, a, true);
}
static int fire_transfer_failed(invocation *inv, json_t *a)
{
    return fire_transfer(inv, a, false);
}

static int fire_reservation(invocation *inv, json_t *account)
{
    (void)account;
    int code = EXIT_OK;
    char sku[64], path[128];
    unique(sku, sizeof sku, "trigger");
    json_t *product =
        call(inv, "POST", "/v1/products",
             json_pack("{s:s, s:s, s:i}", "sku", sku, "name", "payctl trigger", "stock", 10), false,
             &code);
    if (product) {
        snprintf(path, sizeof path, "/v1/products/%s/reservations", sku);
        json_decref(call(inv, "POST", path, json_pack("{s:i}", "quantity", 1), false, &code));
    }
    json_decref(product);
    return code;
}

static const struct {
    const char *type;
    fixture fire;
} fixtures[] = {
    {"account.created", fire_account},
    {"payment.succeeded", fire_succeeded},
    {"payment.failed", fire_failed},
    {"payment.authorized", fire_authorized},
    {"payment.captured", fire_captured},
    {"payment.canceled", fire_canceled},
    {"refund.succeeded", fire_refund},
    {"order.created", fire_order_created},
    {"order.status_changed", fire_order_changed},
    {"transfer.succeeded", fire_transfer_succeeded},
    {"transfer.failed", fire_transfer_failed},
    {"reservation.created", fire_reservation},
};

int run_trigger(invocation *inv)
{
    const char *type = option_value(inv, "event");
    size_t n = sizeof fixtures / sizeof fixtures[0];
    size_t i = 0;
    while (i < n && strcmp(fixtures[i].type, type) != 0)
        i++;
    if (i == n) {
        fprintf(stderr, "payctl: trigger: %s cannot be triggered; one of:", type);
        for (size_t k = 0; k < n; k++)
            fprintf(stderr, " %s", fixtures[k].type);
        fprintf(stderr, "\n(webhook_endpoint.disabled follows days of failed deliveries: "
                        "docs/webhooks.md)\n");
        return EXIT_USAGE;
    }
    int code = EXIT_OK;
    json_t *me = call(inv, "GET", "/v1/users/me", NULL, false, &code);
    if (!me)
        return code;
    bool live = json_is_true(json_object_get(me, "livemode"));
    json_decref(me);
    if (live) {
        fprintf(stderr, "payctl: trigger makes objects and moves money: test mode only "
                        "(use a test key, sk_test_...)\n");
        return EXIT_USAGE;
    }
    srand((unsigned)time(NULL));
    json_t *account = new_account(inv, &code);
    if (!account)
        return code;
    code = fixtures[i].fire(inv, account);
    json_decref(account);
    return code;
}
