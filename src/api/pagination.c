#include "api/pagination.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common.h"
#include "api/resource.h"
#include "core/cursor.h"
#include "core/decimal.h"
#include "core/ids.h"
#include "core/jsonw.h"
#include "core/timefmt.h"

int any_id_parse(const char *text, uint64_t *out)
{
    const char *sep = strchr(text, '_');
    char prefix[ID_PREFIX_MAX + 1];
    if (!sep || sep == text || (size_t)(sep - text) > ID_PREFIX_MAX)
        return -1;
    memcpy(prefix, text, (size_t)(sep - text));
    prefix[sep - text] = '\0';
    return id_parse(text, prefix, out);
}

/* ---- the redundant id bounds of a partitioned list (list_query.id_bounds) ---- */

static bool partitioned_by_id(request *req, const list_query *q)
{
    return q->id_bounds && store_kind(req->app->store) == DB_POSTGRES;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* ---- text built a piece at a time (a page's SQL, its Link header): snprintf's formats cost a
 * list page more than its cursor's HMAC. What would not fit is cut (a cut SQL fails to prepare). */

typedef struct textbuf {
    char *buf;
    size_t len, cap;
    bool cut;
} textbuf;

static void add(textbuf *t, const char *s)
{
    size_t n = strlen(s);
    if (n >= t->cap - t->len) {
        n = t->cap - t->len - 1;
        t->cut = true;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static void add_uint(textbuf *t, uint64_t v)
{
    char digits[DECIMAL_CHARS + 1];
    *decimal_put(digits, (int64_t)v) = '\0'; /* ids, counts and limits: below 2^63 */
    add(t, digits);
}

/* "$n" for the next parameter, whose value is v. */
static void add_param(textbuf *sql, db_value *params, int *n, db_value v)
{
    params[(*n)++] = v;
    add(sql, "$");
    add_uint(sql, (uint64_t)*n);
}

/* " AND <a><b>$n" with an integer parameter */
static void add_condition(textbuf *sql, const char *a, const char *b, db_value *params, int *n,
                          int64_t value)
{
    add(sql, " AND ");
    add(sql, a);
    add(sql, b);
    add_param(sql, params, n, (db_value){.type = 'i', .i = value});
}

static void add_id_bound(textbuf *sql, const list_query *q, const char *op, int64_t bound,
                         db_value *params, int *n)
{
    add_condition(sql, q->id_column ? q->id_column : "id", op, params, n, bound);
}

/* Appends the filter conditions and their parameters. */
static void add_filters(request *req, textbuf *sql, db_value *params, int *n, const list_query *q,
                        const list_params *f)
{
    if (f->status && q->status_list) {
        /* "a,b,c" (checked before: at most LIST_MAX_FILTER_VALUES, each one of the values) */
        add(sql, " AND ");
        add(sql, q->status_column);
        add(sql, " IN (");
        const char *item = f->status;
        for (int i = 0; item && i < LIST_MAX_FILTER_VALUES; i++) {
            const char *comma = strchr(item, ',');
            size_t item_len = comma ? (size_t)(comma - item) : strlen(item);
            if (i)
                add(sql, ", ");
            add_param(sql, params, n,
                      (db_value){.type = 's', .s = arena_strndup(&req->arena, item, item_len)});
            item = comma ? comma + 1 : NULL;
        }
        add(sql, ")");
    } else if (f->status) {
        add(sql, " AND ");
        add(sql, q->status_column);
        add(sql, " = ");
        add_param(sql, params, n, (db_value){.type = 's', .s = f->status});
    }
    uint64_t source;
    if (f->source && q->source_column && any_id_parse(f->source, &source) == 0)
        add_condition(sql, q->source_column, " = ", params, n, (int64_t)source);
    if (q->condition) {
        add(sql, " AND ");
        add(sql, q->condition);
    }
    if (f->created_gte.text)
        add_condition(sql, q->time_column, " >= ", params, n, f->created_gte.us);
    if (f->created_lt.text)
        add_condition(sql, q->time_column, " < ", params, n, f->created_lt.us);
    if (partitioned_by_id(req, q)) {
        /* created_at >= gte: the id's ms is at least gte's; created_at < lt: below lt's,
         * rounded up to a whole ms */
        if (f->created_gte.text)
            add_id_bound(sql, q, " >= ", id_first_of_ms(floor_div(f->created_gte.us, 1000)), params,
                         n);
        if (f->created_lt.text)
            add_id_bound(sql, q, " < ", id_first_of_ms(-floor_div(-f->created_lt.us, 1000)), params,
                         n);
    }
}

static void scope_of(request *req, const list_query *q, const char *parent, const list_params *f,
                     uint8_t out[16])
{
    char user[24];
    add_uint(&(textbuf){user, 0, sizeof user, false}, req->user.id);
    const char *parts[] = {q->name,
                           parent,
                           user,
                           f->status ? f->status : "",
                           f->created_gte.text ? f->created_gte.text : "",
                           f->created_lt.text ? f->created_lt.text : ""};
    /* the source filter joins the scope only when given, so the cursors of lists without
     * one stay what they were */
    const char *with_source[] = {
        parts[0], parts[1], parts[2], parts[3], parts[4], parts[5], f->source ? f->source : ""};
    if (f->source)
        cursor_scope(with_source, sizeof with_source / sizeof with_source[0], out);
    else
        cursor_scope(parts, sizeof parts / sizeof parts[0], out);
}

/* Writes the cursor (or null) and returns its text for the Link header (NULL when none). */
static char *write_cursor(request *req, jsonw *w, bool exists, uint8_t direction,
                          int64_t created_at, uint64_t id, const uint8_t scope[16])
{
    page_cursor c = {.direction = direction, .created_at = created_at, .id = id};
    memcpy(c.scope, scope, 16);
    char s[CURSOR_STR_MAX];
    if (!exists || cursor_encode(req->app->cursor_key, sizeof req->app->cursor_key, &c, s) != 0) {
        jw_null(w);
        return NULL;
    }
    jw_string(w, s);
    return arena_strdup(&req->arena, s);
}

static void write_row(const list_query *q, db_stmt *st, jsonw *w)
{
    if (q->of) {
        q->of->write_row(st, w);
        return;
    }
    if (q->write_row) {
        q->write_row(st, w);
        return;
    }
    json_t *row = q->to_json(st);
    char *text = json_dumps(row, JSON_COMPACT | JSON_PRESERVE_ORDER);
    jw_raw(w, text, "null");
    free(text);
    json_decref(row);
}

/* The query string for Link: the same filters and limit, with another cursor. */
static void link_header(request *req, const list_query *q, const list_params *f, int limit,
                        const char *next, const char *prev)
{
    char buf[1024] = "";
    textbuf link = {buf, 0, sizeof buf, false};
    const char *cursors[2] = {next, prev};
    const char *rels[2] = {"next", "prev"};
    for (int i = 0; i < 2; i++) {
        if (!cursors[i])
            continue;
        add(&link, link.len ? ", <" : "<");
        add(&link, req->path);
        add(&link, "?limit=");
        add_uint(&link, (uint64_t)limit);
        add(&link, "&cursor=");
        add(&link, cursors[i]);
        if (f->status) {
            add(&link, "&");
            add(&link, q->status_param ? q->status_param : "status");
            add(&link, "=");
            add(&link, f->status);
        }
        const char *names[] = {"&account_id=", "&source=", "&created_gte=", "&created_lt="};
        const char *values[] = {f->account.text, f->source, f->created_gte.text,
                                f->created_lt.text};
        for (int k = 0; k < 4; k++) {
            if (values[k]) {
                add(&link, names[k]);
                add(&link, values[k]);
            }
        }
        add(&link, ">; rel=\"");
        add(&link, rels[i]);
        add(&link, "\"");
    }
    if (link.len && !link.cut)
        reply_header(req, "Link", buf);
}

/* The list's "SELECT <columns> FROM <table>": its resource's, or its own. */
static const char *list_select(const list_query *q, char *buf, size_t size)
{
    if (!q->of)
        return q->select;
    textbuf select = {buf, 0, size, false};
    add(&select, "SELECT ");
    add(&select, q->of->columns);
    add(&select, " FROM ");
    add(&select, q->of->table);
    return buf;
}

/* The page's query after "SELECT <columns> FROM <table>" (select): its parent, filters, the
 * position after the cursor (at; NULL: the first page) and order, in sql, with its parameters;
 * returns how many. */
static int page_query(request *req, const list_query *q, const char *select, uint64_t parent_id,
                      const page_cursor *at, char *sql, size_t size, db_value *params)
{
    const list_params *f = req->input;
    bool backwards = at && at->direction == CURSOR_PREV;
    const char *created = q->created_column ? q->created_column : "created_at";
    const char *idcol = q->id_column ? q->id_column : "id";
    textbuf t = {sql, 0, size, false};
    int n = 0;
    add(&t, select);
    add(&t, " WHERE ");
    add(&t, q->parent_column);
    add(&t, " = ");
    add_param(&t, params, &n, (db_value){.type = 'i', .i = (int64_t)parent_id});
    add_filters(req, &t, params, &n, q, f);
    if (at) {
        add(&t, " AND (");
        add(&t, created);
        add(&t, ", ");
        add(&t, idcol);
        add(&t, backwards ? ") > (" : ") < (");
        add_param(&t, params, &n, (db_value){.type = 'i', .i = at->created_at});
        add(&t, ", ");
        add_param(&t, params, &n, (db_value){.type = 'i', .i = (int64_t)at->id});
        add(&t, ")");
        /* past the cursor's time, so is every id: the months beyond it are left out */
        if (partitioned_by_id(req, q))
            add_id_bound(&t, q, backwards ? " >= " : " < ",
                         id_first_of_ms(floor_div(at->created_at, 1000) + !backwards), params, &n);
    }
    const char *order = backwards ? " ASC" : " DESC";
    add(&t, " ORDER BY ");
    add(&t, created);
    add(&t, order);
    add(&t, ", ");
    add(&t, idcol);
    add(&t, order);
    add(&t, " LIMIT ");
    add_param(&t, params, &n, (db_value){.type = 'i', .i = f->limit + 1});
    return n;
}

int list_page(request *req, const list_query *q, uint64_t parent_id, const char *parent_label)
{
    const list_params *f = req->input;
    int limit = (int)f->limit;
    char parent[24];
    add_uint(&(textbuf){parent, 0, sizeof parent, false}, parent_id);
    uint8_t scope[16];
    scope_of(req, q, parent_label ? parent_label : parent, f, scope);

    page_cursor at = {0};
    const char *cursor = f->cursor;
    if (cursor) {
        if (cursor_decode(req->app->cursor_key, sizeof req->app->cursor_key, cursor, &at) != 0) {
            reply_invalid_param(req, ERR_INVALID_CURSOR, "cursor", "the cursor is not valid");
            return -1;
        }
        if (memcmp(at.scope, scope, 16) != 0) {
            reply_invalid_param(req, ERR_CURSOR_MISMATCH, "cursor",
                                "the cursor belongs to another list, parent, user or filters");
            return -1;
        }
    }
    bool backwards = cursor && at.direction == CURSOR_PREV;
    const char *created = q->created_column ? q->created_column : "created_at";
    const char *idcol = q->id_column ? q->id_column : "id";
    char select_buf[768];
    const char *select = list_select(q, select_buf, sizeof select_buf);
    int created_at = column_position(select, created), id_at = column_position(select, idcol);
    if (created_at < 0 ||
        id_at < 0) { /* a list defined without its sort key: a programming error */
        reply_error(req, ERR_INTERNAL, "the list cannot be paged");
        return -1;
    }

    char sql[1024];
    db_value params[12 + LIST_MAX_FILTER_VALUES]; /* with the id bounds: at most 11 besides */
    int n = page_query(req, q, select, parent_id, cursor ? &at : NULL, sql, sizeof sql, params);

    db_conn *db = reader_or_reply(req);
    if (!db)
        return -1;
    db_stmt *st = db_query_values(db, db_intern_sql(sql), params, n);
    /* rows written here say their mode (jw_member_object); JSON from to_json or a stored
     * event's data is marked on the answer's way out (docs/modes.md) */
    bool says_mode = q->of ? !q->of->unmarked_rows : q->write_row != NULL;
    jsonw w;
    if (says_mode)
        jw_init_answer(req, &w);
    else
        jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "object");
    jw_string(&w, "list");
    jw_key(&w, "data");
    jw_array_begin(&w);
    /* a backwards page is read oldest-first, to stay next to its cursor, and served
     * newest-first like every page: its rows are held, then written in reverse */
    char *held[LIST_MAX_LIMIT];
    int64_t first_created = 0, last_created = 0;
    uint64_t first_id = 0, last_id = 0;
    int rows = 0;
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (rows == limit) {
            rows++; /* the n+1th row only tells that more exist */
            break;
        }
        if (rows == 0 || rows == limit - 1 || backwards) {
            /* where the cursors point: the first row, and the last (forward, a next cursor is
             * written only for a full page) */
            int64_t c = db_int(st, created_at);
            uint64_t id = (uint64_t)db_int(st, id_at);
            if (rows == 0) {
                first_created = c;
                first_id = id;
            }
            last_created = c;
            last_id = id;
        }
        if (backwards) {
            jsonw one;
            jw_init(&one);
            one.livemode = w.livemode;
            write_row(q, st, &one);
            held[rows] = jw_take(&one, NULL);
        } else {
            write_row(q, st, &w);
        }
        rows++;
    }
    db_done(st);
    bool has_more = rows > limit;
    int count = has_more ? limit : rows;
    if (backwards) {
        for (int i = count - 1; i >= 0; i--) {
            jw_raw(&w, held[i], "null");
            free(held[i]);
        }
        int64_t tc = first_created;
        uint64_t ti = first_id;
        first_created = last_created;
        first_id = last_id;
        last_created = tc;
        last_id = ti;
    }
    jw_array_end(&w);
    if (rc == DB_ERROR) {
        jw_free(&w);
        reply_error(req, ERR_INTERNAL, "the list could not be read");
        return -1;
    }
    jw_key(&w, "has_more");
    jw_bool(&w, has_more);
    /* forward: next exists when more rows follow; backwards: the page we came from follows */
    jw_key(&w, "next_cursor");
    char *next = write_cursor(req, &w, count && (backwards || has_more), CURSOR_NEXT, last_created,
                              last_id, scope);
    jw_key(&w, "prev_cursor");
    char *prev =
        write_cursor(req, &w, count && cursor, CURSOR_PREV, first_created, first_id, scope);
    jw_object_end(&w);
    link_header(req, q, f, limit, next, prev);
    reply_jsonw(req, 200, &w);
    return count;
}

void list_count(request *req, const list_query *q, const char *from, uint64_t parent_id)
{
    char sql[512];
    textbuf t = {sql, 0, sizeof sql, false};
    db_value params[8 + LIST_MAX_FILTER_VALUES]; /* with the id bounds: at most 7 besides */
    int n = 0;
    add(&t, "SELECT COUNT(*) FROM ");
    add(&t, from);
    add(&t, " WHERE ");
    add(&t, q->parent_column);
    add(&t, " = ");
    add_param(&t, params, &n, (db_value){.type = 'i', .i = (int64_t)parent_id});
    add_filters(req, &t, params, &n, q, req->input);
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query_values(db, db_intern_sql(sql), params, n);
    if (db_step(st) == DB_ROW)
        reply_json(req, 200,
                   json_pack("{s:s, s:I}", "object", "count", "count", (json_int_t)db_int(st, 0)));
    else
        reply_error(req, ERR_INTERNAL, "the count could not be read");
    db_done(st);
}
