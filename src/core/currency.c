#include "core/currency.h"

#include <stdlib.h>
#include <string.h>

#include "core/currency_table.h"

enum { CURRENCIES = (int)(sizeof currency_table / sizeof currency_table[0]) };

static int by_code(const void *key, const void *entry)
{
    return strcmp(key, ((const iso_currency *)entry)->code);
}

const iso_currency *currency_find(const char *text)
{
    char code[4];
    if (!text || strlen(text) != 3)
        return NULL;
    for (int i = 0; i < 3; i++) {
        char c = text[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c < 'A' || c > 'Z') /* ASCII letters only, whatever the locale */
            return NULL;
        code[i] = c;
    }
    code[3] = '\0';
    return bsearch(code, currency_table, CURRENCIES, sizeof currency_table[0], by_code);
}

bool currency_normalize(const char *text, char out[4])
{
    const iso_currency *c = currency_find(text);
    if (!c)
        return false;
    memcpy(out, c->code, sizeof c->code);
    return true;
}

int currency_count(void)
{
    return CURRENCIES;
}

const iso_currency *currency_at(int i)
{
    return i >= 0 && i < CURRENCIES ? &currency_table[i] : NULL;
}
