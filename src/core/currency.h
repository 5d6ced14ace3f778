/* Currencies (docs/api.md, "money"): the active ISO 4217 codes, each with its exponent, the
 * digits of its minor unit (JPY 0, USD 2, KWD 3), from a table built into payd
 * (currency_table.h, written by scripts/gen-currencies.py). Amounts are integers of the minor
 * unit; the exponent is what turns one into a decimal for people. */
#ifndef PAYD_CORE_CURRENCY_H
#define PAYD_CORE_CURRENCY_H

#include <stdbool.h>

typedef struct iso_currency {
    char code[4]; /* upper case */
    int exponent;
} iso_currency;

/* The currency whose code is text in any case ("usd", "Usd", "USD"); NULL for anything else:
 * not three letters, or not a code of the table ("QQQ"). */
const iso_currency *currency_find(const char *text);

/* text as its code, upper case, into out; false (out untouched) when currency_find refuses it. */
bool currency_normalize(const char *text, char out[4]);

/* The table, sorted by code: currency_count() entries, currency_at(0) first. */
int currency_count(void);
const iso_currency *currency_at(int i);

#endif
