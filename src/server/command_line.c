/* What payd's commands share (command_line.h). */
#include "server/command_line.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "node/lease.h"

const char *cli_flag(int argc, char **argv, const char *name)
{
    for (int i = 0; i < argc - 1; i++)
        if (!strcmp(argv[i], name))
            return argv[i + 1];
    return NULL;
}

const char *cli_db_url(int argc, char **argv)
{
    const char *url = cli_flag(argc, argv, "--db");
    if (!url)
        url = getenv("PAYD_DB");
    return url ? url : "./payd.db";
}

store *cli_open_store(int argc, char **argv)
{
    char err[512];
    store_options opt = {.url = cli_db_url(argc, argv), .max_batch = 256, .writer_conns = 2};
    store *s = store_open(&opt, err, sizeof err);
    if (!s)
        fprintf(stderr, "payd: %s\n", err);
    return s;
}

db_conn *cli_reader(store *s)
{
    db_conn *db = store_reader(s);
    if (!db)
        fprintf(stderr, "payd: the database is unavailable\n");
    return db;
}

/* A row as the API shows it (its resource's writer), as text to free. */
char *cli_row_text(void (*write_row)(db_stmt *st, jsonw *w), db_stmt *st)
{
    jsonw w;
    jw_init(&w);
    write_row(st, &w);
    return jw_take(&w, NULL);
}

/* The same, printed on a line of its own. */
void cli_print_row(void (*write_row)(db_stmt *st, jsonw *w), db_stmt *st)
{
    char *text = cli_row_text(write_row, st);
    puts(text);
    free(text);
}

void cli_print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    puts(s);
    free(s);
    json_decref(j);
}

/* The command line leases a node id for its run, like a server, so its ids never meet one a
 * server (or another command running at the same moment) issues. */
static id_generator cli_ids;
static node_lease *cli_lease;

static bool cli_lease_ids(store *s)
{
    char err[512];
    id_generator_init(&cli_ids, 0, NULL, NULL);
    cli_lease = lease_acquire(s, NODE_AUTO, &cli_ids, LEASE_COMMAND, err, sizeof err);
    if (!cli_lease)
        fprintf(stderr, "payd: %s\n", err);
    return cli_lease != NULL;
}

/* The store, with a node id leased for the ids this command makes; NULL (said why) when either
 * fails. cli_close gives both back. */
store *cli_open_store_for_ids(int argc, char **argv)
{
    store *s = cli_open_store(argc, argv);
    if (s && !cli_lease_ids(s)) {
        store_close(s);
        return NULL;
    }
    return s;
}

void cli_close(store *s)
{
    lease_release(cli_lease);
    cli_lease = NULL;
    store_close(s);
}

uint64_t cli_id(void)
{
    uint64_t id = 0;
    id_next(&cli_ids, &id);
    return id;
}
