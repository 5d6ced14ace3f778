/* HTTPS certificates for the HTTP server (tls.h). */
#include "http/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 16

/* One certificate chain and its key. A pair is never freed while the server runs: a handshake
 * that began on it may still read it after a reload, and a pair costs a few kilobytes. */
typedef struct tls_pair {
    gnutls_pcert_st chain[MAX_CHAIN];
    unsigned chain_length;
    gnutls_privkey_t key;
    struct tls_pair *older;
} tls_pair;

static _Atomic(tls_pair *) current;
static pthread_mutex_t loading = PTHREAD_MUTEX_INITIALIZER;

static void pair_free(tls_pair *p)
{
    for (unsigned i = 0; i < p->chain_length; i++)
        gnutls_pcert_deinit(&p->chain[i]);
    if (p->key)
        gnutls_privkey_deinit(p->key);
    free(p);
}

static int read_file(const char *path, gnutls_datum_t *out, char *err, size_t errlen)
{
    int rc = gnutls_load_file(path, out);
    if (rc < 0)
        snprintf(err, errlen, "cannot read %s: %s", path, gnutls_strerror(rc));
    return rc < 0 ? -1 : 0;
}

/* The key belongs to the chain's first certificate: their public keys have one id. */
static bool key_matches(tls_pair *p)
{
    gnutls_pubkey_t from_key;
    if (gnutls_pubkey_init(&from_key) < 0)
        return false;
    unsigned char a[64], b[64];
    size_t a_len = sizeof a, b_len = sizeof b;
    bool same = gnutls_pubkey_import_privkey(from_key, p->key, 0, 0) == 0 &&
                gnutls_pubkey_get_key_id(from_key, 0, a, &a_len) == 0 &&
                gnutls_pubkey_get_key_id(p->chain[0].pubkey, 0, b, &b_len) == 0 && a_len == b_len &&
                !memcmp(a, b, a_len);
    gnutls_pubkey_deinit(from_key);
    return same;
}

static tls_pair *pair_read(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    tls_pair *p = calloc(1, sizeof *p);
    gnutls_datum_t cert = {0}, key = {0};
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int rc = read_file(cert_path, &cert, err, errlen) || read_file(key_path, &key, err, errlen);
    if (rc == 0) {
        p->chain_length = MAX_CHAIN;
        int r = gnutls_pcert_list_import_x509_raw(p->chain, &p->chain_length, &cert,
                                                  GNUTLS_X509_FMT_PEM, 0);
        if (r < 0 || p->chain_length == 0) {
            p->chain_length = 0;
            snprintf(err, errlen, "%s holds no PEM certificate chain (at most %d): %s", cert_path,
                     MAX_CHAIN, gnutls_strerror(r));
            rc = -1;
        }
    }
    if (rc == 0 &&
        (gnutls_privkey_init(&p->key) < 0 ||
         gnutls_privkey_import_x509_raw(p->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0)) {
        snprintf(err, errlen, "%s holds no unencrypted PEM private key", key_path);
        rc = -1;
    }
    if (rc == 0 && !key_matches(p)) {
        snprintf(err, errlen, "the key in %s does not belong to the certificate in %s", key_path,
                 cert_path);
        rc = -1;
    }
    gnutls_free(cert.data);
    gnutls_free(key.data);
    if (rc != 0) {
        pair_free(p);
        return NULL;
    }
    return p;
}

int http_tls_load(const char *cert_path, const char *key_path, char *err, size_t errlen)
{
    tls_pair *p = pair_read(cert_path, key_path, err, errlen);
    if (!p)
        return -1;
    pthread_mutex_lock(&loading);
    p->older = atomic_load(&current);
    atomic_store(&current, p);
    pthread_mutex_unlock(&loading);
    return 0;
}

bool http_tls_enabled(void)
{
    return atomic_load(&current) != NULL;
}

int http_tls_pick_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                              int n_req_ca_dn, const gnutls_pk_algorithm_t *pk_algos,
                              int n_pk_algos, gnutls_pcert_st **chain, unsigned int *chain_length,
                              gnutls_privkey_t *key)
{
    (void)session, (void)req_ca_dn, (void)n_req_ca_dn, (void)pk_algos, (void)n_pk_algos;
    tls_pair *p = atomic_load(&current);
    if (!p)
        return -1;
    *chain = p->chain;
    *chain_length = p->chain_length;
    *key = p->key;
    return 0;
}

void http_tls_free(void)
{
    pthread_mutex_lock(&loading);
    tls_pair *p = atomic_exchange(&current, NULL);
    while (p) {
        tls_pair *older = p->older;
        pair_free(p);
        p = older;
    }
    pthread_mutex_unlock(&loading);
}
