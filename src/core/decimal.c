/* Decimal digits (decimal.h): two at a time, right to left, after counting them. */
#include "core/decimal.h"

#include <string.h>

const char decimal_pairs[200] = "00010203040506070809101112131415161718192021222324"
                                "25262728293031323334353637383940414243444546474849"
                                "50515253545556575859606162636465666768697071727374"
                                "75767778798081828384858687888990919293949596979899";

char *decimal_put(char *o, int64_t v)
{
    static const uint64_t powers[20] = {1u,
                                        10u,
                                        100u,
                                        1000u,
                                        10000u,
                                        100000u,
                                        1000000u,
                                        10000000u,
                                        100000000u,
                                        1000000000u,
                                        10000000000u,
                                        100000000000u,
                                        1000000000000u,
                                        10000000000000u,
                                        100000000000000u,
                                        1000000000000000u,
                                        10000000000000000u,
                                        100000000000000000u,
                                        1000000000000000000u,
                                        10000000000000000000u};
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN too */
    if (v < 0)
        *o++ = '-';
    int n = 1;
    while (n < 20 && u >= powers[n])
        n++;
    char *p = o + n;
    while (u >= 100) {
        p -= 2;
        memcpy(p, decimal_pairs + u % 100 * 2, 2);
        u /= 100;
    }
    if (u >= 10)
        memcpy(p - 2, decimal_pairs + u * 2, 2);
    else
        p[-1] = (char)('0' + u);
    return o + n;
}
