/* The list iterator of §4: fetch a page, hand out its items one by one, follow next_cursor until
 * has_more is false. Each page is one logical call, so each page gets the full retry policy. */
#include "client/internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

struct payd_list {
    payd_client *client;
    char *path;
    payd_param *query; /* the caller's parameters, copied, without any cursor */
    size_t query_len;
    char *cursor;      /* the next page's cursor; NULL for a first page without one */
    json_t *page;      /* the current page */
    size_t next_index; /* next item of page.data to hand out */
    char *item;        /* the item last handed out, as JSON text */
    bool last_page;    /* the current page said has_more: false */
    payd_result result;
    long pages;
    long items;
};

payd_list *payd_list_open(payd_client *client, const char *path, const payd_param *query,
                          size_t query_len)
{
    if (!client || !path || (query_len && !query))
        return NULL;
    payd_list *list = calloc(1, sizeof *list);
    if (!list)
        return NULL;
    list->client = client;
    list->path = strdup(path);
    list->query = calloc(query_len + 1, sizeof *list->query); /* +1: room for the cursor */
    if (!list->path || !list->query)
        goto fail;
    for (size_t i = 0; i < query_len; i++) {
        if (!query[i].name || !query[i].value)
            continue;
        if (strcmp(query[i].name, "cursor") == 0) {
            free(list->cursor);
            if (!(list->cursor = strdup(query[i].value)))
                goto fail;
            continue;
        }
        payd_param *copy = &list->query[list->query_len++];
        copy->name = strdup(query[i].name);
        copy->value = strdup(query[i].value);
        if (!copy->name || !copy->value)
            goto fail;
    }
    return list;
fail:
    payd_list_close(list);
    return NULL;
}

void payd_list_close(payd_list *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->query_len; i++) {
        free((char *)list->query[i].name);
        free((char *)list->query[i].value);
    }
    free(list->query);
    free(list->path);
    free(list->cursor);
    free(list->item);
    json_decref(list->page);
    payd_result_clear(&list->result);
    free(list);
}

static payd_status protocol_error(payd_list *list, const char *message)
{
    list->result.status = PAYD_ERR_PROTOCOL;
    copy_string(list->result.message, sizeof list->result.message, message);
    return PAYD_ERR_PROTOCOL;
}

/* Fetches the page at list->cursor and makes it current. */
static payd_status fetch_page(payd_list *list)
{
    size_t n = list->query_len;
    if (list->cursor)
        list->query[n++] = (payd_param){"cursor", list->cursor};
    payd_request request = {
        .method = "GET", .path = list->path, .query = list->query, .query_len = n};
    payd_status status = payd_call(list->client, &request, &list->result);
    if (status != PAYD_OK)
        return status; /* the cursor stays, so calling next again retries this page */

    json_t *page =
        json_loadb(list->result.body ? list->result.body : "", list->result.body_len, 0, NULL);
    json_t *has_more = json_object_get(page, "has_more");
    json_t *next_cursor = json_object_get(page, "next_cursor");
    if (!json_is_array(json_object_get(page, "data")) || !json_is_boolean(has_more)) {
        json_decref(page);
        return protocol_error(list, "a list page needs `data` and `has_more`");
    }
    if (json_is_true(has_more)) {
        const char *cursor = json_string_value(next_cursor);
        if (!cursor || !*cursor) {
            json_decref(page);
            return protocol_error(list, "has_more is true but next_cursor is missing");
        }
        if (list->cursor && strcmp(cursor, list->cursor) == 0) {
            json_decref(page);
            return protocol_error(list, "next_cursor repeats the current cursor");
        }
        char *copy = strdup(cursor);
        if (!copy) {
            json_decref(page);
            return PAYD_ERR_NOMEM;
        }
        free(list->cursor);
        list->cursor = copy;
    }
    list->last_page = json_is_false(has_more);
    json_decref(list->page);
    list->page = page;
    list->next_index = 0;
    list->pages++;
    return PAYD_OK;
}

payd_status payd_list_next(payd_list *list, const char **item_json)
{
    *item_json = NULL;
    free(list->item);
    list->item = NULL;
    for (;;) {
        json_t *data = json_object_get(list->page, "data");
        if (list->page && list->next_index < json_array_size(data)) {
            list->item =
                json_dumps(json_array_get(data, list->next_index), JSON_COMPACT | JSON_ENCODE_ANY);
            if (!list->item)
                return PAYD_ERR_NOMEM;
            list->next_index++;
            list->items++;
            *item_json = list->item;
            return PAYD_OK;
        }
        if (list->page && list->last_page)
            return PAYD_OK; /* exhausted */
        payd_status status = fetch_page(list);
        if (status != PAYD_OK)
            return status;
    }
}

const payd_result *payd_list_result(const payd_list *list)
{
    return &list->result;
}

long payd_list_pages(const payd_list *list)
{
    return list->pages;
}

long payd_list_items(const payd_list *list)
{
    return list->items;
}
