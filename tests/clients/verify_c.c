/* The C client's webhook verifier from the command line, for the end-to-end test of a real
 * delivery (tests/api/test_c_client_e2e.py):
 *
 *   verify_c SECRET WEBHOOK_ID WEBHOOK_TIMESTAMP WEBHOOK_SIGNATURE BODY_FILE [NOW]
 *
 * prints payd_webhook_check_name of payd_webhook_verify_standard and exits 0 when it is
 * PAYD_WEBHOOK_OK, 1 otherwise, 2 on a usage error. */
#include <stdio.h>
#include <stdlib.h>

#include "payd/client.h"

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: verify_c SECRET ID TIMESTAMP SIGNATURE BODY_FILE [NOW]\n");
        return 2;
    }
    FILE *f = fopen(argv[5], "rb");
    if (!f) {
        perror(argv[5]);
        return 2;
    }
    static char body[1 << 20];
    size_t len = fread(body, 1, sizeof body, f);
    fclose(f);
    int64_t now = argc == 7 ? strtoll(argv[6], NULL, 10) : 0;
    payd_webhook_check c =
        payd_webhook_verify_standard(argv[1], argv[2], argv[3], argv[4], body, len, now, 0);
    puts(payd_webhook_check_name(c));
    return c == PAYD_WEBHOOK_OK ? 0 : 1;
}
