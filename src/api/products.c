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

static void write_product_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "prod", (uint64_t)db_int(st, 0));
    jw_member_object(w, "product");
    jw_member_string(w, "sku", db_text(st, 1));
    jw_member_string(w, "name", db_text(st, 2));
    jw_member_int(w, "stock", db_int(st, 3));
    jw_member_int(w, "version", db_int(st, 4));
    jw_member_time(w, "created_at", db_int(st, 5));
    jw_member_time(w, "updated_at", db_int(st, 6));
    jw_object_end(w);
}

/* A product is named by its sku in paths (and so in Location), not by its id. */
static const resource product_resource = {
    .noun = "product",
    RESOURCE_TABLE("products", PRODUCT_COLUMNS, "user_id"),
    .id_prefix = "prod",
    .path = "/v1/products/",
    .key_column = "sku",
    .version_column = "version",
    .write_row = write_product_row,
};

/* The caller's product by sku (not yet stepped). */
static db_stmt *product_by_sku(db_conn *db, request *req, const char *sku)
{
    return db_query(db, "SELECT " PRODUCT_COLUMNS " FROM products WHERE user_id = $1 AND sku = $2",
                    "is", (int64_t)req->user.id, sku);
}

/* A sku, in a body or a path: [A-Za-z0-9_-]{1,64} */
#define SKU_RULE .kind = KIND_TOKEN, .chars = "A-Za-z0-9_-", .min = 1, .max = 64

/* The sku in the path; any malformed one is simply a missing product. */
static const char *path_sku_or_reply(request *req)
{
    static const field sku = {.name = "sku", SKU_RULE};
    if (schema_field_accepts(&sku, req->params[0]))
        return req->params[0];
    reply_error(req, ERR_RESOURCE_MISSING, "no such product");
    return NULL;
}

/* ---- create ---- */

typedef struct product_input {
    const char *sku, *name; /* PATCH: name NULL is unchanged */
    int64_t stock;          /* PATCH: -1 is unchanged */
    int64_t version;        /* PATCH: 0 when not given */
} product_input;

#define PRODUCT_NAME_RULE .kind = KIND_STRING, IN(product_input, name), .min = 1, .max = 200
#define STOCK_RULE        .kind = KIND_INTEGER, IN(product_input, stock), .min = 0, .max = MAX_STOCK
static const field product_fields[] = {
    {.name = "sku",
     .required = true,
     IN(product_input, sku),
     SKU_RULE,
     .detail = "sku is 1-64 letters, digits, '_' or '-'"},
    {.name = "name", .required = true, PRODUCT_NAME_RULE},
    {.name = "stock", .required = true, STOCK_RULE},
};
const schema products_create_body = SCHEMA(product_input, product_fields);
static const field product_patch_fields[] = {
    {.name = "name", PRODUCT_NAME_RULE},
    {.name = "stock", STOCK_RULE, .absent = -1},
    VERSION_FIELD(product_input, version),
};
const schema products_update_body = SCHEMA(product_input, product_patch_fields);

typedef struct new_product {
    request *req;
    uint64_t id;
    const char *sku, *name;
    int64_t stock, now;
} new_product;

static write_result insert_product(db_conn *db, void *arg)
{
    new_product *p = arg;
    request *req = p->req;
    bool duplicate;
    db_status rc = resource_created(
        req, &product_resource,
        db_query(db,
                 "INSERT INTO products (id, user_id, sku, name, stock, version, "
                 "created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, $6, $6) "
                 "ON CONFLICT (user_id, sku) DO NOTHING RETURNING " PRODUCT_COLUMNS,
                 "iissii", (int64_t)p->id, (int64_t)req->user.id, p->sku, p->name, p->stock,
                 p->now),
        &duplicate);
    if (rc == DB_DONE && duplicate)
        reply_invalid_param(req, ERR_DUPLICATE_SKU, "sku", "a product with this sku exists");
    return write_result_of_db(rc);
}

step_result products_create(request *req, void *prepared)
{
    (void)prepared;
    const product_input *in = req->input;
    new_product *p = arena_alloc(&req->arena, sizeof *p);
    *p = (new_product){.req = req, .sku = in->sku, .name = in->name, .stock = in->stock};
    if (!new_row_id_or_reply(req, &p->id, &p->now))
        return STEP_DONE;
    return resource_commit_then_answer(req, insert_product, p, "product", NULL);
}

/* ---- read and PATCH ---- */

void products_get(request *req)
{
    const char *sku = path_sku_or_reply(req);
    db_conn *db = sku ? reader_or_reply(req) : NULL;
    if (db)
        resource_answer_get(req, &product_resource, product_by_sku(db, req, sku));
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

static write_result patch_product(db_conn *db, void *arg)
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
        return write_result_of_db(rc);
    bool applied = db_changes(db) == 1;
    return write_result_of_db(resource_versioned_reply(req, &product_resource,
                                                       product_by_sku(db, req, p->sku), applied,
                                                       p->expected, p->from_if_match));
}

step_result products_update(request *req, void *prepared)
{
    (void)prepared;
    const product_input *in = req->input;
    product_patch *p = arena_alloc(&req->arena, sizeof *p);
    *p = (product_patch){.req = req,
                         .sku = path_sku_or_reply(req),
                         .name = in->name,
                         .set_stock = in->stock >= 0,
                         .stock = in->stock,
                         .now = now_us()};
    if (!p->sku)
        return STEP_DONE;
    if_match_version(req, in->version, &p->expected, &p->from_if_match);
    return resource_write_then_answer(req, patch_product, p, "the product could not be updated");
}

/* ---- reservations ---- */

typedef struct reservation_input {
    int64_t quantity;
    input_id order;
} reservation_input;

static const field reservation_fields[] = {
    {.name = "quantity",
     .kind = KIND_INTEGER,
     .required = true,
     IN(reservation_input, quantity),
     .min = 1,
     .max = MAX_QUANTITY},
    {.name = "order_id", .kind = KIND_ID, IN(reservation_input, order), .prefix = "ord"},
};
const schema reservations_create_body = SCHEMA(reservation_input, reservation_fields);

/* A reservation shows its product's sku, which its row names by id. */
#define RESERVATION_COLUMNS                                                                        \
    "id, (SELECT sku FROM products WHERE products.id = product_id), quantity, created_at"

static void write_reservation_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "rsv", (uint64_t)db_int(st, 0));
    jw_member_object(w, "reservation");
    jw_member_string(w, "sku", db_text(st, 1));
    jw_member_int(w, "quantity", db_int(st, 2));
    jw_member_time(w, "created_at", db_int(st, 3));
    jw_object_end(w);
}

/* No route reads a reservation back, so its 201 names no Location. */
static const resource reservation_resource = {
    .noun = "reservation",
    RESOURCE_TABLE("reservations", RESERVATION_COLUMNS, "user_id"),
    .id_prefix = "rsv",
    .write_row = write_reservation_row,
};

typedef struct reservation {
    request *req;
    uint64_t id, product_id, order_id; /* order_id 0: none */
    const char *sku;
    int64_t quantity, now;
} reservation;

static write_result reserve_stock(db_conn *db, void *arg)
{
    reservation *r = arg;
    request *req = r->req;
    /* the check and the take in one statement: no reservation can see stock another took */
    db_status rc = db_exec(db,
                           "UPDATE products SET stock = stock - $2, version = version + 1, "
                           "updated_at = $3 WHERE id = $1 AND stock >= $2",
                           "iii", (int64_t)r->product_id, r->quantity, r->now);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) == 0) {
        db_stmt *st =
            db_query(db, "SELECT stock FROM products WHERE id = $1", "i", (int64_t)r->product_id);
        int64_t available = db_step(st) == DB_ROW ? db_int(st, 0) : 0;
        db_done(st);
        reply_error_extra(req, ERR_OUT_OF_STOCK, "not enough stock for this quantity",
                          json_pack("{s:I}", "available", (json_int_t)available));
        return WRITE_OK; /* nothing was written; the answer is stored with the key */
    }
    rc = resource_created(req, &reservation_resource,
                          db_query(db,
                                   "INSERT INTO reservations (id, user_id, product_id, quantity, "
                                   "order_id, created_at) VALUES ($1, $2, $3, $4, $5, $6) "
                                   "RETURNING " RESERVATION_COLUMNS,
                                   "iiiizi", (int64_t)r->id, (int64_t)req->user.id,
                                   (int64_t)r->product_id, r->quantity, (int64_t)r->order_id,
                                   r->now),
                          NULL);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    /* §15: the event commits with the reservation */
    return write_result_of_db(event_record_reply(db, req, "reservation.created", NULL));
}

/* The product and the order it names, read before the key is claimed (on the HTTP thread): a
 * 404 claims no key, as nothing happened. */
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
    const reservation_input *in = req->input;
    if (!in->order.text)
        return true;
    r->order_id = in->order.id;
    found = false;
    if (r->order_id) {
        st = db_query(db, "SELECT 1 FROM orders WHERE id = $1 AND user_id = $2", "ii",
                      (int64_t)r->order_id, (int64_t)req->user.id);
        found = db_step(st) == DB_ROW;
        db_done(st);
    }
    if (!found)
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
    return found;
}

void reservations_prepare(request *req)
{
    const reservation_input *in = req->input;
    reservation *r = arena_alloc(&req->arena, sizeof *r);
    *r = (reservation){.req = req, .sku = path_sku_or_reply(req), .quantity = in->quantity};
    if (r->sku && reservation_targets_or_reply(req, r))
        req->prepared = r;
}

/* The stock taken, the row, its event and the key's answer (claimed in this same job): one
 * commit. */
step_result reservations_create(request *req, void *prepared)
{
    reservation *r = prepared;
    if (!new_row_id_or_reply(req, &r->id, &r->now))
        return STEP_DONE;
    return resource_commit_then_answer(req, reserve_stock, r, "reservation", "Idempotency-Key");
}
