/* Cursors come from clients: any string must decode or be refused, never crash; a cursor that
 * decodes must encode back to the very same string (one encoding per cursor). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cursor.h"

static const uint8_t key[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    page_cursor c;
    if (cursor_decode(key, sizeof key, s, &c) == 0) {
        char again[CURSOR_STR_MAX];
        if (cursor_encode(key, sizeof key, &c, again) != 0 || strcmp(again, s) != 0)
            abort();
    }
    /* and a cursor we make from these bytes always decodes to itself */
    if (size >= 33) {
        page_cursor made = {.direction = (uint8_t)(1 + data[0] % 2)};
        memcpy(&made.created_at, data + 1, 8);
        memcpy(&made.id, data + 9, 8);
        memcpy(made.scope, data + 17, 16);
        char text[CURSOR_STR_MAX];
        page_cursor back;
        if (cursor_encode(key, sizeof key, &made, text) != 0 ||
            cursor_decode(key, sizeof key, text, &back) != 0 || back.id != made.id ||
            back.created_at != made.created_at || memcmp(back.scope, made.scope, 16) != 0)
            abort();
    }
    free(s);
    return 0;
}
