/* Idempotency-Key header values: refused or parsed to 1-255 visible ASCII characters, and the
 * Structured-Fields form of a parsed key parses to the same key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/idem_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char key[IDEM_KEY_MAX + 1];
    if (idem_parse_key(s, key) == 0) {
        size_t n = strlen(key);
        if (n < 1 || n > IDEM_KEY_MAX)
            abort();
        for (size_t i = 0; i < n; i++)
            if (key[i] < 0x21 || key[i] > 0x7e)
                abort();
        char quoted[2 * IDEM_KEY_MAX + 3], again[IDEM_KEY_MAX + 1];
        size_t o = 0;
        quoted[o++] = '"';
        for (size_t i = 0; i < n; i++) {
            if (key[i] == '"' || key[i] == '\\')
                quoted[o++] = '\\';
            quoted[o++] = key[i];
        }
        quoted[o++] = '"';
        quoted[o] = '\0';
        if (idem_parse_key(quoted, again) != 0 || strcmp(again, key) != 0)
            abort();
    }
    free(s);
    return 0;
}
