/* One delivery attempt's limits and its outcome in payd's words; see attempt_guard.h. */
#include "webhook/attempt_guard.h"

#include <string.h>
#include <sys/socket.h>

#include "core/ids.h"
#include "core/log.h"
#include "webhook/address_policy.h"

/* The connect-time check: runs for every address libcurl is about to connect to (each of a
 * name's addresses, each new connection), so a name that resolves elsewhere at delivery time
 * than when the endpoint was saved cannot reach a refused address either. */
static curl_socket_t open_checked_socket(void *ctx, curlsocktype purpose,
                                         struct curl_sockaddr *addr)
{
    webhook_guard *g = ctx;
    (void)purpose;
    if (g->deny_private && !webhook_address_allowed(&addr->addr)) {
        g->address_refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(addr->family, addr->socktype, addr->protocol);
}

/* The body is read only to be dropped, up to the cap: then 0 cuts the transfer, and libcurl
 * closes a connection whose answer was not read to its end. */
static size_t read_body_capped(char *p, size_t size, size_t n, void *ctx)
{
    webhook_guard *g = ctx;
    (void)p;
    g->body_bytes += size * n;
    if (g->body_bytes > WEBHOOK_BODY_CAP) {
        g->body_cut = true;
        return 0;
    }
    return size * n;
}

static size_t read_headers_capped(char *p, size_t size, size_t n, void *ctx)
{
    webhook_guard *g = ctx;
    (void)p;
    g->header_bytes += size * n;
    if (g->header_bytes > WEBHOOK_HEADERS_CAP) {
        g->headers_cut = true;
        return 0;
    }
    return size * n;
}

void webhook_guard_attach(CURL *easy, webhook_guard *g, bool deny_private)
{
    *g = (webhook_guard){.deny_private = deny_private};
    if (deny_private) /* a proxy from the environment would be what the check judges */
        curl_easy_setopt(easy, CURLOPT_PROXY, "");
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_checked_socket);
    curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, g);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, read_body_capped);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, g);
    curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, read_headers_capped);
    curl_easy_setopt(easy, CURLOPT_HEADERDATA, g);
    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, g->detail);
}

/* A status line arrived and the transfer ended by itself or was cut by payd at a cap. */
static bool answered(const webhook_guard *g, CURLcode rc, long status)
{
    return status >= 100 && (rc == CURLE_OK || g->body_cut || g->headers_cut);
}

bool webhook_attempt_delivered(const webhook_guard *g, CURLcode rc, long status)
{
    return answered(g, rc, status) && status >= 200 && status < 300;
}

static bool tls_failure(CURLcode rc)
{
    switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_CLIENTCERT:
    case CURLE_USE_SSL_FAILED:
        return true;
    default:
        return false;
    }
}

const char *webhook_attempt_error(const webhook_guard *g, CURLcode rc, long status)
{
    if (answered(g, rc, status)) {
        if (status < 200 || status >= 300)
            return WEBHOOK_ERR_BAD_STATUS; /* the status is in response_status */
        return g->body_cut      ? WEBHOOK_ERR_BODY_TOO_LARGE
               : g->headers_cut ? WEBHOOK_ERR_HEADERS_TOO_LARGE
                                : NULL;
    }
    if (g->headers_cut)
        return WEBHOOK_ERR_HEADERS_TOO_LARGE;
    if (rc == CURLE_COULDNT_CONNECT && g->address_refused)
        return WEBHOOK_ERR_ADDRESS;
    if (tls_failure(rc))
        return WEBHOOK_ERR_TLS;
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        return WEBHOOK_ERR_TIMEOUT;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return WEBHOOK_ERR_DNS;
    case CURLE_COULDNT_CONNECT:
        return WEBHOOK_ERR_REFUSED;
    default: /* closed without an answer, reset, not HTTP, ... */
        return WEBHOOK_ERR_CONNECTION;
    }
}

void webhook_attempt_log(const webhook_guard *g, uint64_t endpoint_id, uint64_t event_id,
                         const char *error)
{
    if (!error || !strcmp(error, WEBHOOK_ERR_BAD_STATUS))
        return; /* delivered, or the status says it all */
    char endpoint[ID_STR_MAX], event[ID_STR_MAX];
    id_format(endpoint_id, "we", endpoint);
    id_format(event_id, "evt", event);
    jsonw w;
    log_begin(&w, "info", "webhook attempt ended without a clean answer");
    jw_key(&w, "endpoint_id");
    jw_string(&w, endpoint);
    jw_key(&w, "event_id");
    jw_string(&w, event);
    jw_key(&w, "error");
    jw_string(&w, error);
    jw_key(&w, "detail");
    jw_string(&w, g->detail);
    log_end(&w);
}

const char *webhook_error_word(const char *stored)
{
    static const char *const vocabulary[] = {
        WEBHOOK_ERR_TIMEOUT,
        WEBHOOK_ERR_DNS,
        WEBHOOK_ERR_REFUSED,
        WEBHOOK_ERR_ADDRESS,
        WEBHOOK_ERR_TLS,
        WEBHOOK_ERR_CONNECTION,
        WEBHOOK_ERR_BAD_STATUS,
        WEBHOOK_ERR_BODY_TOO_LARGE,
        WEBHOOK_ERR_HEADERS_TOO_LARGE,
    };
    if (!stored)
        return NULL;
    for (size_t i = 0; i < sizeof vocabulary / sizeof vocabulary[0]; i++)
        if (!strcmp(stored, vocabulary[i]))
            return vocabulary[i];
    return WEBHOOK_ERR_CONNECTION;
}
