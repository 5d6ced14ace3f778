#ifndef PAYD_IDEM_INTERNAL_H
#define PAYD_IDEM_INTERNAL_H
/* Shared by the engine and its recoverer only. */
#include "idem/idem.h"

/* Stores the response, releases or unlocks the request's key, in a write job of its own. */
void idem_settle(request *req, key_disposition what);

#endif
