#ifndef PAYD_HTTP_TLS_H
#define PAYD_HTTP_TLS_H
/* HTTPS for the HTTP server (docs/deployment.md, "TLS in payd"): a certificate chain and its key
 * read from PEM files, TLS 1.2 and 1.3 only. The pair can be read again while the server runs
 * (on SIGHUP): each handshake asks for the current pair, so new connections get the new
 * certificate while open ones finish on the one they started with. */
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stdbool.h>
#include <stddef.h>

/* The GnuTLS priority string: TLS 1.2 and 1.3, nothing older, the server's order of ciphers. */
#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:%SERVER_PRECEDENCE"

/* Reads the pair and makes it the one handshakes use: 0, or -1 with err set (the pair in use,
 * if any, stays). Refuses a key that does not match the chain's first certificate. */
int http_tls_load(const char *cert_path, const char *key_path, char *err, size_t errlen);
/* Whether a pair was loaded: the server then speaks only TLS. */
bool http_tls_enabled(void);
/* Picks the certificate of a handshake: the current pair (gnutls_certificate_retrieve_function2,
 * which the HTTP library hands to GnuTLS). */
int http_tls_pick_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn,
                              int n_req_ca_dn, const gnutls_pk_algorithm_t *pk_algos,
                              int n_pk_algos, gnutls_pcert_st **chain, unsigned int *chain_length,
                              gnutls_privkey_t *key);
/* Frees every pair loaded (at exit, once the server is stopped). */
void http_tls_free(void);

#endif
