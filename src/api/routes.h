#ifndef PAYD_API_ROUTES_H
#define PAYD_API_ROUTES_H
/* payd's route table (api/routes.c): every endpoint of the contract, as data. The pipeline
 * matches requests against it and hands it to the recoverer; the router (request/router.c)
 * takes any table. */
#include "request/route.h"

extern const route payd_routes[];
extern const int payd_route_count;

#endif
