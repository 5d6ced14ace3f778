/* A first program with libpaydclient: open an account, pay into it, then list its payments.
 *
 *   PAYD_URL=http://127.0.0.1:8080 PAYD_API_KEY=... ./example_create_and_list
 *
 * Built by `make` (build/example_create_and_list). Against an installed library:
 *   cc create_and_list.c $(pkg-config --cflags --libs paydclient jansson)
 *
 * The library hands back the server's JSON as text; this example reads it with jansson. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include <payd/client.h>

/* Prints why a call failed and says whether retrying later could help. */
static int fail(const char *what, const payd_result *r)
{
    fprintf(stderr, "%s failed: %s, HTTP %d, code \"%s\": %s (%s)\n", what,
            payd_status_name(r->status), r->http_status, r->code, r->message,
            r->retryable ? "retryable: the client gave up" : "final");
    return 1;
}

/* The string `field` of a JSON object in text form, copied into out. */
static void json_field(const char *json_text, const char *field, char *out, size_t size)
{
    json_t *object = json_loads(json_text ? json_text : "", 0, NULL);
    const char *value = json_string_value(json_object_get(object, field));
    snprintf(out, size, "%s", value ? value : "");
    json_decref(object);
}

int main(void)
{
    const char *url = getenv("PAYD_URL"), *key = getenv("PAYD_API_KEY");
    if (!url || !key) {
        fprintf(stderr, "set PAYD_URL and PAYD_API_KEY\n");
        return 2;
    }
    payd_client *client = payd_client_new(url, key);
    if (!client)
        return 2;
    /* The defaults (4 retries, 1 s doubling, 30 s cap, 120 s deadline) suit most programs;
     * this one is interactive, so it waits less. */
    payd_retry_policy policy;
    payd_retry_policy_default(&policy);
    policy.deadline_ms = 30000;
    payd_client_set_retry_policy(client, &policy);

    int status = 0;
    payd_result result = {0};
    char account_id[64], payment_id[64], payment_status[32];

    if (payd_account_create(client, "USD", "example", &result) != PAYD_OK) {
        status = fail("creating the account", &result);
        goto done;
    }
    json_field(result.body, "id", account_id, sizeof account_id);
    printf("account %s\n", account_id);

    /* No idempotency_key given: the library makes one and reuses it for every retry, so even
     * a lost answer cannot charge twice. */
    payd_payment_params payment = {
        .account_id = account_id, .amount = 4200, .currency = "USD", .source = "tok_visa"};
    if (payd_payment_create(client, &payment, &result) != PAYD_OK) {
        status = fail("creating the payment", &result);
        goto done;
    }
    json_field(result.body, "id", payment_id, sizeof payment_id);
    json_field(result.body, "status", payment_status, sizeof payment_status);
    printf("payment %s %s after %d attempt(s), Idempotency-Key %s\n", payment_id, payment_status,
           result.attempts, result.idempotency_key);

    /* The iterator fetches pages as needed, following next_cursor. */
    payd_param page_size[] = {{"limit", "50"}};
    payd_list *list = payd_payments_list(client, account_id, page_size, 1);
    const char *item;
    payd_status list_status;
    while ((list_status = payd_list_next(list, &item)) == PAYD_OK && item)
        printf("listed %s\n", item);
    if (list_status != PAYD_OK)
        status = fail("listing the payments", payd_list_result(list));
    else
        printf("%ld payment(s) in %ld page(s)\n", payd_list_items(list), payd_list_pages(list));
    payd_list_close(list);

done:
    payd_result_clear(&result);
    payd_client_free(client);
    return status;
}
