/* Every payctl command as data: where it sends each option. docs/api.md §3-§10 is the source. */
#include "cli/cli.h"

#include <stddef.h>

/* One option: --NAME METAVAR, its kind, where its value goes, required or not, and its help. */
#define OPT(name, metavar, kind, target, field, required, help)                                    \
    {                                                                                              \
        name, metavar, kind, target, field, required, help                                         \
    }
#define OPTIONS(...) ((const option_spec[]){__VA_ARGS__, {0}})
#define NO_OPTIONS   ((const option_spec[]){{0}})
/* One command: group, verb, kind, method, path(s), the option a bare argument fills, help. */
#define COMMAND(group, verb, kind, method, paths, positional, summary, options)                    \
    {                                                                                              \
        group, verb, kind, method, paths, positional, summary, options, NULL                       \
    }
/* A command that runs itself (events.c) rather than through the generic runner. */
#define COMMAND_RUN(group, verb, method, paths, summary, options, run)                             \
    {                                                                                              \
        group, verb, COMMAND_SINGLE, method, paths, NULL, summary, options, run                    \
    }
/* The same, for a command whose bare argument fills the option `positional`. */
#define COMMAND_RUN_ON(group, verb, method, paths, positional, summary, options, run)              \
    {                                                                                              \
        group, verb, COMMAND_SINGLE, method, paths, positional, summary, options, run              \
    }
#define PATHS(...)                                                                                 \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }

/* Options shared by several commands, one definition each. */
#define IDEMPOTENCY_KEY                                                                            \
    OPT("idempotency-key", "KEY", VALUE_STRING, TO_IDEMPOTENCY_KEY, NULL, false,                   \
        "reuse this key instead of a fresh UUIDv4 (to resume an earlier attempt)")
#define CURRENCY                                                                                   \
    OPT("currency", "CODE", VALUE_STRING, TO_BODY, "currency", true, "three letters, e.g. USD")
#define AMOUNT(required, help) OPT("amount", "N", VALUE_INTEGER, TO_BODY, "amount", required, help)
#define DESCRIPTION                                                                                \
    OPT("description", "TEXT", VALUE_STRING, TO_BODY, "description", false,                        \
        "free text, at most 500 characters")
#define ID_IN_PATH(what) OPT("id", "ID", VALUE_STRING, TO_PATH, "id", true, what)
#define ACCOUNT_IN_PATH  OPT("account", "ID", VALUE_STRING, TO_PATH, "account", true, "the account")
/* Optimistic concurrency (§9): either form guards a write. */
#define VERSION_CHECK                                                                              \
    OPT("version", "N", VALUE_INTEGER, TO_BODY, "version", false,                                  \
        "apply only if the current version is N (else 409 version_conflict)"),                     \
        OPT("if-match", "ETAG", VALUE_STRING, TO_IF_MATCH, NULL, false,                            \
            "apply only if the ETag still matches (else 412 version_conflict)")
#define PAYMENT_FILTERS                                                                            \
    OPT("status", "S", VALUE_STRING, TO_QUERY, "status", false,                                    \
        "requires_capture, succeeded, failed, canceled, partially_refunded or refunded"),          \
        OPT("created-gte", "TIME", VALUE_STRING, TO_QUERY, "created_gte", false,                   \
            "created at or after this RFC 3339 time"),                                             \
        OPT("created-lt", "TIME", VALUE_STRING, TO_QUERY, "created_lt", false,                     \
            "created before this RFC 3339 time")
/* Every list command takes these (§4). */
#define LIST_OPTIONS                                                                               \
    OPT("limit", "N", VALUE_INTEGER, TO_QUERY, "limit", false,                                     \
        "items per page, 1-100 (default 20)"),                                                     \
        OPT("cursor", "CURSOR", VALUE_STRING, TO_QUERY, "cursor", false,                           \
            "start at this cursor (from an earlier page's next_cursor)"),                          \
        OPT("all", NULL, VALUE_NONE, TO_PAYCTL, NULL, false,                                       \
            "follow next_cursor through every page"),                                              \
        OPT("format", "jsonl|page", VALUE_STRING, TO_PAYCTL, NULL, false,                          \
            "jsonl: one item per line (default); page: the page object, cursors included")

const command payctl_commands[] = {
    COMMAND("payments", "create", COMMAND_SINGLE, "POST", PATHS("/v1/payments"), NULL,
            "Charge a source and credit an account. Safe to retry: every attempt sends the same "
            "Idempotency-Key.",
            OPTIONS(OPT("account", "ID", VALUE_STRING, TO_BODY, "account_id", true,
                        "account to credit"),
                    AMOUNT(true, "minor units, e.g. 4200 for 42.00"), CURRENCY,
                    OPT("source", "TOKEN", VALUE_STRING, TO_BODY, "source", true,
                        "payment source, e.g. tok_visa"),
                    OPT("order", "ID", VALUE_STRING, TO_BODY, "order_id", false,
                        "the order this payment pays"),
                    DESCRIPTION,
                    OPT("metadata", "KEY=VALUE", VALUE_METADATA, TO_BODY, "metadata", false,
                        "attach a string; repeat for more (at most 20)"),
                    OPT("capture-method", "M", VALUE_STRING, TO_BODY, "capture_method", false,
                        "automatic (default) or manual: only authorize, capture later"),
                    IDEMPOTENCY_KEY)),
    COMMAND("payments", "get", COMMAND_SINGLE, "GET", PATHS("/v1/payments/{id}"), "id",
            "Show one payment.", OPTIONS(ID_IN_PATH("the payment"))),
    COMMAND("payments", "capture", COMMAND_SINGLE, "POST", PATHS("/v1/payments/{id}/capture"), "id",
            "Capture a manual payment's hold, in full or in part. Safe to retry, like payments "
            "create.",
            OPTIONS(ID_IN_PATH("the payment"),
                    OPT("amount", "N", VALUE_INTEGER, TO_BODY, "amount_to_capture", false,
                        "minor units (default: all that is capturable)"),
                    OPT("final", NULL, VALUE_NONE, TO_BODY, "final_capture", false,
                        "release the rest of the hold (without it the rest stays capturable)"),
                    IDEMPOTENCY_KEY)),
    COMMAND("payments", "cancel", COMMAND_SINGLE, "POST", PATHS("/v1/payments/{id}/cancel"), "id",
            "Cancel a manual payment: release what is left of its hold. Safe to retry.",
            OPTIONS(ID_IN_PATH("the payment"),
                    OPT("reason", "R", VALUE_STRING, TO_BODY, "cancellation_reason", false,
                        "requested_by_customer, abandoned, fraudulent or duplicate"),
                    IDEMPOTENCY_KEY)),
    COMMAND("payments", "list", COMMAND_LIST, "GET", PATHS("/v1/accounts/{account}/payments"), NULL,
            "List an account's payments, newest first, as JSON Lines.",
            OPTIONS(ACCOUNT_IN_PATH, PAYMENT_FILTERS, LIST_OPTIONS)),
    COMMAND("payments", "export", COMMAND_EXPORT, "GET", PATHS("/v1/accounts/{account}/payments"),
            NULL,
            "Write every payment of an account, following every page. Draws a progress line "
            "when stderr is a terminal.",
            OPTIONS(ACCOUNT_IN_PATH, PAYMENT_FILTERS,
                    OPT("format", "jsonl|csv", VALUE_STRING, TO_PAYCTL, NULL, false,
                        "jsonl: one payment per line (default); csv: a header row, then a row "
                        "each"),
                    OPT("output", "FILE", VALUE_STRING, TO_PAYCTL, NULL, false,
                        "write here instead of stdout; the file appears only once complete"),
                    OPT("limit", "N", VALUE_INTEGER, TO_QUERY, "limit", false,
                        "items per page, 1-100 (default 100)"))),
    COMMAND("payments", "count", COMMAND_SINGLE, "GET",
            PATHS("/v1/accounts/{account}/payments/count"), NULL,
            "Count an account's payments (a separate call because it costs a scan).",
            OPTIONS(ACCOUNT_IN_PATH, PAYMENT_FILTERS)),

    COMMAND("refunds", "create", COMMAND_SINGLE, "POST", PATHS("/v1/payments/{payment}/refunds"),
            "payment", "Refund a payment, in full or in part. Safe to retry, like payments create.",
            OPTIONS(OPT("payment", "ID", VALUE_STRING, TO_PATH, "payment", true,
                        "the payment to refund"),
                    AMOUNT(false, "minor units (default: all that is left)"),
                    OPT("reason", "R", VALUE_STRING, TO_BODY, "reason", false,
                        "requested_by_customer, duplicate or fraudulent"),
                    IDEMPOTENCY_KEY)),
    COMMAND("refunds", "list", COMMAND_LIST, "GET", PATHS("/v1/payments/{payment}/refunds"),
            "payment", "List a payment's refunds as JSON Lines.",
            OPTIONS(OPT("payment", "ID", VALUE_STRING, TO_PATH, "payment", true, "the payment"),
                    LIST_OPTIONS)),

    COMMAND("orders", "create", COMMAND_SINGLE, "POST", PATHS("/v1/orders"), NULL,
            "Create an order. A second order with the same external id is refused (409).",
            OPTIONS(OPT("external-id", "X", VALUE_STRING, TO_BODY, "external_order_id", true,
                        "your own order number, unique per user"),
                    AMOUNT(true, "minor units"), CURRENCY, DESCRIPTION, IDEMPOTENCY_KEY)),
    COMMAND("orders", "get", COMMAND_SINGLE, "GET", PATHS("/v1/orders/{id}"), "id",
            "Show one order.", OPTIONS(ID_IN_PATH("the order"))),
    COMMAND("orders", "list", COMMAND_LIST, "GET", PATHS("/v1/orders"), NULL,
            "List your orders, newest first, as JSON Lines.",
            OPTIONS(OPT("status", "S", VALUE_STRING, TO_QUERY, "status", false,
                        "only orders in this status"),
                    LIST_OPTIONS)),
    COMMAND("orders", "set-status", COMMAND_SINGLE, "PUT", PATHS("/v1/orders/{id}/status"), "id",
            "Move an order along its state machine (cancelled, shipped, completed).",
            OPTIONS(ID_IN_PATH("the order"),
                    OPT("status", "S", VALUE_STRING, TO_BODY, "status", true, "the target status"),
                    VERSION_CHECK)),

    COMMAND(
        "transfers", "create", COMMAND_SINGLE, "POST", PATHS("/v1/transfers"), NULL,
        "Move money between two of your accounts. biz_seq is the dedupe key: repeating it "
        "replays the first answer.",
        OPTIONS(OPT("biz-seq", "S", VALUE_STRING, TO_BODY, "biz_seq", true,
                    "your business serial number, unique per user"),
                OPT("from", "ID", VALUE_STRING, TO_BODY, "from_account", true, "account to debit"),
                OPT("to", "ID", VALUE_STRING, TO_BODY, "to_account", true, "account to credit"),
                AMOUNT(true, "minor units"), CURRENCY, DESCRIPTION)),
    COMMAND("transfers", "get", COMMAND_SINGLE, "GET",
            PATHS("/v1/transfers/{id}", "/v1/transfers/by-biz-seq/{biz_seq}"), "id",
            "Show a transfer, by id or by biz_seq (did my transfer happen?).",
            OPTIONS(OPT("id", "ID", VALUE_STRING, TO_PATH, "id", false, "the transfer"),
                    OPT("biz-seq", "S", VALUE_STRING, TO_PATH, "biz_seq", false,
                        "find it by your business serial number instead"))),

    COMMAND(
        "accounts", "create", COMMAND_SINGLE, "POST", PATHS("/v1/accounts"), NULL,
        "Open an account.",
        OPTIONS(CURRENCY,
                OPT("name", "NAME", VALUE_STRING, TO_BODY, "name", false, "at most 100 characters"),
                IDEMPOTENCY_KEY)),
    COMMAND("accounts", "get", COMMAND_SINGLE, "GET", PATHS("/v1/accounts/{id}"), "id",
            "Show one account and its balance.", OPTIONS(ID_IN_PATH("the account"))),
    COMMAND("accounts", "list", COMMAND_LIST, "GET", PATHS("/v1/accounts"), NULL,
            "List your accounts as JSON Lines.", OPTIONS(LIST_OPTIONS)),

    /* the ledger (§18) */
    COMMAND("balance", "", COMMAND_SINGLE, "GET", PATHS("/v1/accounts/{account}/balance"),
            "account", "Show an account's available and pending balance.",
            OPTIONS(ACCOUNT_IN_PATH)),
    COMMAND("balance-transactions", "list", COMMAND_LIST, "GET", PATHS("/v1/balance_transactions"),
            NULL, "List your balance transactions, newest first, as JSON Lines.",
            OPTIONS(OPT("account", "ID", VALUE_STRING, TO_QUERY, "account_id", false,
                        "only this account's"),
                    OPT("type", "TYPE", VALUE_STRING, TO_QUERY, "type", false,
                        "charge, authorization, capture, release, refund or transfer"),
                    OPT("source", "ID", VALUE_STRING, TO_QUERY, "source", false,
                        "only those of this payment, refund or transfer"),
                    OPT("created-gte", "TIME", VALUE_STRING, TO_QUERY, "created_gte", false,
                        "created at or after this RFC 3339 time"),
                    OPT("created-lt", "TIME", VALUE_STRING, TO_QUERY, "created_lt", false,
                        "created before this RFC 3339 time"),
                    LIST_OPTIONS)),
    COMMAND("balance-transactions", "get", COMMAND_SINGLE, "GET",
            PATHS("/v1/balance_transactions/{id}"), "id", "Show one balance transaction.",
            OPTIONS(ID_IN_PATH("the balance transaction (txn_...)"))),

    COMMAND("users", "me", COMMAND_SINGLE, "GET", PATHS("/v1/users/me"), NULL,
            "Show the user the API key belongs to.", NO_OPTIONS),
    COMMAND(
        "users", "update", COMMAND_SINGLE, "PATCH", PATHS("/v1/users/me"), NULL,
        "Change your name or email.",
        OPTIONS(OPT("name", "NAME", VALUE_STRING, TO_BODY, "name", false, "at most 100 characters"),
                OPT("email", "EMAIL", VALUE_STRING, TO_BODY, "email", false, "contact address"),
                VERSION_CHECK)),

    COMMAND("products", "create", COMMAND_SINGLE, "POST", PATHS("/v1/products"), NULL,
            "Create a product with its stock.",
            OPTIONS(OPT("sku", "SKU", VALUE_STRING, TO_BODY, "sku", true,
                        "[A-Za-z0-9_-], 1-64 characters"),
                    OPT("name", "NAME", VALUE_STRING, TO_BODY, "name", true, "product name"),
                    OPT("stock", "N", VALUE_INTEGER, TO_BODY, "stock", true, "units on hand"),
                    IDEMPOTENCY_KEY)),
    COMMAND("products", "get", COMMAND_SINGLE, "GET", PATHS("/v1/products/{sku}"), "sku",
            "Show a product and its stock.",
            OPTIONS(OPT("sku", "SKU", VALUE_STRING, TO_PATH, "sku", true, "the product"))),
    COMMAND(
        "products", "reserve", COMMAND_SINGLE, "POST", PATHS("/v1/products/{sku}/reservations"),
        "sku", "Reserve stock; never oversells, however many reserve at once. Safe to retry.",
        OPTIONS(OPT("sku", "SKU", VALUE_STRING, TO_PATH, "sku", true, "the product"),
                OPT("quantity", "N", VALUE_INTEGER, TO_BODY, "quantity", true, "1-1000000"),
                OPT("order", "ID", VALUE_STRING, TO_BODY, "order_id", false, "the order it is for"),
                IDEMPOTENCY_KEY)),

    COMMAND(
        "keys", "list", COMMAND_LIST, "GET", PATHS("/v1/api_keys"), NULL,
        "List your API keys (id and prefix; never the key) as JSON Lines.",
        OPTIONS(OPT("status", "S", VALUE_STRING, TO_QUERY, "status", false, "active or revoked"),
                LIST_OPTIONS)),
    COMMAND("keys", "create", COMMAND_SINGLE, "POST", PATHS("/v1/api_keys"), NULL,
            "Make a new API key; it is shown only in this answer. Rotate: create, move your "
            "clients to the new key, then revoke the old one with the new one.",
            OPTIONS(OPT("name", "NAME", VALUE_STRING, TO_BODY, "name", false,
                        "a label to tell keys apart"))),
    COMMAND("keys", "revoke", COMMAND_SINGLE, "DELETE", PATHS("/v1/api_keys/{id}"), "id",
            "Revoke an API key: refused at once here, on every node within the server's "
            "--auth-cache-ttl. A key cannot revoke itself.",
            OPTIONS(ID_IN_PATH("the key (key_...)"))),
    /* events and webhooks (§15); the commands with a `run` are in events.c */
    COMMAND("events", "list", COMMAND_LIST, "GET", PATHS("/v1/events"), NULL,
            "List your events, newest first, as JSON Lines.",
            OPTIONS(OPT("type", "TYPE", VALUE_STRING, TO_QUERY, "type", false,
                        "only this type, e.g. payment.succeeded"),
                    OPT("created-gte", "TIME", VALUE_STRING, TO_QUERY, "created_gte", false,
                        "created at or after this RFC 3339 time"),
                    OPT("created-lt", "TIME", VALUE_STRING, TO_QUERY, "created_lt", false,
                        "created before this RFC 3339 time"),
                    LIST_OPTIONS)),
    COMMAND("events", "get", COMMAND_SINGLE, "GET", PATHS("/v1/events/{id}"), "id",
            "Show one event.", OPTIONS(ID_IN_PATH("the event"))),
    COMMAND_RUN_ON("events", "resend", "POST", PATHS("/v1/events/{id}/redeliver"), "id",
                   "Send an event again now, to every enabled endpoint that wants its type or to "
                   "the one named. Safe to retry: every attempt sends the same Idempotency-Key.",
                   OPTIONS(ID_IN_PATH("the event"),
                           OPT("endpoint", "ID", VALUE_STRING, TO_PAYCTL, NULL, false,
                               "only this webhook endpoint (we_...)"),
                           IDEMPOTENCY_KEY),
                   run_events_resend),
    COMMAND_RUN(
        "webhooks", "create", "POST", PATHS("/v1/webhook_endpoints"),
        "Add a webhook endpoint. Prints its secret, shown only this once.",
        OPTIONS(OPT("endpoint", "URL", VALUE_STRING, TO_PAYCTL, NULL, true,
                    "the http(s) URL payd POSTs events to"),
                OPT("events", "TYPES", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "comma-separated event types (default *: all)"),
                OPT("description", "TEXT", VALUE_STRING, TO_PAYCTL, NULL, false, "free text"),
                IDEMPOTENCY_KEY),
        run_webhooks_create),
    COMMAND("webhooks", "list", COMMAND_LIST, "GET", PATHS("/v1/webhook_endpoints"), NULL,
            "List your webhook endpoints as JSON Lines.", OPTIONS(LIST_OPTIONS)),
    COMMAND("webhooks", "get", COMMAND_SINGLE, "GET", PATHS("/v1/webhook_endpoints/{id}"), "id",
            "Show a webhook endpoint.", OPTIONS(ID_IN_PATH("the endpoint"))),
    COMMAND("webhooks", "delete", COMMAND_SINGLE, "DELETE", PATHS("/v1/webhook_endpoints/{id}"),
            "id", "Delete a webhook endpoint; what it still had due is dropped.",
            OPTIONS(ID_IN_PATH("the endpoint"))),
    COMMAND("webhooks", "deliveries", COMMAND_LIST, "GET",
            PATHS("/v1/webhook_endpoints/{id}/deliveries"), "id",
            "List an endpoint's delivery attempts, newest first: status, latency, error, next "
            "attempt.",
            OPTIONS(ID_IN_PATH("the endpoint"), LIST_OPTIONS)),
    COMMAND(
        "webhooks", "rotate-secret", COMMAND_SINGLE, "POST",
        PATHS("/v1/webhook_endpoints/{id}/rotate_secret"), "id",
        "Give a webhook endpoint a new secret, printed only this once. The previous one "
        "signs beside it until --expire-previous-in has passed.",
        OPTIONS(ID_IN_PATH("the endpoint"),
                OPT("expire-previous-in", "SECONDS", VALUE_INTEGER, TO_BODY, "expire_previous_in",
                    false, "how long the previous secret still signs, 0-604800 (default 86400)"),
                IDEMPOTENCY_KEY)),
    COMMAND_RUN_ON(
        "webhooks", "recover", "POST", PATHS("/v1/webhook_endpoints/{id}/recover"), "id",
        "Send again every delivery of an endpoint that failed since a time (after an outage); "
        "those still retrying go now.",
        OPTIONS(ID_IN_PATH("the endpoint"),
                OPT("since", "TIME", VALUE_STRING, TO_PAYCTL, NULL, true,
                    "deliveries that failed at or after this RFC 3339 time"),
                IDEMPOTENCY_KEY),
        run_webhooks_recover),
    COMMAND_RUN_ON("trigger", "", "POST", PATHS("/v1/payments"), "event",
                   "Test mode only: make the objects whose change fires EVENT (an account, then "
                   "what the event needs: a payment, a capture, a refund, an order, a transfer, a "
                   "reservation), printing each as a JSON line. A live key is refused.",
                   OPTIONS(OPT("event", "TYPE", VALUE_STRING, TO_PAYCTL, NULL, true,
                               "the event type, e.g. payment.captured")),
                   run_trigger),
    COMMAND_RUN(
        "listen", "", "GET", PATHS("/v1/events"),
        "Follow /v1/events (a long-poll) and forward each event, signed, to a local URL. Its place "
        "is kept in --state, so a restart neither loses nor repeats an event it forwarded.",
        OPTIONS(OPT("forward-to", "URL", VALUE_STRING, TO_PAYCTL, NULL, true,
                    "where to POST each event"),
                OPT("state", "FILE", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "state file (default payctl-listen.json)"),
                OPT("secret", "SECRET", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "signing secret (default: the state file's, else a new one)"),
                OPT("since", "TIME", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "on a first start, forward events from this RFC 3339 time (default: now)"),
                OPT("events", "TYPE,...", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "forward only events of these types (default: every type)"),
                OPT("interval", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "pause after a failed pass before the next (default 1s)"),
                OPT("settle", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
                    "look again this far behind the newest event, for one another node "
                    "committed late (default 1s)"),
                OPT("once", NULL, VALUE_NONE, TO_PAYCTL, NULL, false,
                    "forward what is due, then exit (1: refused, 3: could not forward)")),
        run_listen),
    {0},
};
