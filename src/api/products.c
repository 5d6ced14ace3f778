/* Products and reservations (§10): inventory under contention.
 *
 * A sku is unique per user by index (the INSERT asks it; never a check-then-insert). A
 * reservation takes stock with one conditional UPDATE (`stock >= quantity`) in the same job as
 * its row and its key's stored answer: however many race, stock never goes below zero, and
 * exactly as many succeed as the stock allows. PATCH is a §9 versioned write. */
#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "core/timefmt.h"
#include "idem/idem.h"

#define PRODUCT_COLUMNS "id, sku, name, stock, version, created_at, updated_at"
#define MAX_STOCK       MAX_AMOUNT
#define MAX_QUANTITY    1000000

static json_t *product_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "id",
                     json_id("prod", (uint64_t)db_int(st, 0)), "object", "product", "sku",
                     db_text(st, 1), "name", db_text(st, 2), "stock", (json_int_t)db_int(st, 3),
                     "version", (json_int_t)db_int(st, 4), "created_at", json_time(db_int(st, 5)),
                     "updated_at", json_time(db_int(st, 6)));
}

/* [A-Za-z0-9_-]{1,64} */
static bool valid_sku(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* The sku in the path; any malformed one is simply a missing product. */
static const char *path_sku_or_reply(request *req)
{
    if (valid_sku(req->params[0]))
        return req->params[0];
    reply_error(req, ERR_RESOURCE_MISSING, "no such product");
    return NULL;
}

/* ---- create ---- */

typedef struct new_product {
    request *req;
    uint64_t id;
    const char *sku, *name;
    int64_t stock, now;
} new_product;

static int insert_product(db_conn *db, void *arg)
{
    new_product *p = arg;
    request *req = p->req;
    db_status rc =
        db_exec(db,
                "INSERT INTO products (id, user_id, sku, name, stock, version, "
                "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, $6, $6) "
                "ON CONFLICT (user_id, sku) DO NOTHING",
                "iissii", (int64_t)p->id, (int64_t)req->user.id, p->sku, p->name, p->stock, p->now);
    if (rc != DB_DONE)
        return rc;
    if (db_changes(db) == 0) {
        reply_invalid_param(req, ERR_DUPLICATE_SKU, "sku", "a product with this sku exists");
        return 0;
    }
    json_t *body = json_pack("{s:o, s:s, s:s, s:s, s:I, s:i, s:o, s:o}", "id",
                             json_id("prod", p->id), "object", "product", "sku", p->sku, "name",
                             p->name, "stock", (json_int_t)p->stock, "version", 1, "created_at",
                             json_time(p->now), "updated_at", json_time(p->now));
    reply_etag(req, 1);
    reply_created(req, "/v1/products", p->sku, body);
    return 0;
}

void products_create(request *req)
{
    static const body_field fields[] = {
        {"sku", FIELD_STRING, true, 1, 64},
        {"name", FIELD_STRING, true, 1, 200},
        {"stock", FIELD_INTEGER, true, 0, MAX_STOCK},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return;
    new_product p = {.req = req,
                     .sku = body_string(req, "sku"),
                     .name = body_string(req, "name"),
                     .stock = body_int(req, "stock", 0)};
    if (!valid_sku(p.sku)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "sku",
                            "sku is 1-64 letters, digits, '_' or '-'");
        return;
    }
    p.id = app_next_id(req->app);
    p.now = created_at_of(p.id);
    write_result w = commit_response(req, insert_product, &p);
    if (w != WRITE_OK && w != WRITE_FENCED) /* fenced: the answer is what the key holds */
        reply_error(req, ERR_INTERNAL, "the product could not be stored");
}

/* ---- read and PATCH ---- */

void products_get(request *req)
{
    const char *sku = path_sku_or_reply(req);
    db_conn *db = sku ? reader_or_reply(req) : NULL;
    if (!db)
        return;
    db_stmt *st =
        db_query(db, "SELECT " PRODUCT_COLUMNS " FROM products WHERE user_id = $1 AND sku = $2",
                 "is", (int64_t)req->user.id, sku);
    if (db_step(st) == DB_ROW) {
        if (!etag_not_modified_or_set(req, db_int(st, 4)))
            reply_json(req, 200, product_json(st));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such product");
    }
    db_done(st);
}

typedef struct product_patch {
    request *req;
    const char *sku, *name; /* name NULL: unchanged */
    bool set_stock;
    int64_t stock;
    int64_t expected; /* 0: any version */
    bool from_if_match;
    int64_t now;
} product_patch;

static int patch_product(db_conn *db, void *arg)
{
    product_patch *p = arg;
    request *req = p->req;
    /* nothing to change (only a version): checked like a write, but nothing is bumped */
    int64_t bump = p->name || p->set_stock ? 1 : 0;
    db_status rc = db_exec(db,
                           "UPDATE products SET name = COALESCE($3, name), "
                           "stock = CASE WHEN $4 = 1 THEN $5 ELSE stock END, "
                           "version = version + $6, "
                           "updated_at = CASE WHEN $6 = 1 THEN $7 ELSE updated_at END "
                           "WHERE user_id = $1 AND sku = $2 AND (version = $8 OR $8 = 0)",
                           "issiiiii", (int64_t)req->user.id, p->sku, p->name,
                           (int64_t)p->set_stock, p->stock, bump, p->now, p->expected);
    if (rc != DB_DONE)
        return rc;
    bool applied = db_changes(db) == 1;
    return reply_versioned_write(
        req,
        db_query(db, "SELECT " PRODUCT_COLUMNS " FROM products WHERE user_id = $1 AND sku = $2",
                 "is", (int64_t)req->user.id, p->sku),
        4, applied, p->expected, p->from_if_match, product_json, "no such product");
}

void products_update(request *req)
{
    static const body_field fields[] = {
        {"name", FIELD_STRING, false, 1, 200},
        {"stock", FIELD_INTEGER, false, 0, MAX_STOCK},
        VERSION_FIELD,
    };
    product_patch p = {.req = req, .sku = path_sku_or_reply(req), .now = now_us()};
    if (!p.sku || !CHECK_BODY_OR_REPLY(req, fields))
        return;
    p.name = body_string(req, "name");
    p.set_stock = body_has(req, "stock");
    p.stock = body_int(req, "stock", 0);
    if_match_version(req, &p.expected, &p.from_if_match);
    if (store_write(req->app->store, patch_product, &p) != 0)
        reply_error(req, ERR_INTERNAL, "the product could not be updated");
}

/* ---- reservations ---- */

typedef struct reservation {
    request *req;
    uint64_t id, product_id, order_id; /* order_id 0: none */
    const char *sku;
    int64_t quantity, now;
} reservation;

static int reserve_stock(db_conn *db, void *arg)
{
    reservation *r = arg;
    request *req = r->req;
    /* the check and the take in one statement: no reservation can see stock another took */
    db_status rc = db_exec(db,
                           "UPDATE products SET stock = stock - $2, version = version + 1, "
                           "updated_at = $3 WHERE id = $1 AND stock >= $2",
                           "iii", (int64_t)r->product_id, r->quantity, r->now);
    if (rc != DB_DONE)
        return rc;
    if (db_changes(db) == 0) {
        db_stmt *st =
            db_query(db, "SELECT stock FROM products WHERE id = $1", "i", (int64_t)r->product_id);
        int64_t available = db_step(st) == DB_ROW ? db_int(st, 0) : 0;
        db_done(st);
        reply_error_extra(req, ERR_OUT_OF_STOCK, "not enough stock for this quantity",
                          json_pack("{s:I}", "available", (json_int_t)available));
        return 0; /* nothing was written; the answer is stored with the key */
    }
    rc = db_exec(db,
                 "INSERT INTO reservations (id, user_id, product_id, quantity, order_id, "
                 "created_at) VALUES ($1, $2, $3, $4, $5, $6)",
                 "iiiizi", (int64_t)r->id, (int64_t)req->user.id, (int64_t)r->product_id,
                 r->quantity, (int64_t)r->order_id, r->now);
    if (rc != DB_DONE)
        return rc;
    reply_json(req, 201,
               json_pack("{s:o, s:s, s:s, s:I, s:o}", "id", json_id("rsv", r->id), "object",
                         "reservation", "sku", r->sku, "quantity", (json_int_t)r->quantity,
                         "created_at", json_time(r->now)));
    /* §15: the event commits with the reservation */
    return event_record_reply(db, req, "reservation.created", NULL);
}

/* 404s (product, order) release the key: nothing happened. */
static bool reservation_targets_or_reply(request *req, reservation *r)
{
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    db_stmt *st = db_query(db, "SELECT id FROM products WHERE user_id = $1 AND sku = $2", "is",
                           (int64_t)req->user.id, r->sku);
    bool found = db_step(st) == DB_ROW;
    if (found)
        r->product_id = (uint64_t)db_int(st, 0);
    db_done(st);
    if (!found) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such product");
        return false;
    }
    const char *order = body_string(req, "order_id");
    if (!order)
        return true;
    found = false;
    if (id_parse(order, "ord", &r->order_id) == 0) {
        st = db_query(db, "SELECT 1 FROM orders WHERE id = $1 AND user_id = $2", "ii",
                      (int64_t)r->order_id, (int64_t)req->user.id);
        found = db_step(st) == DB_ROW;
        db_done(st);
    }
    if (!found)
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
    return found;
}

void reservations_create(request *req)
{
    static const body_field fields[] = {
        {"quantity", FIELD_INTEGER, true, 1, MAX_QUANTITY},
        {"order_id", FIELD_STRING, false, 1, 64},
    };
    reservation r = {.req = req, .sku = path_sku_or_reply(req)};
    if (!r.sku || !CHECK_BODY_OR_REPLY(req, fields))
        return;
    r.quantity = body_int(req, "quantity", 0);
    if (!reservation_targets_or_reply(req, &r))
        return;
    r.id = app_next_id(req->app);
    r.now = created_at_of(r.id);
    write_result w = commit_response(req, reserve_stock, &r);
    if (w != WRITE_OK && w != WRITE_FENCED) { /* fenced: the answer is what the key holds */
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE,
                    "the reservation could not be stored; retry with the same Idempotency-Key");
    }
}
