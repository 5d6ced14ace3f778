/* Retry-After values from servers: delta-seconds or an HTTP-date, else refused; never a
 * negative delay, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/backoff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    int64_t delay = -1;
    if (backoff_parse_retry_after(s, 1791800000000LL, &delay) == 0 && delay < 0)
        abort();
    free(s);
    return 0;
}
