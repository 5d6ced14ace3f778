#include "core/idem_key.h"

#include <stdbool.h>
#include <string.h>

static bool visible_ascii(char c)
{
    return c >= 0x21 && c <= 0x7e;
}

int idem_parse_key(const char *h, char out[IDEM_KEY_MAX + 1])
{
    size_t n = strlen(h), o = 0;
    if (h[0] == '"') {
        if (n < 2 || h[n - 1] != '"')
            return -1; /* a quote opens a Structured-Fields string, which must be whole */
        /* Structured-Fields string: \" and \\ are its only escapes */
        for (size_t i = 1; i < n - 1; i++) {
            char c = h[i];
            if (c == '\\') {
                if (i + 1 >= n - 1 || (h[i + 1] != '"' && h[i + 1] != '\\'))
                    return -1;
                c = h[++i];
            } else if (c == '"') {
                return -1;
            }
            if (!visible_ascii(c) || o == IDEM_KEY_MAX)
                return -1;
            out[o++] = c;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            if (!visible_ascii(h[i]) || o == IDEM_KEY_MAX)
                return -1;
            out[o++] = h[i];
        }
    }
    out[o] = '\0';
    return o >= 1 ? 0 : -1;
}
