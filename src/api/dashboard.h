#ifndef PAYD_API_DASHBOARD_H
#define PAYD_API_DASHBOARD_H
/* The web dashboard (§16): static files from web/, built into the binary, served with strong
 * ETags and a strict Content-Security-Policy. No auth, no rate limit, like /openapi.json. */
#include "api/handlers.h" /* dashboard_index (GET /), dashboard_asset (GET /assets/{file}) */

#endif
