#ifndef PAYD_API_PAGINATION_H
#define PAYD_API_PAGINATION_H
/* Keyset pagination (§4), one mechanism for every list. A list declares its query, the columns
 * of its (created_at, id) sort key and its filters; each page is one index range scan
 * `WHERE parent = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT n+1`.
 * No OFFSET anywhere. Cursors are signed and bound to the list, parent, user and filters. */
#include <stdint.h>

#include "http/request.h"
#include "store/db.h"

struct jsonw;

typedef struct list_query {
    const char *name;          /* bound into cursors: a cursor of one list fails on another */
    const char *select;        /* "SELECT <columns> FROM <tables>" */
    const char *parent_column; /* "account_id": the list's parent */
    const char *created_column, *id_column; /* the sort key; default created_at, id */
    int created_index, id_index;            /* where the sort key sits among the selected columns */
    const char *status_column;              /* non-NULL: ?status= filters on it */
    const char *const *statuses;            /* the values ?status= accepts, NULL-terminated */
    const char *status_param;               /* the filter's query name; NULL: "status" */
    const char *time_column;                /* non-NULL: created_gte / created_lt filter on it */
    /* The row as JSON: write_row writes it straight into the page (fast); lists without one
     * build it with to_json. */
    void (*write_row)(db_stmt *st, struct jsonw *w);
    json_t *(*to_json)(db_stmt *st);
} list_query;

/* Answers the list request: validates limit, filters and cursor, reads one page. */
void list_page(request *req, const list_query *q, uint64_t parent_id, const char *parent_label);

/* Validated filters, shared with count endpoints. Returns false after replying. */
typedef struct list_filters {
    const char *status, *status_param;
    int64_t created_gte, created_lt; /* µs; 0 = unset */
    const char *created_gte_text, *created_lt_text;
} list_filters;
bool list_filters_or_reply(request *req, const list_query *q, list_filters *f);
/* SELECT COUNT(*) over the same filters. */
void list_count(request *req, const list_query *q, const char *from, uint64_t parent_id);

#endif
