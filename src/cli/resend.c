/* payctl's commands that send webhooks again (docs/webhooks.md, "Redelivery and recovery"),
 * through the client library's calls: `events resend ID [--endpoint we_…]` and
 * `webhooks recover ID --since TIME`. Each prints the server's 202 answer: what was queued. */
#include <stdlib.h>

#include "cli/cli.h"

/* Prints the answer (or the problem) and says how payctl exits. */
static int finish(invocation *inv, payd_result *r)
{
    if (r->body && r->body_len)
        print_json(stdout, r->body, r->body_len, inv->pretty);
    int code = EXIT_OK;
    if (r->status != PAYD_OK) {
        fprintf(stderr, "payctl: %s (HTTP %d%s%s): %s\n", payd_status_name(r->status),
                r->http_status, r->code[0] ? " " : "", r->code, r->message);
        code = r->status == PAYD_ERR_HTTP && r->http_status < 500 && r->http_status != 429
                   ? EXIT_REFUSED
                   : EXIT_GAVE_UP;
    }
    payd_result_clear(r);
    return code;
}

int run_events_resend(invocation *inv)
{
    payd_result r = {0};
    payd_event_redeliver(inv->client, option_value(inv, "id"), option_value(inv, "endpoint"),
                         option_value(inv, "idempotency-key"), &r);
    return finish(inv, &r);
}

int run_webhooks_recover(invocation *inv)
{
    payd_result r = {0};
    payd_webhook_endpoint_recover(inv->client, option_value(inv, "id"), option_value(inv, "since"),
                                  option_value(inv, "idempotency-key"), &r);
    return finish(inv, &r);
}
