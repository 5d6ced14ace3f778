/* What payctl writes: JSON, CSV rows and the export progress line. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void print_json(FILE *out, const char *text, size_t len, bool pretty)
{
    json_t *value = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    char *formatted =
        value ? json_dumps(value, JSON_ENCODE_ANY | (pretty ? JSON_INDENT(2) : JSON_COMPACT))
              : NULL;
    if (formatted)
        fprintf(out, "%s\n", formatted);
    else
        fprintf(out, "%.*s\n", (int)len, text);
    free(formatted);
    json_decref(value);
}

/* ---- CSV (RFC 4180) ---- */

/* The columns of a payment (docs/api.md §5), in this order. metadata is written as JSON text. */
static const char *const payment_columns[] = {
    "id",
    "created_at",
    "account_id",
    "amount",
    "currency",
    "status",
    "source",
    "order_id",
    "description",
    "refunded_amount",
    "processor_charge_id",
    "capture_method", /* §17: a hold's course */
    "amount_captured",
    "amount_released",
    "canceled_at",
    "metadata",
};
#define COLUMN_COUNT (sizeof payment_columns / sizeof payment_columns[0])

/* A field is quoted when it holds a separator, a quote or a line break; quotes are doubled. */
static int write_csv_field(FILE *out, const char *text)
{
    if (strpbrk(text, ",\"\r\n") == NULL)
        return fputs(text, out) < 0 ? -1 : 0;
    if (fputc('"', out) == EOF)
        return -1;
    for (const char *p = text; *p; p++)
        if ((*p == '"' && fputc('"', out) == EOF) || fputc(*p, out) == EOF)
            return -1;
    return fputc('"', out) == EOF ? -1 : 0;
}

int write_csv_header(FILE *out)
{
    for (size_t i = 0; i < COLUMN_COUNT; i++)
        if ((i && fputc(',', out) == EOF) || write_csv_field(out, payment_columns[i]) != 0)
            return -1;
    return fputs("\r\n", out) < 0 ? -1 : 0;
}

int write_csv_row(FILE *out, const char *item_json)
{
    json_t *item = json_loads(item_json, 0, NULL);
    if (!json_is_object(item)) {
        json_decref(item);
        return -1;
    }
    int status = 0;
    for (size_t i = 0; i < COLUMN_COUNT && status == 0; i++) {
        json_t *value = json_object_get(item, payment_columns[i]);
        char *text = NULL;
        if (json_is_string(value))
            text = strdup(json_string_value(value));
        else if (value && !json_is_null(value)) /* numbers, booleans, metadata */
            text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        if ((i && fputc(',', out) == EOF) || write_csv_field(out, text ? text : "") != 0)
            status = -1;
        free(text);
    }
    json_decref(item);
    if (status == 0 && fputs("\r\n", out) < 0)
        status = -1;
    return status;
}

/* ---- progress ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Only a terminal gets the line: in a pipe or a log file it would be noise. */
void progress_start(progress *p)
{
    p->enabled = isatty(STDERR_FILENO);
    p->started_ms = now_ms();
    p->shown_pages = 0;
}

/* Redrawn once per page: often enough to watch, rare enough to cost nothing. */
void progress_update(progress *p, long items, long pages)
{
    if (!p->enabled || pages == p->shown_pages)
        return;
    p->shown_pages = pages;
    double seconds = (double)(now_ms() - p->started_ms) / 1000.0;
    double rate = seconds > 0.001 ? (double)items / seconds : 0.0;
    /* \r returns to the line's start, \033[K erases what a longer earlier line left. */
    fprintf(stderr, "\r\033[Kexporting: %ld items, %ld pages, %.0f items/s", items, pages, rate);
    fflush(stderr);
}

void progress_clear(progress *p)
{
    if (!p->enabled || p->shown_pages == 0)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}

void progress_summary(progress *p, long items, long pages, const char *target, bool complete)
{
    double seconds = (double)(now_ms() - p->started_ms) / 1000.0;
    fprintf(stderr, "payctl: %s %ld item%s (%ld page%s) in %.1f s%s%s\n",
            complete ? "exported" : "stopped after", items, items == 1 ? "" : "s", pages,
            pages == 1 ? "" : "s", seconds, target ? " to " : "", target ? target : "");
}
