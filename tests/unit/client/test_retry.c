/* The retry policy of docs/api.md §14, end to end through libcurl against a scripted server.
 * Time goes through fake hooks, so no test waits for a backoff delay; only the two timeout tests
 * spend a fraction of a second for real. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "payd/client.h"
#include "scripted_server.h"

static void set_policy(fixture *f, int max_retries, int64_t base_ms, int64_t max_delay_ms,
                       int64_t deadline_ms)
{
    payd_retry_policy policy;
    payd_retry_policy_default(&policy);
    policy.max_retries = max_retries;
    policy.base_delay_ms = base_ms;
    policy.max_delay_ms = max_delay_ms;
    policy.deadline_ms = deadline_ms;
    assert_int_equal(payd_client_set_retry_policy(f->client, &policy), PAYD_OK);
}

static payd_status post_payment(fixture *f)
{
    payd_request request = {.method = "POST", .path = "/v1/payments", .body = "{\"amount\":1}"};
    return payd_call(f->client, &request, &f->result);
}

static bool looks_like_uuid4(const char *s)
{
    if (strlen(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-')
        return false;
    return s[14] == '4' && strchr("89ab", s[19]) != NULL;
}

static void test_503_503_201_is_one_call_of_three_attempts_with_one_key(void **state)
{
    static const script_step steps[] = {{.status = 503, .code = "processor_unavailable"},
                                        {.status = 503, .code = "processor_unavailable"},
                                        {.status = 201}};
    fixture *f = start(steps, 3, NULL);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->result.http_status, 201);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(scripted_seen(&f->server), 3);
    assert_int_equal(f->time.sleep_count, 2);
    const char *key = f->server.seen[0].idempotency_key;
    assert_true(looks_like_uuid4(key));
    assert_string_equal(f->server.seen[1].idempotency_key, key);
    assert_string_equal(f->server.seen[2].idempotency_key, key);
    assert_string_equal(f->result.idempotency_key, key);
    assert_string_equal(f->server.seen[2].body, "{\"amount\":1}");
    finish(f);
}

static void test_retry_after_in_seconds_is_a_floor(void **state)
{
    static const script_step steps[] = {{.status = 429, .code = "rate_limited", .retry_after = "2"},
                                        {.status = 201}};
    fixture *f = start(steps, 2, NULL);
    set_policy(f, 4, 100, 30000, 0); /* our own delay would be ~100 ms */
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->result.attempts, 2);
    assert_int_equal(f->time.sleep_count, 1);
    assert_true(f->time.sleeps[0] >= 2000);
    finish(f);
}

static void test_retry_after_as_http_date_is_a_floor(void **state)
{
    /* Three seconds after the fake wall clock's start, 2026-10-12T08:31:07Z. */
    static const script_step steps[] = {
        {.status = 429, .code = "rate_limited", .retry_after = "Mon, 12 Oct 2026 08:31:10 GMT"},
        {.status = 201}};
    fixture *f = start(steps, 2, NULL);
    set_policy(f, 4, 100, 30000, 0);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->time.sleep_count, 1);
    assert_true(f->time.sleeps[0] >= 3000);
    assert_true(f->time.sleeps[0] <= 3000 * 13 / 10); /* the floor plus at most 30 % spread */
    finish(f);
}

static void test_retry_after_beyond_max_delay_gives_up_at_once(void **state)
{
    static const script_step steps[] = {{.status = 503, .code = "overloaded", .retry_after = "60"},
                                        {.status = 201}};
    fixture *f = start(steps, 2, NULL);
    set_policy(f, 4, 1000, 30000, 0);
    assert_int_equal(post_payment(f), PAYD_ERR_HTTP);
    assert_int_equal(f->result.http_status, 503);
    assert_string_equal(f->result.code, "overloaded");
    assert_true(f->result.retryable);
    assert_int_equal(f->result.give_up, PAYD_GIVE_UP_RETRY_AFTER);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->time.sleep_count, 0);
    finish(f);
}

static void test_final_client_errors_are_never_retried(void **state)
{
    static const struct {
        int status;
        const char *code;
    } finals[] = {{400, "invalid_parameter"},      {402, "card_declined"},
                  {404, "resource_missing"},       {412, "version_conflict"},
                  {422, "idempotency_key_reused"}, {409, "duplicate_payment"}};
    for (size_t i = 0; i < sizeof finals / sizeof finals[0]; i++) {
        script_step steps[] = {{.status = finals[i].status, .code = finals[i].code},
                               {.status = 201}};
        fixture *f = start(steps, 2, NULL);
        assert_int_equal(post_payment(f), PAYD_ERR_HTTP);
        assert_int_equal(f->result.http_status, finals[i].status);
        assert_string_equal(f->result.code, finals[i].code);
        assert_false(f->result.retryable);
        assert_int_equal(f->result.give_up, PAYD_GIVE_UP_NONE);
        assert_int_equal(f->result.attempts, 1);
        assert_int_equal(scripted_seen(&f->server), 1);
        assert_int_equal(f->time.sleep_count, 0);
        finish(f);
    }
}

static void test_409_request_in_progress_is_retried(void **state)
{
    static const script_step steps[] = {
        {.status = 409, .code = "request_in_progress", .retry_after = "1"},
        {.status = 201, .header_name = "Idempotent-Replayed", .header_value = "true"}};
    fixture *f = start(steps, 2, NULL);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->result.attempts, 2);
    assert_true(f->result.replayed);
    assert_true(f->time.sleeps[0] >= 1000);
    assert_string_equal(f->server.seen[1].idempotency_key, f->server.seen[0].idempotency_key);
    finish(f);
}

static void test_dropped_connection_is_retried(void **state)
{
    static const script_step steps[] = {{.action = SCRIPT_DROP}, {.status = 201}};
    fixture *f = start(steps, 2, NULL);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->result.http_status, 201);
    assert_int_equal(f->result.attempts, 2);
    assert_int_equal(scripted_seen(&f->server), 2);
    assert_string_equal(f->server.seen[1].idempotency_key, f->server.seen[0].idempotency_key);
    finish(f);
}

static void test_refused_connection_is_retried_then_reported(void **state)
{
    fixture *f = start(NULL, 0, NULL);
    scripted_stop(&f->server); /* nothing listens on that port any more */
    set_policy(f, 2, 1000, 30000, 0);
    assert_int_equal(post_payment(f), PAYD_ERR_NETWORK);
    assert_int_equal(f->result.http_status, 0);
    assert_true(f->result.retryable);
    assert_int_equal(f->result.give_up, PAYD_GIVE_UP_MAX_RETRIES);
    assert_int_equal(f->result.attempts, 3);
    assert_int_equal(f->time.sleep_count, 2);
    assert_true(f->result.message[0] != '\0');
    payd_result_clear(&f->result);
    payd_client_free(f->client);
    free(f);
}

static void test_gives_up_after_max_retries(void **state)
{
    static const script_step steps[] = {{.status = 503, .code = "processor_unavailable"}};
    for (int max_retries = 0; max_retries <= 3; max_retries++) {
        fixture *f = start(steps, 1, NULL);
        set_policy(f, max_retries, 1000, 30000, 0);
        assert_int_equal(post_payment(f), PAYD_ERR_HTTP);
        assert_int_equal(f->result.http_status, 503);
        assert_true(f->result.retryable);
        assert_int_equal(f->result.give_up, PAYD_GIVE_UP_MAX_RETRIES);
        assert_int_equal(f->result.attempts, max_retries + 1);
        assert_int_equal(scripted_seen(&f->server), (size_t)max_retries + 1);
        assert_int_equal(f->time.sleep_count, max_retries);
        assert_non_null(f->result.body); /* the last answer is kept */
        finish(f);
    }
}

static void test_gives_up_when_the_next_wait_would_pass_the_deadline(void **state)
{
    static const script_step steps[] = {{.status = 503, .code = "processor_unavailable"}};
    fixture *f = start(steps, 1, NULL);
    set_policy(f, 100, 1000, 30000, 5000);
    int64_t started = f->time.monotonic_ms;
    assert_int_equal(post_payment(f), PAYD_ERR_DEADLINE);
    assert_int_equal(f->result.give_up, PAYD_GIVE_UP_DEADLINE);
    assert_true(f->result.retryable);
    assert_int_equal(f->result.http_status, 503); /* the last answer is still reported */
    assert_true(f->time.monotonic_ms - started < 5000);
    assert_true(f->result.attempts >= 3 && f->result.attempts <= 4);
    finish(f);
}

static void test_deadline_cuts_a_hanging_attempt(void **state)
{
    static const script_step steps[] = {{.action = SCRIPT_HANG, .status = 201, .hang_ms = 3000}};
    fixture *f = start(steps, 1, NULL);
    payd_client_set_time_hooks(f->client, NULL); /* a real timeout needs the real clock */
    set_policy(f, 4, 1000, 30000, 300);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(post_payment(f), PAYD_ERR_DEADLINE);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int64_t took_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    assert_true(took_ms >= 250 && took_ms < 2000);
    assert_int_equal(f->result.attempts, 1);
    assert_int_equal(f->result.give_up, PAYD_GIVE_UP_DEADLINE);
    finish(f);
}

static void test_attempt_timeout_is_retried_with_the_same_key(void **state)
{
    static const script_step steps[] = {{.action = SCRIPT_HANG, .status = 201, .hang_ms = 4000},
                                        {.status = 201}};
    fixture *f = start(steps, 2, NULL);
    payd_retry_policy policy;
    payd_retry_policy_default(&policy);
    /* long enough that the second attempt, on a loaded machine, is not cut too */
    policy.attempt_timeout_ms = 1000;
    policy.base_delay_ms = 10;
    assert_int_equal(payd_client_set_retry_policy(f->client, &policy), PAYD_OK);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(f->result.attempts, 2);
    assert_string_equal(f->server.seen[1].idempotency_key, f->server.seen[0].idempotency_key);
    finish(f);
}

static void test_every_delay_lies_in_the_jitter_band_and_is_capped(void **state)
{
    static const script_step steps[] = {{.status = 503, .code = "processor_unavailable"}};
    const int64_t base = 1000, cap = 5000;
    for (int run = 0; run < 10; run++) {
        fixture *f = start(steps, 1, NULL);
        set_policy(f, 6, base, cap, 0);
        assert_int_equal(post_payment(f), PAYD_ERR_HTTP);
        assert_int_equal(f->time.sleep_count, 6);
        for (int n = 1; n <= 6; n++) {
            int64_t nominal = base << (n - 1);
            if (nominal > cap)
                nominal = cap;
            int64_t delay = f->time.sleeps[n - 1];
            assert_true(delay >= nominal * 7 / 10);
            assert_true(delay <= nominal * 13 / 10);
        }
        finish(f);
    }
}

typedef struct observed {
    payd_attempt attempts[16];
    char codes[16][64];
    int count;
} observed;

static void observe(void *ctx, const payd_attempt *a)
{
    observed *o = ctx;
    if (o->count < 16) {
        o->attempts[o->count] = *a;
        snprintf(o->codes[o->count], sizeof o->codes[0], "%s", a->code);
    }
    o->count++;
}

static void test_observer_sees_each_attempt_and_the_delay_chosen(void **state)
{
    /* The drop comes first: on a reused keep-alive connection libcurl itself would quietly
     * resend once (with the same key) and the observer would see one attempt fewer. */
    static const script_step steps[] = {
        {.action = SCRIPT_DROP},
        {.status = 503, .code = "processor_unavailable", .retry_after = "1"},
        {.status = 201}};
    fixture *f = start(steps, 3, NULL);
    observed seen = {0};
    payd_client_set_observer(f->client, observe, &seen);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(seen.count, 3);
    assert_int_equal(seen.attempts[0].attempt, 1);
    assert_int_equal(seen.attempts[0].http_status, 0);
    assert_int_equal(seen.attempts[0].retry_after_ms, -1);
    assert_int_equal(seen.attempts[0].next, PAYD_STEP_RETRY);
    assert_int_equal(seen.attempts[0].delay_ms, f->time.sleeps[0]);
    assert_int_equal(seen.attempts[1].attempt, 2);
    assert_int_equal(seen.attempts[1].http_status, 503);
    assert_string_equal(seen.codes[1], "processor_unavailable");
    assert_int_equal(seen.attempts[1].retry_after_ms, 1000);
    assert_int_equal(seen.attempts[1].next, PAYD_STEP_RETRY);
    assert_int_equal(seen.attempts[1].delay_ms, f->time.sleeps[1]);
    assert_true(f->time.sleeps[1] >= 1000);
    assert_int_equal(seen.attempts[2].http_status, 201);
    assert_int_equal(seen.attempts[2].next, PAYD_STEP_DONE);
    finish(f);
}

static void test_observer_is_told_when_the_client_gives_up(void **state)
{
    static const script_step steps[] = {{.status = 503}};
    fixture *f = start(steps, 1, NULL);
    set_policy(f, 1, 1000, 30000, 0);
    observed seen = {0};
    payd_client_set_observer(f->client, observe, &seen);
    assert_int_equal(post_payment(f), PAYD_ERR_HTTP);
    assert_int_equal(seen.count, 2);
    assert_int_equal(seen.attempts[1].next, PAYD_STEP_GIVE_UP);
    assert_int_equal(seen.attempts[1].give_up, PAYD_GIVE_UP_MAX_RETRIES);
    finish(f);
}

static void test_the_callers_key_is_used_and_gets_send_none(void **state)
{
    static const script_step steps[] = {{.status = 503}, {.status = 201}, {.status = 200}};
    fixture *f = start(steps, 3, NULL);
    payd_request post = {.method = "POST",
                         .path = "/v1/payments",
                         .body = "{}",
                         .idempotency_key = "order-77-attempt"};
    assert_int_equal(payd_call(f->client, &post, &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[0].idempotency_key, "order-77-attempt");
    assert_string_equal(f->server.seen[1].idempotency_key, "order-77-attempt");
    payd_request get = {.method = "GET", .path = "/v1/payments/pay_1"};
    assert_int_equal(payd_call(f->client, &get, &f->result), PAYD_OK);
    assert_string_equal(f->server.seen[2].idempotency_key, "");
    assert_string_equal(f->result.idempotency_key, "");
    finish(f);
}

static void test_each_logical_call_gets_a_fresh_key(void **state)
{
    static const script_step steps[] = {{.status = 201}};
    fixture *f = start(steps, 1, NULL);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_int_equal(post_payment(f), PAYD_OK);
    assert_true(looks_like_uuid4(f->server.seen[1].idempotency_key));
    assert_string_not_equal(f->server.seen[0].idempotency_key, f->server.seen[1].idempotency_key);
    finish(f);
}

static void test_an_invalid_key_is_refused_before_sending(void **state)
{
    fixture *f = start(NULL, 0, NULL);
    const char *bad_keys[] = {"", "has space", "line\r\nX-Evil: 1", "caf\xc3\xa9"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        payd_request request = {
            .method = "POST", .path = "/v1/payments", .body = "{}", .idempotency_key = bad_keys[i]};
        assert_int_equal(payd_call(f->client, &request, &f->result), PAYD_ERR_USAGE);
    }
    char long_key[300];
    memset(long_key, 'k', 256);
    long_key[256] = '\0';
    payd_request request = {
        .method = "POST", .path = "/v1/payments", .body = "{}", .idempotency_key = long_key};
    assert_int_equal(payd_call(f->client, &request, &f->result), PAYD_ERR_USAGE);
    assert_int_equal(scripted_seen(&f->server), 0);
    finish(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_503_503_201_is_one_call_of_three_attempts_with_one_key),
        cmocka_unit_test(test_retry_after_in_seconds_is_a_floor),
        cmocka_unit_test(test_retry_after_as_http_date_is_a_floor),
        cmocka_unit_test(test_retry_after_beyond_max_delay_gives_up_at_once),
        cmocka_unit_test(test_final_client_errors_are_never_retried),
        cmocka_unit_test(test_409_request_in_progress_is_retried),
        cmocka_unit_test(test_dropped_connection_is_retried),
        cmocka_unit_test(test_refused_connection_is_retried_then_reported),
        cmocka_unit_test(test_gives_up_after_max_retries),
        cmocka_unit_test(test_gives_up_when_the_next_wait_would_pass_the_deadline),
        cmocka_unit_test(test_deadline_cuts_a_hanging_attempt),
        cmocka_unit_test(test_attempt_timeout_is_retried_with_the_same_key),
        cmocka_unit_test(test_every_delay_lies_in_the_jitter_band_and_is_capped),
        cmocka_unit_test(test_observer_sees_each_attempt_and_the_delay_chosen),
        cmocka_unit_test(test_observer_is_told_when_the_client_gives_up),
        cmocka_unit_test(test_the_callers_key_is_used_and_gets_send_none),
        cmocka_unit_test(test_each_logical_call_gets_a_fresh_key),
        cmocka_unit_test(test_an_invalid_key_is_refused_before_sending),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
