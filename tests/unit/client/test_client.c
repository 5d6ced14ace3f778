/* The library's surface beyond the retry loop: the list iterator, the common operations (paths,
 * bodies, headers), results (problem fields, replay, Location) and the small helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "payd/client.h"
#include "scripted_server.h"

/* A list of seven payments served three per page; the cursor is the index to start at. The
 * first request of the page at index 3 fails once with 503 to show a page is retried. */
static void paged_list(scripted_server *s, const seen_request *req, script_step *out)
{
    const char *cursor = strstr(req->query, "cursor=");
    int start = cursor ? atoi(cursor + 7) : 0;
    static int failures_left;
    if (s->seen_count == 1)
        failures_left = 1;
    if (start == 3 && failures_left-- > 0) {
        *out = (script_step){.status = 503, .code = "overloaded"};
        return;
    }
    int end = start + 3 < 7 ? start + 3 : 7;
    char *w = s->responder_body;
    w += sprintf(w, "{\"object\":\"list\",\"data\":[");
    for (int i = start; i < end; i++)
        w += sprintf(w, "%s{\"id\":\"pay_%d\",\"amount\":%d}", i > start ? "," : "", i, 100 + i);
    if (end < 7)
        sprintf(w, "],\"has_more\":true,\"next_cursor\":\"%d\",\"prev_cursor\":null}", end);
    else
        sprintf(w, "],\"has_more\":false,\"next_cursor\":null,\"prev_cursor\":\"x\"}");
    *out = (script_step){.status = 200, .body = s->responder_body};
}

static void test_list_follows_next_cursor_to_the_end(void **state)
{
    fixture *f = start(NULL, 0, paged_list);
    payd_param query[] = {{"status", "succeeded"}, {"limit", "3"}};
    payd_list *list = payd_payments_list(f->client, "acct_1", query, 2);
    assert_non_null(list);
    const char *item;
    char expected[64];
    for (int i = 0; i < 7; i++) {
        assert_int_equal(payd_list_next(list, &item), PAYD_OK);
        assert_non_null(item);
        snprintf(expected, sizeof expected, "{\"id\":\"pay_%d\",\"amount\":%d}", i, 100 + i);
        assert_string_equal(item, expected);
    }
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_null(item);
    assert_int_equal(payd_list_next(list, &item), PAYD_OK); /* stays exhausted */
    assert_null(item);
    assert_int_equal(payd_list_pages(list), 3);
    assert_int_equal(payd_list_items(list), 7);
    /* 3 pages + the one retried 503 */
    assert_int_equal(scripted_seen(&f->server), 4);
    assert_string_equal(f->server.seen[0].path, "/v1/accounts/acct_1/payments");
    assert_string_equal(f->server.seen[0].query, "status=succeeded&limit=3");
    assert_string_equal(f->server.seen[3].query, "status=succeeded&limit=3&cursor=6");
    payd_list_close(list);
    finish(f);
}

static void test_list_starts_from_the_callers_cursor(void **state)
{
    fixture *f = start(NULL, 0, paged_list);
    payd_param query[] = {{"cursor", "6"}};
    payd_list *list = payd_list_open(f->client, "/v1/orders", query, 1);
    const char *item;
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_string_equal(item, "{\"id\":\"pay_6\",\"amount\":106}");
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_null(item);
    assert_string_equal(f->server.seen[0].query, "cursor=6");
    payd_list_close(list);
    finish(f);
}

static void test_a_failed_page_is_reported_and_can_be_asked_again(void **state)
{
    static const script_step steps[] = {
        {.status = 200,
         .body = "{\"object\":\"list\",\"data\":[{\"id\":\"a\"}],\"has_more\":true,"
                 "\"next_cursor\":\"c2\",\"prev_cursor\":null}"},
        {.status = 400, .code = "invalid_cursor"},
        {.status = 200,
         .body = "{\"object\":\"list\",\"data\":[{\"id\":\"b\"}],\"has_more\":false,"
                 "\"next_cursor\":null,\"prev_cursor\":\"c1\"}"}};
    fixture *f = start(steps, 3, NULL);
    payd_list *list = payd_list_open(f->client, "/v1/accounts", NULL, 0);
    const char *item;
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_string_equal(item, "{\"id\":\"a\"}");
    assert_int_equal(payd_list_next(list, &item), PAYD_ERR_HTTP);
    assert_null(item);
    assert_int_equal(payd_list_result(list)->http_status, 400);
    assert_string_equal(payd_list_result(list)->code, "invalid_cursor");
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_string_equal(item, "{\"id\":\"b\"}");
    assert_string_equal(f->server.seen[2].query, "cursor=c2");
    payd_list_close(list);
    finish(f);
}

static void test_a_page_that_is_not_a_list_is_a_protocol_error(void **state)
{
    static const char *bodies[] = {"not json", "{\"data\":{}}",
                                   "{\"data\":[],\"has_more\":true,\"next_cursor\":null}",
                                   "{\"data\":[1],\"has_more\":true,\"next_cursor\":\"same\"}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        script_step steps[] = {{.status = 200, .body = bodies[i]}};
        fixture *f = start(steps, 1, NULL);
        payd_param query[] = {{"cursor", "same"}};
        payd_list *list = payd_list_open(f->client, "/v1/accounts", query, i == 3 ? 1 : 0);
        const char *item;
        payd_status status;
        while ((status = payd_list_next(list, &item)) == PAYD_OK && item)
            ;
        assert_int_equal(status, PAYD_ERR_PROTOCOL);
        assert_int_equal(payd_list_result(list)->status, PAYD_ERR_PROTOCOL);
        payd_list_close(list);
        finish(f);
    }
}

static void test_payment_create_sends_the_contract(void **state)
{
    static const script_step steps[] = {
        {.status = 201,
         .body = "{\"id\":\"pay_1\",\"object\":\"payment\",\"status\":\"succeeded\"}",
         .header_name = "Location",
         .header_value = "/v1/payments/pay_1"}};
    fixture *f = start(steps, 1, NULL);
    payd_param metadata[] = {{"cart", "c-9"}};
    payd_payment_params params = {.account_id = "acct_1",
                                  .amount = 4200,
                                  .currency = "USD",
                                  .source = "tok_visa",
                                  .order_id = "ord_1",
                                  .description = "a \"quoted\" thing",
                                  .metadata = metadata,
                                  .metadata_len = 1};
    assert_int_equal(payd_payment_create(f->client, &params, &f->result), PAYD_OK);
    const seen_request *req = &f->server.seen[0];
    assert_string_equal(req->method, "POST");
    assert_string_equal(req->path, "/v1/payments");
    assert_string_equal(req->authorization, "Bearer " FIXTURE_API_KEY);
    assert_string_equal(req->content_type, "application/json");
    assert_int_equal(strlen(req->idempotency_key), 36);
    assert_string_equal(req->body,
                        "{\"account_id\":\"acct_1\",\"amount\":4200,\"currency\":\"USD\","
                        "\"source\":\"tok_visa\",\"order_id\":\"ord_1\","
                        "\"description\":\"a \\\"quoted\\\" thing\","
                        "\"metadata\":{\"cart\":\"c-9\"}}");
    assert_int_equal(f->result.http_status, 201);
    assert_string_equal(f->result.location, "/v1/payments/pay_1");
    assert_string_equal(f->result.request_id, "req_1");
    assert_false(f->result.replayed);
    assert_string_equal(f->result.body,
                        "{\"id\":\"pay_1\",\"object\":\"payment\",\"status\":\"succeeded\"}");
    finish(f);
}

static void test_a_decline_exposes_status_code_and_detail(void **state)
{
    static const script_step steps[] = {
        {.status = 402,
         .body = "{\"type\":\"about:blank\",\"title\":\"Card declined\",\"status\":402,"
                 "\"detail\":\"The card was declined.\",\"code\":\"card_declined\","
                 "\"decline_code\":\"generic_decline\"}"}};
    fixture *f = start(steps, 1, NULL);
    payd_payment_params params = {
        .account_id = "acct_1", .amount = 1, .currency = "USD", .source = "tok_chargeDeclined"};
    assert_int_equal(payd_payment_create(f->client, &params, &f->result), PAYD_ERR_HTTP);
    assert_int_equal(f->result.http_status, 402);
    assert_string_equal(f->result.code, "card_declined");
    assert_string_equal(f->result.message, "The card was declined.");
    assert_false(f->result.retryable);
    assert_non_null(strstr(f->result.body, "generic_decline"));
    finish(f);
}

static void test_operations_escape_ids_and_build_bodies(void **state)
{
    static const script_step steps[] = {{.status = 201, .body = "{}"},
                                        {.status = 200, .body = "{\"count\":45}"}};
    fixture *f = start(steps, 2, NULL);
    assert_int_equal(payd_refund_create(f->client, "pay/../x", 0, NULL, "k1", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[0].path, "/v1/payments/pay%2F..%2Fx/refunds");
    assert_string_equal(f->server.seen[0].body, "{}"); /* no amount: refund all that is left */
    assert_string_equal(f->server.seen[0].idempotency_key, "k1");

    int64_t count = 0;
    payd_param filters[] = {{"created_gte", "2026-10-12T08:31:07.123Z"}};
    assert_int_equal(payd_payments_count(f->client, "acct_1", filters, 1, &count, &f->result),
                     PAYD_OK);
    assert_int_equal(count, 45);
    assert_string_equal(f->server.seen[1].path, "/v1/accounts/acct_1/payments/count");
    assert_string_equal(f->server.seen[1].query, "created_gte=2026-10-12T08%3A31%3A07.123Z");
    finish(f);
}

/* §17: the capture's and cancel's paths and bodies */
static void test_capture_and_cancel_bodies(void **state)
{
    static const script_step steps[] = {{.status = 200, .body = "{}"},
                                        {.status = 200, .body = "{}"},
                                        {.status = 200, .body = "{}"}};
    fixture *f = start(steps, 3, NULL);
    assert_int_equal(payd_payment_capture(f->client, "pay_1", 300, false, "c1", &f->result),
                     PAYD_OK);
    assert_string_equal(f->server.seen[0].path, "/v1/payments/pay_1/capture");
    assert_string_equal(f->server.seen[0].body,
                        "{\"final_capture\":false,\"amount_to_capture\":300}");
    assert_string_equal(f->server.seen[0].idempotency_key, "c1");
    assert_int_equal(payd_payment_capture(f->client, "pay_1", 0, true, "c2", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[1].body, "{\"final_capture\":true}"); /* all */
    assert_int_equal(payd_payment_cancel(f->client, "pay_1", "abandoned", "c3", &f->result),
                     PAYD_OK);
    assert_string_equal(f->server.seen[2].path, "/v1/payments/pay_1/cancel");
    assert_string_equal(f->server.seen[2].body, "{\"cancellation_reason\":\"abandoned\"}");
    assert_int_equal(payd_payment_capture(f->client, "", 1, true, NULL, &f->result),
                     PAYD_ERR_USAGE);
    finish(f);
}

static void test_account_calls(void **state)
{
    static const script_step steps[] = {{.status = 201, .body = "{\"id\":\"acct_1\"}"},
                                        {.status = 200,
                                         .body = "{\"id\":\"acct_1\"}",
                                         .header_name = "ETag",
                                         .header_value = "\"v1\""}};
    fixture *f = start(steps, 2, NULL);
    assert_int_equal(payd_account_create(f->client, "USD", "Main", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[0].body, "{\"currency\":\"USD\",\"name\":\"Main\"}");
    assert_true(f->server.seen[0].idempotency_key[0] != '\0'); /* optional there, but safe */
    assert_int_equal(payd_account_get(f->client, "acct_1", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[1].method, "GET");
    assert_string_equal(f->result.etag, "\"v1\"");
    finish(f);
}

static void test_ledger_calls(void **state)
{
    static const script_step steps[] = {
        {.status = 200,
         .body = "{\"object\":\"balance\",\"available\":5,\"pending\":0,\"currency\":\"USD\"}"},
        {.status = 200, .body = "{\"id\":\"txn_1\"}"},
        {.status = 200,
         .body = "{\"object\":\"list\",\"data\":[{\"id\":\"txn_2\"}],\"has_more\":false,"
                 "\"next_cursor\":null,\"prev_cursor\":null}"}};
    fixture *f = start(steps, 3, NULL);
    assert_int_equal(payd_balance_get(f->client, "acct_1", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[0].method, "GET");
    assert_string_equal(f->server.seen[0].path, "/v1/accounts/acct_1/balance");
    assert_int_equal(payd_balance_transaction_get(f->client, "txn_1", &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[1].path, "/v1/balance_transactions/txn_1");
    payd_param query[] = {{"account_id", "acct_1"}, {"type", "charge"}};
    payd_list *list = payd_balance_transactions_list(f->client, query, 2);
    const char *item;
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_string_equal(item, "{\"id\":\"txn_2\"}");
    assert_int_equal(payd_list_next(list, &item), PAYD_OK);
    assert_null(item);
    assert_string_equal(f->server.seen[2].path, "/v1/balance_transactions");
    assert_string_equal(f->server.seen[2].query, "account_id=acct_1&type=charge");
    payd_list_close(list);
    assert_int_equal(payd_balance_get(f->client, "", &f->result), PAYD_ERR_USAGE);
    assert_int_equal(scripted_seen(&f->server), 3);
    finish(f);
}

static void test_usage_errors_send_nothing(void **state)
{
    fixture *f = start(NULL, 0, NULL);
    payd_payment_params missing = {.account_id = "acct_1", .amount = 0, .currency = "USD"};
    assert_int_equal(payd_payment_create(f->client, &missing, &f->result), PAYD_ERR_USAGE);
    assert_int_equal(payd_payment_get(f->client, "", &f->result), PAYD_ERR_USAGE);
    payd_request no_slash = {.method = "GET", .path = "v1/payments"};
    assert_int_equal(payd_call(f->client, &no_slash, &f->result), PAYD_ERR_USAGE);
    assert_true(f->result.message[0] != '\0');
    assert_int_equal(scripted_seen(&f->server), 0);
    finish(f);
}

static void test_retry_policy_is_validated(void **state)
{
    payd_client *client = payd_client_new("http://127.0.0.1:1/", "k");
    payd_retry_policy policy;
    payd_retry_policy_default(&policy);
    assert_int_equal(policy.max_retries, 4);
    assert_int_equal(policy.base_delay_ms, 1000);
    assert_int_equal(policy.max_delay_ms, 30000);
    payd_retry_policy bad = policy;
    bad.max_retries = -1;
    assert_int_equal(payd_client_set_retry_policy(client, &bad), PAYD_ERR_USAGE);
    bad = policy;
    bad.max_delay_ms = 10;
    assert_int_equal(payd_client_set_retry_policy(client, &bad), PAYD_ERR_USAGE);
    bad = policy;
    bad.attempt_timeout_ms = 0;
    assert_int_equal(payd_client_set_retry_policy(client, &bad), PAYD_ERR_USAGE);
    policy.max_retries = 9;
    assert_int_equal(payd_client_set_retry_policy(client, &policy), PAYD_OK);
    payd_retry_policy read_back;
    payd_client_get_retry_policy(client, &read_back);
    assert_int_equal(read_back.max_retries, 9);
    payd_client_free(client);
    assert_null(payd_client_new(NULL, "k"));
    assert_null(payd_client_new("http://x", NULL));
}

typedef struct worker {
    const char *url;
    int succeeded;
} worker;

/* One handle per thread, as the header promises: no shared state, so no locks needed. */
static void *make_payments(void *arg)
{
    worker *w = arg;
    payd_client *client = payd_client_new(w->url, "sk_thread");
    payd_result result = {0};
    payd_payment_params params = {
        .account_id = "acct_1", .amount = 1, .currency = "USD", .source = "tok_visa"};
    for (int i = 0; i < 25; i++)
        if (payd_payment_create(client, &params, &result) == PAYD_OK)
            w->succeeded++;
    payd_result_clear(&result);
    payd_client_free(client);
    return NULL;
}

static void test_one_handle_per_thread_runs_in_parallel(void **state)
{
    static const script_step steps[] = {{.status = 201}};
    fixture *f = start(steps, 1, NULL);
    pthread_t threads[4];
    worker workers[4];
    for (int i = 0; i < 4; i++) {
        workers[i] = (worker){.url = f->server.url};
        assert_int_equal(pthread_create(&threads[i], NULL, make_payments, &workers[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(workers[i].succeeded, 25);
    }
    assert_int_equal(scripted_seen(&f->server), 100);
    finish(f);
}

static void test_helpers(void **state)
{
    char *escaped = payd_escape("a b/c?d=e&f~g_h.i-j\xc3\xa9");
    assert_string_equal(escaped, "a%20b%2Fc%3Fd%3De%26f~g_h.i-j%C3%A9");
    payd_free(escaped);
    char a[37], b[37];
    assert_int_equal(payd_uuid4(a), 0);
    assert_int_equal(payd_uuid4(b), 0);
    assert_int_equal(strlen(a), 36);
    assert_string_not_equal(a, b);
    assert_int_equal(a[14], '4');
    assert_string_equal(payd_status_name(PAYD_ERR_DEADLINE), "deadline_exceeded");
    assert_string_equal(payd_give_up_name(PAYD_GIVE_UP_RETRY_AFTER),
                        "retry_after_exceeds_max_delay");
    payd_result_clear(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_follows_next_cursor_to_the_end),
        cmocka_unit_test(test_list_starts_from_the_callers_cursor),
        cmocka_unit_test(test_a_failed_page_is_reported_and_can_be_asked_again),
        cmocka_unit_test(test_a_page_that_is_not_a_list_is_a_protocol_error),
        cmocka_unit_test(test_payment_create_sends_the_contract),
        cmocka_unit_test(test_a_decline_exposes_status_code_and_detail),
        cmocka_unit_test(test_operations_escape_ids_and_build_bodies),
        cmocka_unit_test(test_capture_and_cancel_bodies),
        cmocka_unit_test(test_account_calls),
        cmocka_unit_test(test_ledger_calls),
        cmocka_unit_test(test_usage_errors_send_nothing),
        cmocka_unit_test(test_retry_policy_is_validated),
        cmocka_unit_test(test_one_handle_per_thread_runs_in_parallel),
        cmocka_unit_test(test_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
