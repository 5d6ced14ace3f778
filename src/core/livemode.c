/* "livemode" on every object (livemode.h): a scanner that only tells keys from values and
 * strings from the rest; it trusts the JSON payd itself wrote. */
#include "core/livemode.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

static size_t string_end(const char *s, size_t len, size_t i) /* i: the opening quote */
{
    for (i++; i < len; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i;
    }
    return len;
}

char *json_mark_livemode(const char *json, size_t len, bool live, size_t *out_len)
{
    if (!len || (json[0] != '{' && json[0] != '['))
        return NULL;
    static const char obj_key[] = "\"object\"", meta_key[] = "\"metadata\"";
    const char *mark = live ? ",\"livemode\":true" : ",\"livemode\":false";
    size_t mark_len = strlen(mark);
    /* an insertion follows at least `"object":"x"` (12 characters) */
    size_t cap = len + (len / 12 + 1) * mark_len + 1;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    bool in_object[MAX_DEPTH], expect_key[MAX_DEPTH];
    int depth = 0, skip_from = 0; /* skip_from: the depth of the metadata object we are in */
    bool key_object = false, key_metadata = false; /* the member whose value comes next */
    size_t o = 0, marks = 0;
    for (size_t i = 0; i < len; i++) {
        char c = json[i];
        if (c == '{' || c == '[') {
            if (depth + 1 >= MAX_DEPTH) {
                free(out);
                return NULL;
            }
            depth++;
            in_object[depth] = c == '{';
            expect_key[depth] = c == '{';
            if (c == '{' && key_metadata && !skip_from)
                skip_from = depth;
            key_object = key_metadata = false;
            out[o++] = c;
        } else if (c == '}' || c == ']') {
            if (skip_from == depth)
                skip_from = 0;
            key_object = key_metadata = false;
            if (depth > 0)
                depth--;
            out[o++] = c;
        } else if (c == ',') {
            if (depth > 0 && in_object[depth])
                expect_key[depth] = true;
            key_object = key_metadata = false;
            out[o++] = c;
        } else if (c == '"') {
            size_t end = string_end(json, len, i);
            size_t n = (end < len ? end + 1 : len) - i;
            bool is_key = depth > 0 && in_object[depth] && expect_key[depth];
            memcpy(out + o, json + i, n);
            o += n;
            if (is_key) {
                expect_key[depth] = false;
                key_object = n == sizeof obj_key - 1 && !memcmp(json + i, obj_key, n);
                key_metadata = n == sizeof meta_key - 1 && !memcmp(json + i, meta_key, n);
            } else {
                static const char own[] = ",\"livemode\":"; /* the object says its own mode */
                bool says_own =
                    len - (i + n) >= sizeof own - 1 && !memcmp(json + i + n, own, sizeof own - 1);
                if (key_object && !skip_from && !says_own &&
                    !(n == 6 && !memcmp(json + i, "\"list\"", 6))) {
                    memcpy(out + o, mark, mark_len);
                    o += mark_len;
                    marks++;
                }
                key_object = key_metadata = false;
            }
            i += n - 1;
        } else {
            out[o++] = c;
        }
    }
    if (!marks) {
        free(out);
        return NULL;
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}
