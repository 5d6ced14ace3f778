#ifndef PAYD_API_DASHBOARD_H
#define PAYD_API_DASHBOARD_H
/* The web dashboard (§16): static files from web/, built into the binary, served with strong
 * ETags and a strict Content-Security-Policy. No auth, no rate limit, like /openapi.json. */
#include "http/request.h"

void dashboard_index(request *req); /* GET / */
void dashboard_asset(request *req); /* GET /assets/{file} */

#endif
