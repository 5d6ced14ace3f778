/* The address rule of --webhook-deny-private (src/webhook/address_policy.c): a table of
 * addresses and their verdicts, every address of the special-purpose registries' edges and of
 * the issue that found the holes, plus this machine's own interface addresses found now; and
 * the connect-time check of a delivery (src/webhook/attempt_guard.c) refusing loopback. No
 * address here is ever contacted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "webhook/address_policy.h"
#include "webhook/attempt_guard.h"

static struct sockaddr_storage parse(const char *text)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1)
        v4->sin_family = AF_INET;
    else if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1)
        v6->sin6_family = AF_INET6;
    else
        fail_msg("not an address: %s", text);
    return ss;
}

static const struct {
    const char *address;
    bool global;
} table[] = {
    /* the addresses the issue found accepted */
    {"192.0.2.1", false},
    {"198.18.0.1", false},
    {"fec0::1", false},
    {"64:ff9b::127.0.0.1", false},
    {"2002:7f00:1::", false},
    {"::127.0.0.1", false},
    {"::ffff:0:127.0.0.1", false},
    {"100::1", false},
    /* IPv4 special-purpose registry */
    {"0.0.0.0", false},
    {"0.255.255.255", false},
    {"10.0.0.1", false},
    {"100.64.0.1", false},
    {"100.127.255.255", false},
    {"127.0.0.1", false},
    {"127.255.255.254", false},
    {"169.254.169.254", false},
    {"172.16.0.1", false},
    {"172.31.255.255", false},
    {"192.0.0.9", false},
    {"192.31.196.1", false},
    {"192.52.193.1", false},
    {"192.88.99.1", false},
    {"192.168.1.1", false},
    {"192.175.48.1", false},
    {"198.19.255.255", false},
    {"198.51.100.7", false},
    {"203.0.113.9", false},
    {"224.0.0.1", false},
    {"239.255.255.250", false},
    {"240.0.0.1", false},
    {"255.255.255.255", false},
    /* IPv4 global unicast, next to the ranges above */
    {"1.1.1.1", true},
    {"8.8.8.8", true},
    {"93.184.216.34", true},
    {"100.63.255.255", true},
    {"100.128.0.0", true},
    {"172.15.255.255", true},
    {"172.32.0.0", true},
    {"192.0.3.1", true},
    {"198.17.255.255", true},
    {"198.20.0.0", true},
    {"223.255.255.255", true},
    /* IPv6 outside 2000::/3 */
    {"::", false},
    {"::1", false},
    {"::8.8.8.8", false}, /* v4-compatible: deprecated, refused whatever it carries */
    {"64:ff9b:1::1", false},
    {"100::", false},
    {"fc00::1", false},
    {"fd12:3456::1", false},
    {"fe80::1", false},
    {"febf::1", false},
    {"ff02::1", false},
    {"5f00::1", false},
    {"4000::1", false},
    /* IPv6 carrying IPv4: judged by the IPv4 address */
    {"::ffff:127.0.0.1", false},
    {"::ffff:10.0.0.1", false},
    {"::ffff:169.254.169.254", false},
    {"::ffff:8.8.8.8", true},
    {"64:ff9b::10.1.2.3", false},
    {"64:ff9b::8.8.8.8", true},
    /* IPv6 special-purpose ranges inside 2000::/3 */
    {"2001::1", false}, /* Teredo */
    {"2001:0:4136:e378::1", false},
    {"2001:1::1", false},        /* globally reachable in the registry, refused all the same */
    {"2001:2::1", false},        /* benchmarking */
    {"2001:10::1", false},       /* ORCHID */
    {"2001:1ff:ffff::1", false}, /* the end of 2001::/23 */
    {"2001:db8::1", false},
    {"2001:db8:ffff::1", false},
    {"2002::1", false},
    {"2002:c000:0204::1", false},
    {"2620:4f:8000::1", false},
    {"3fff::1", false},
    {"3fff:fff:ffff::1", false},
    /* IPv6 global unicast */
    {"2001:200::1", true},
    {"2001:4860:4860::8888", true},
    {"2001:db9::1", true},
    {"2003::1", true},
    {"2606:4700::1111", true},
    {"2620:4f:8001::1", true},
    {"3ffe::1", true},
    {"3fff:1000::1", true},
};

static void test_the_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        struct sockaddr_storage ss = parse(table[i].address);
        bool global = webhook_address_is_global((struct sockaddr *)&ss);
        if (global != table[i].global)
            fail_msg("%s: expected %s, got %s", table[i].address,
                     table[i].global ? "global" : "refused", global ? "global" : "refused");
        /* what is not global is never allowed, whoever owns it */
        if (!table[i].global)
            assert_false(webhook_address_allowed((struct sockaddr *)&ss));
    }
}

static void test_other_families_are_refused(void **state)
{
    (void)state;
    struct sockaddr sa = {.sa_family = AF_UNIX};
    assert_false(webhook_address_is_global(&sa));
    assert_false(webhook_address_allowed(&sa));
}

/* Every address of this machine's interfaces, the non-loopback ones included, is refused, and
 * so is its IPv4-mapped form. */
static void test_own_interface_addresses_are_refused(void **state)
{
    (void)state;
    struct ifaddrs *list = NULL;
    assert_int_equal(getifaddrs(&list), 0);
    int checked = 0;
    for (struct ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        char text[INET6_ADDRSTRLEN] = "";
        const void *raw = i->ifa_addr->sa_family == AF_INET
                              ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                              : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        inet_ntop(i->ifa_addr->sa_family, raw, text, sizeof text);
        struct sockaddr_storage ss = parse(text);
        if (!webhook_address_is_own((struct sockaddr *)&ss) ||
            webhook_address_allowed((struct sockaddr *)&ss))
            fail_msg("%s (%s) is this machine's own and must be refused", text, i->ifa_name);
        if (i->ifa_addr->sa_family == AF_INET) {
            char mapped[64];
            snprintf(mapped, sizeof mapped, "::ffff:%s", text);
            struct sockaddr_storage m = parse(mapped);
            assert_true(webhook_address_is_own((struct sockaddr *)&m));
            assert_false(webhook_address_allowed((struct sockaddr *)&m));
        }
        print_message("refused: %s (%s)\n", text, i->ifa_name);
        checked++;
    }
    freeifaddrs(list);
    assert_true(checked > 0);
    /* a global address this machine does not hold stays allowed */
    struct sockaddr_storage doc = parse("93.184.216.34");
    assert_false(webhook_address_is_own((struct sockaddr *)&doc));
}

static void test_host_names_resolve_before_the_check(void **state)
{
    (void)state;
    assert_false(webhook_host_allowed("localhost"));
    assert_false(webhook_host_allowed("127.0.0.1"));
    assert_false(webhook_host_allowed("[::1]"));
    assert_false(webhook_host_allowed("[::ffff:0:127.0.0.1]"));
    assert_false(webhook_host_allowed("0x7f.1")); /* inet_aton's forms of 127.0.0.1 */
    assert_false(webhook_host_allowed("2130706433"));
    assert_true(webhook_host_allowed("93.184.216.34"));
    assert_true(webhook_host_allowed("[2606:4700::1111]"));
}

/* The connect-time check of a delivery: with the flag, libcurl's socket callback refuses a
 * loopback target before any connection is made, and the attempt says address_not_allowed. */
static void test_connect_time_check_refuses_loopback(void **state)
{
    (void)state;
    /* a listening socket on loopback that must never see a connection */
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(listener, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(listener, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(listener, (struct sockaddr *)&addr, &len);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", ntohs(addr.sin_port));

    for (int deny = 1; deny >= 0; deny--) {
        CURL *e = curl_easy_init();
        webhook_guard g;
        curl_easy_setopt(e, CURLOPT_URL, url);
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 300L);
        webhook_guard_attach(e, &g, deny);
        CURLcode rc = curl_easy_perform(e);
        long status = 0;
        curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(e);
        if (deny) {
            assert_true(g.address_refused);
            assert_int_equal(rc, CURLE_COULDNT_CONNECT);
            assert_string_equal(webhook_attempt_error(&g, rc, status), "address_not_allowed");
            assert_false(webhook_attempt_delivered(&g, rc, status));
        } else { /* without the flag it connects (and times out: nobody answers) */
            assert_false(g.address_refused);
            assert_string_equal(webhook_attempt_error(&g, rc, status), "timeout");
        }
    }
    close(listener);
}

static void test_error_words(void **state)
{
    (void)state;
    webhook_guard g = {0};
    assert_null(webhook_attempt_error(&g, CURLE_OK, 204));
    assert_true(webhook_attempt_delivered(&g, CURLE_OK, 204));
    assert_string_equal(webhook_attempt_error(&g, CURLE_OK, 302), "bad_status");
    assert_string_equal(webhook_attempt_error(&g, CURLE_OK, 500), "bad_status");
    assert_false(webhook_attempt_delivered(&g, CURLE_OK, 500));
    assert_string_equal(webhook_attempt_error(&g, CURLE_OPERATION_TIMEDOUT, 0), "timeout");
    assert_string_equal(webhook_attempt_error(&g, CURLE_COULDNT_CONNECT, 0), "connection_refused");
    assert_string_equal(webhook_attempt_error(&g, CURLE_COULDNT_RESOLVE_HOST, 0), "dns_failure");
    assert_string_equal(webhook_attempt_error(&g, CURLE_GOT_NOTHING, 0), "connection_error");
    assert_string_equal(webhook_attempt_error(&g, CURLE_RECV_ERROR, 0), "connection_error");
    assert_string_equal(webhook_attempt_error(&g, CURLE_WEIRD_SERVER_REPLY, 0), "connection_error");
    assert_string_equal(webhook_attempt_error(&g, CURLE_PEER_FAILED_VERIFICATION, 0), "tls_error");
    /* cut at a cap: the status decides */
    g.body_cut = true;
    assert_true(webhook_attempt_delivered(&g, CURLE_WRITE_ERROR, 200));
    assert_string_equal(webhook_attempt_error(&g, CURLE_WRITE_ERROR, 200), "body_too_large");
    assert_false(webhook_attempt_delivered(&g, CURLE_WRITE_ERROR, 500));
    assert_string_equal(webhook_attempt_error(&g, CURLE_WRITE_ERROR, 500), "bad_status");
    g = (webhook_guard){.headers_cut = true};
    assert_string_equal(webhook_attempt_error(&g, CURLE_WRITE_ERROR, 0), "headers_too_large");
    /* a refused address only explains a connection that was not made */
    g = (webhook_guard){.address_refused = true};
    assert_null(webhook_attempt_error(&g, CURLE_OK, 200));
    /* what the API shows of a stored error */
    assert_string_equal(webhook_error_word("timeout"), "timeout");
    assert_string_equal(webhook_error_word("Empty reply from server"), "connection_error");
    assert_null(webhook_error_word(NULL));
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_table),
        cmocka_unit_test(test_other_families_are_refused),
        cmocka_unit_test(test_own_interface_addresses_are_refused),
        cmocka_unit_test(test_host_names_resolve_before_the_check),
        cmocka_unit_test(test_connect_time_check_refuses_loopback),
        cmocka_unit_test(test_error_words),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return failed;
}
