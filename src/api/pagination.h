#ifndef PAYD_API_PAGINATION_H
#define PAYD_API_PAGINATION_H
/* Keyset pagination (§4), one mechanism for every list. A list declares its query, the columns
 * of its (created_at, id) sort key and its filters; each page is one index range scan
 * `WHERE parent = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT n+1`.
 * No OFFSET anywhere. Cursors are signed and bound to the list, parent, user and filters. */
#include <stdbool.h>
#include <stdint.h>

#include "core/cursor.h"
#include "http/schema.h"
#include "request/request.h"
#include "store/db.h"

#define LIST_MAX_LIMIT 100
/* A filter that takes a comma-separated list (list_query.status_list) takes at most so many. */
#define LIST_MAX_FILTER_VALUES 16

/* The query of every GET that lists, counts or sums, decoded by the pipeline (req->input). */
typedef struct list_params {
    int64_t limit;
    const char *cursor;
    const char *status; /* the filter on list_query.status_column (?status= or ?type=) */
    input_time created_gte, created_lt;
    const char *interval; /* payments/stats */
    int64_t wait;         /* events: seconds to hold an empty page for (api/event_waiters.h) */
    input_id account;     /* balance transactions: ?account_id= (the list's parent when given) */
    const char *source;   /* ?source=: an id of any prefix, on list_query.source_column */
} list_params;

/* The parameters of §4, for the route table's query schemas. */
#define LIST_LIMIT                                                                                 \
    {                                                                                              \
        .name = "limit", .kind = KIND_INTEGER, IN(list_params, limit), .min = 1,                   \
        .max = LIST_MAX_LIMIT, .dflt = "20", .err = ERR_INVALID_LIMIT                              \
    }
/* opaque: list_page checks its signature and scope */
#define LIST_CURSOR                                                                                \
    {                                                                                              \
        .name = "cursor", .kind = KIND_STRING, IN(list_params, cursor), .max = CURSOR_STR_MAX,     \
        .err = ERR_INVALID_CURSOR, .detail = "the cursor is not valid"                             \
    }
#define LIST_FILTER(param, list)                                                                   \
    {                                                                                              \
        .name = param, .kind = KIND_ENUM, IN(list_params, status), .values = list                  \
    }
#define LIST_CREATED_GTE                                                                           \
    {                                                                                              \
        .name = "created_gte", .kind = KIND_TIME, IN(list_params, created_gte)                     \
    }
#define LIST_CREATED_LT                                                                            \
    {                                                                                              \
        .name = "created_lt", .kind = KIND_TIME, IN(list_params, created_lt)                       \
    }

struct jsonw;

typedef struct list_query {
    const char *name;          /* bound into cursors: a cursor of one list fails on another */
    const char *select;        /* "SELECT <columns> FROM <tables>" */
    const char *parent_column; /* "account_id": the list's parent */
    /* the sort key; default created_at, id. Both must be among the selected columns, as written
     * there: their positions are found in select, never kept by hand. */
    const char *created_column, *id_column;
    const char *status_column; /* non-NULL: ?status= filters on it */
    const char *status_param;  /* the filter's query name; NULL: "status" */
    bool status_list; /* the filter is "a,b,c": any of them (checked by the route's schema) */
    const char *time_column;   /* non-NULL: created_gte / created_lt filter on it */
    const char *source_column; /* non-NULL: ?source= filters on it (checked by the handler) */
    const char *condition;     /* non-NULL: ANDed to every page's WHERE (a partial index's) */
    /* The row as JSON: write_row writes it straight into the page (fast); lists without one
     * build it with to_json. */
    void (*write_row)(db_stmt *st, struct jsonw *w);
    json_t *(*to_json)(db_stmt *st);
    bool unmarked_rows; /* as a resource's (resource.h): an event's stored data */
} list_query;

/* Answers the list request with one page: limit and filters come decoded (list_params); the
 * cursor is checked here. Returns the rows on the page, or -1 when it answered an error. */
int list_page(request *req, const list_query *q, uint64_t parent_id, const char *parent_label);

/* An id of whatever prefix it carries ("pay_…", "tr_…"): 0, or -1 when it is none. */
int any_id_parse(const char *text, uint64_t *out);

/* SELECT COUNT(*) over the same filters. */
void list_count(request *req, const list_query *q, const char *from, uint64_t parent_id);

#endif
