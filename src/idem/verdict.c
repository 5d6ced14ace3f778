#include "idem/verdict.h"

#include <stdbool.h>
#include <string.h>

key_verdict idem_judge(const stored_key *k, const char *fingerprint, int64_t now, int64_t ttl_us,
                       int64_t lock_timeout_us)
{
    bool expired = k->claimed_at < now - ttl_us;
    if (!strcmp(k->state, "released"))
        return expired ? KEY_ABSENT : KEY_RELEASED;
    if (!strcmp(k->state, "completed") && expired)
        return KEY_ABSENT;
    if (strcmp(k->fingerprint, fingerprint) != 0)
        return KEY_MISMATCH;
    if (!strcmp(k->state, "completed"))
        return KEY_REPLAY;
    if (!strcmp(k->state, "started") && k->locked_at > now - lock_timeout_us)
        return KEY_BUSY;
    return KEY_RESUMABLE;
}
