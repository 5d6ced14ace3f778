#ifndef PAYD_WEBHOOK_SIGNATURE_H
#define PAYD_WEBHOOK_SIGNATURE_H
/* The two signatures every delivery carries (docs/webhooks.md, "Verifying"):
 *
 *   Payd-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
 *     keyed with the whole secret text, "whsec_" included (payd's own scheme, kept as it was);
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, "<webhook-id>.<t>.<body>")>
 *     the Standard Webhooks scheme, keyed with the base64 decoding of what follows "whsec_".
 *
 * During a rotation's overlap both the new and the previous secret sign: each header then holds
 * two signatures, the new one first. */
#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_KEY_MAX 64 /* the longest signing key a secret may decode to */
/* "t=<20 digits>" and two ",v1=<64 hex>" */
#define WEBHOOK_PAYD_SIGNATURE_MAX 180
/* two "v1,<44 base64>" and a space */
#define WEBHOOK_STANDARD_SIGNATURE_MAX 104

/* The Standard Webhooks key of a secret: the standard base64 decoding of what follows "whsec_"
 * (the whole text without that prefix), with missing '=' padding restored, as the
 * specification's libraries do. Secrets of the first release ("whsec_" and 48 hex digits) are
 * base64 text too: their key is those 48 characters decoded (36 bytes). The key's length, or -1
 * when the text is not base64. */
int webhook_secret_key(const char *secret, uint8_t key[WEBHOOK_KEY_MAX]);

/* "t=<unix>,v1=<hex>" into out (at least 80 bytes): payd's own signature with one secret. */
void webhook_sign(const char *secret, int64_t unix_s, const char *body, size_t body_len, char *out,
                  size_t cap);

/* "v1,<base64>" into out (at least 48 bytes): the Standard Webhooks signature of msg_id, unix_s
 * and body with one secret. 0, or -1 when the secret's key does not decode. */
int webhook_sign_standard(const char *secret, const char *msg_id, int64_t unix_s, const char *body,
                          size_t body_len, char *out, size_t cap);

/* Both header values of one delivery: payd's into payd_out, the Standard Webhooks one into
 * standard_out, signed with secret and, when it is not NULL, previous after it. 0, or -1 when
 * secret's key does not decode (standard_out is then not written; a previous secret whose key
 * does not decode is left out of it). payd_out is always written. */
int webhook_signature_headers(const char *secret, const char *previous, const char *msg_id,
                              int64_t unix_s, const char *body, size_t body_len,
                              char payd_out[WEBHOOK_PAYD_SIGNATURE_MAX],
                              char standard_out[WEBHOOK_STANDARD_SIGNATURE_MAX]);

/* Every request header of a delivery of event_id sent at unix_s with this body (to free with
 * curl_slist_free_all): Content-Type, Payd-Event-Id, Payd-Signature, webhook-id,
 * webhook-timestamp, webhook-signature and User-Agent. previous: a rotation's previous secret
 * while it still signs, else NULL. A secret whose key does not decode sends no webhook-signature
 * (a receiver then refuses the delivery, as it should). */
struct curl_slist *webhook_delivery_headers(const char *secret, const char *previous,
                                            uint64_t event_id, int64_t unix_s, const char *body,
                                            size_t body_len);

#endif
