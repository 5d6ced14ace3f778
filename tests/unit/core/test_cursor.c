/* Pagination cursors (§4): round trips, and every kind of tampering or garbage is refused. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

#include "core/cursor.h"

static const uint8_t KEY[32] = "0123456789abcdef0123456789abcdef";
static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static page_cursor sample(void)
{
    page_cursor c = {
        .direction = CURSOR_NEXT, .created_at = 1791793867123456LL, .id = 120608729860153343ULL};
    const char *parts[] = {"payments", "acct_0000003x00400", "usr_0000000000001", "succeeded"};
    cursor_scope(parts, 4, c.scope);
    return c;
}

static void assert_same_cursor(const page_cursor *a, const page_cursor *b)
{
    assert_int_equal(a->direction, b->direction);
    assert_int_equal(a->created_at, b->created_at);
    assert_true(a->id == b->id);
    assert_memory_equal(a->scope, b->scope, 16);
}

static void test_base64url_vectors(void **state)
{
    /* RFC 4648 §10, without padding */
    static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *coded[] = {"", "Zg", "Zm8", "Zm9v", "Zm9vYg", "Zm9vYmE", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        char out[16];
        uint8_t back[16];
        size_t n = strlen(plain[i]), len = 99;
        assert_int_equal(base64url_encode((const uint8_t *)plain[i], n, out, sizeof out),
                         strlen(coded[i]));
        assert_string_equal(out, coded[i]);
        assert_int_equal(base64url_decode(coded[i], back, sizeof back, &len), 0);
        assert_int_equal(len, n);
        assert_memory_equal(back, plain[i], n);
    }
    /* the URL-safe alphabet */
    const uint8_t bytes[] = {0xfb, 0xff, 0xbf};
    char out[8];
    assert_int_equal(base64url_encode(bytes, 3, out, sizeof out), 4);
    assert_string_equal(out, "-_-_");
}

static void test_base64url_strict(void **state)
{
    static const char *bad[] = {
        "Zg==",                   /* padding */
        "Zg=",    "Zm9v=",   "Z", /* impossible lengths */
        "Zm9vY",  "Zh",           /* unused bits set: "Zg" is the only spelling of "f" */
        "Zm9",    "Zm+v",         /* the other alphabet */
        "Zm/v",   "Zm9 v",        /* white space */
        "Zm9v\n", "Zm\x80v",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint8_t out[16];
        size_t len;
        if (base64url_decode(bad[i], out, sizeof out, &len) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
    }
    uint8_t out[3];
    size_t len;
    assert_int_equal(base64url_decode(NULL, out, sizeof out, &len), -1);
    assert_int_equal(base64url_decode("Zm9vYg", out, 3, &len), -1); /* 4 bytes, room for 3 */
    assert_int_equal(base64url_decode("Zm9v", out, 3, &len), 0);
    char small[5];
    assert_int_equal(base64url_encode((const uint8_t *)"foo", 3, small, 4),
                     0); /* no room for NUL */
    assert_int_equal(base64url_encode((const uint8_t *)"foo", 3, small, 5), 4);
}

static void test_round_trip(void **state)
{
    page_cursor cases[] = {
        sample(),
        {.direction = CURSOR_PREV, .created_at = 0, .id = 0},
        {.direction = CURSOR_NEXT, .created_at = INT64_MAX, .id = UINT64_MAX},
        {.direction = CURSOR_PREV, .created_at = INT64_MIN, .id = 1},
        {.direction = CURSOR_NEXT, .created_at = -1, .id = 1ULL << 63},
    };
    memset(cases[2].scope, 0xff, 16);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[CURSOR_STR_MAX];
        page_cursor back;
        assert_int_equal(cursor_encode(KEY, sizeof KEY, &cases[i], s), 0);
        assert_int_equal(strlen(s), 67); /* 50 bytes */
        assert_true(strspn(s, B64URL) == 67);
        assert_int_equal(cursor_decode(KEY, sizeof KEY, s, &back), 0);
        assert_same_cursor(&cases[i], &back);
    }
}

static void test_wire_layout(void **state)
{
    page_cursor c = sample();
    char s[CURSOR_STR_MAX];
    uint8_t wire[64];
    size_t len;
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), 0);
    assert_int_equal(base64url_decode(s, wire, sizeof wire, &len), 0);
    assert_int_equal(len, 50);
    assert_int_equal(wire[0], 1); /* version */
    assert_int_equal(wire[1], CURSOR_NEXT);
    const uint8_t created_be[8] = {0x00, 0x06, 0x5d, 0xa0, 0x84, 0xf5, 0xeb, 0x00};
    const uint8_t id_be[8] = {0x01, 0xac, 0x7d, 0x00, 0x34, 0x20, 0x1f, 0xff};
    assert_memory_equal(wire + 2, created_be, 8);
    assert_memory_equal(wire + 10, id_be, 8);
    assert_memory_equal(wire + 18, c.scope, 16);
    uint8_t mac[32];
    unsigned int mac_len;
    HMAC(EVP_sha256(), KEY, sizeof KEY, wire, 34, mac, &mac_len);
    assert_memory_equal(wire + 34, mac, 16);
}

/* The MAC is HMAC-SHA256 under the first key a process signs with (whose keyed blocks it keeps)
 * and under any other, short or longer than a block, signed again and again. */
static void test_mac_under_any_key(void **state)
{
    uint8_t keys[3][100];
    size_t lens[3] = {sizeof KEY, 20, 100};
    memcpy(keys[0], KEY, sizeof KEY);
    for (size_t i = 0; i < 100; i++) {
        keys[1][i] = (uint8_t)(i * 7 + 1);
        keys[2][i] = (uint8_t)(255 - i);
    }
    for (int round = 0; round < 3; round++) {
        for (int k = 0; k < 3; k++) {
            page_cursor c = sample();
            c.id += (uint64_t)round;
            char s[CURSOR_STR_MAX];
            uint8_t wire[64], mac[32];
            size_t len;
            unsigned int mac_len;
            assert_int_equal(cursor_encode(keys[k], lens[k], &c, s), 0);
            assert_int_equal(base64url_decode(s, wire, sizeof wire, &len), 0);
            HMAC(EVP_sha256(), keys[k], (int)lens[k], wire, 34, mac, &mac_len);
            assert_memory_equal(wire + 34, mac, 16);
            page_cursor back;
            assert_int_equal(cursor_decode(keys[k], lens[k], s, &back), 0);
        }
    }
    (void)state;
}

static void test_every_flipped_bit_rejected(void **state)
{
    page_cursor c = sample(), back;
    char s[CURSOR_STR_MAX], tampered[CURSOR_STR_MAX];
    uint8_t wire[50];
    size_t len;
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), 0);
    assert_int_equal(base64url_decode(s, wire, sizeof wire, &len), 0);
    for (size_t bit = 0; bit < 50 * 8; bit++) {
        wire[bit / 8] ^= (uint8_t)(1u << bit % 8);
        assert_int_equal(base64url_encode(wire, sizeof wire, tampered, sizeof tampered), 67);
        if (cursor_decode(KEY, sizeof KEY, tampered, &back) != -1)
            fail_msg("accepted with bit %zu flipped", bit);
        wire[bit / 8] ^= (uint8_t)(1u << bit % 8);
    }
}

static void test_every_changed_char_rejected(void **state)
{
    page_cursor c = sample(), back;
    char s[CURSOR_STR_MAX], tampered[CURSOR_STR_MAX];
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), 0);
    for (size_t i = 0; i < strlen(s); i++) {
        for (const char *ch = B64URL; *ch; ch++) {
            if (*ch == s[i])
                continue;
            strcpy(tampered, s);
            tampered[i] = *ch;
            if (cursor_decode(KEY, sizeof KEY, tampered, &back) != -1)
                fail_msg("accepted with char %zu changed to '%c'", i, *ch);
        }
    }
}

static void test_malformed_rejected(void **state)
{
    page_cursor c = sample(), back;
    char s[CURSOR_STR_MAX], buf[CURSOR_STR_MAX + 8];
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), 0);
    /* every truncation */
    for (size_t n = 0; n < strlen(s); n++) {
        memcpy(buf, s, n);
        buf[n] = '\0';
        assert_int_equal(cursor_decode(KEY, sizeof KEY, buf, &back), -1);
    }
    /* extensions */
    static const char *tails[] = {"A", "AA", "AAA", "AAAA", "_", "=", "==", " ", "\n"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", s, tails[i]);
        assert_int_equal(cursor_decode(KEY, sizeof KEY, buf, &back), -1);
    }
    /* garbage, empty, NULL and very long */
    static const char *garbage[] = {"", "null", "garbage!", "eyJpZCI6MX0", "%00", "AAAA"};
    for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++)
        assert_int_equal(cursor_decode(KEY, sizeof KEY, garbage[i], &back), -1);
    assert_int_equal(cursor_decode(KEY, sizeof KEY, NULL, &back), -1);
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, 'A', (1 << 20) - 1);
    big[(1 << 20) - 1] = '\0';
    assert_int_equal(cursor_decode(KEY, sizeof KEY, big, &back), -1);
    memcpy(big, s, strlen(s)); /* a valid cursor followed by a megabyte */
    assert_int_equal(cursor_decode(KEY, sizeof KEY, big, &back), -1);
    free(big);
}

static void test_other_key_rejected(void **state)
{
    page_cursor c = sample(), back;
    char s[CURSOR_STR_MAX];
    uint8_t other[32];
    memcpy(other, KEY, sizeof other);
    other[31] ^= 1;
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), 0);
    assert_int_equal(cursor_decode(other, sizeof other, s, &back), -1);
    assert_int_equal(cursor_decode(KEY, 31, s, &back), -1);
    /* an empty key signs nothing */
    assert_int_equal(cursor_encode(KEY, 0, &c, s), -1);
    assert_int_equal(cursor_decode(KEY, 0, s, &back), -1);
    assert_int_equal(cursor_encode(NULL, 32, &c, s), -1);
}

/* A correctly signed cursor with any version and direction bytes, to test those checks alone. */
static void sign_raw(uint8_t version, uint8_t direction, char out[CURSOR_STR_MAX])
{
    uint8_t wire[50] = {version, direction};
    unsigned int mac_len;
    uint8_t mac[32];
    HMAC(EVP_sha256(), KEY, sizeof KEY, wire, 34, mac, &mac_len);
    memcpy(wire + 34, mac, 16);
    assert_int_equal(base64url_encode(wire, sizeof wire, out, CURSOR_STR_MAX), 67);
}

static void test_version_and_direction(void **state)
{
    char s[CURSOR_STR_MAX];
    page_cursor back;
    sign_raw(1, CURSOR_NEXT, s);
    assert_int_equal(cursor_decode(KEY, sizeof KEY, s, &back), 0); /* the control */
    sign_raw(1, CURSOR_PREV, s);
    assert_int_equal(cursor_decode(KEY, sizeof KEY, s, &back), 0);
    static const uint8_t bad[][2] = {{0, 1}, {2, 1}, {255, 1}, {1, 0}, {1, 3}, {1, 255}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sign_raw(bad[i][0], bad[i][1], s);
        assert_int_equal(cursor_decode(KEY, sizeof KEY, s, &back), -1);
    }
    page_cursor c = sample();
    c.direction = 0;
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), -1);
    c.direction = 3;
    assert_int_equal(cursor_encode(KEY, sizeof KEY, &c, s), -1);
}

static void test_scope(void **state)
{
    uint8_t a[16], b[16];
    const char *base[] = {"payments", "acct_1", "usr_1", "succeeded"};
    cursor_scope(base, 4, a);
    cursor_scope(base, 4, b);
    assert_memory_equal(a, b, 16);

    /* first 16 bytes of SHA-256("a\0b\0") */
    const char *ab[] = {"a", "b"};
    const uint8_t expected[16] = {0x8f, 0xb2, 0x0e, 0xf6, 0x3c, 0xed, 0x41, 0x45,
                                  0xfc, 0x2e, 0x98, 0x3f, 0xfe, 0x59, 0x7d, 0x1d};
    cursor_scope(ab, 2, a);
    assert_memory_equal(a, expected, 16);

    /* any single part changed */
    for (int i = 0; i < 4; i++) {
        const char *changed[4] = {base[0], base[1], base[2], base[3]};
        changed[i] = "other";
        cursor_scope(base, 4, a);
        cursor_scope(changed, 4, b);
        assert_memory_not_equal(a, b, 16);
    }
    /* parts that concatenate alike */
    const char *x[] = {"ab", "c"}, *y[] = {"a", "bc"};
    cursor_scope(x, 2, a);
    cursor_scope(y, 2, b);
    assert_memory_not_equal(a, b, 16);
    /* an extra empty part, and the order of parts */
    const char *one[] = {"a"}, *two[] = {"a", ""}, *ba[] = {"b", "a"};
    cursor_scope(one, 1, a);
    cursor_scope(two, 2, b);
    assert_memory_not_equal(a, b, 16);
    cursor_scope(ab, 2, a);
    cursor_scope(ba, 2, b);
    assert_memory_not_equal(a, b, 16);
    /* NULL counts as "" */
    const char *with_null[] = {"a", NULL};
    cursor_scope(with_null, 2, a);
    cursor_scope(two, 2, b);
    assert_memory_equal(a, b, 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64url_vectors),
        cmocka_unit_test(test_base64url_strict),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_wire_layout),
        cmocka_unit_test(test_mac_under_any_key),
        cmocka_unit_test(test_every_flipped_bit_rejected),
        cmocka_unit_test(test_every_changed_char_rejected),
        cmocka_unit_test(test_malformed_rejected),
        cmocka_unit_test(test_other_key_rejected),
        cmocka_unit_test(test_version_and_direction),
        cmocka_unit_test(test_scope),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
