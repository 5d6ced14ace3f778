#ifndef PAYD_SERVER_COMMAND_LINE_H
#define PAYD_SERVER_COMMAND_LINE_H
/* What payd's commands share (main.c, admin_commands.c): their flags, the database they open,
 * what they print, and the node id a command leases for the ids it makes. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/jsonw.h"
#include "store/store.h"

/* The value after `name` on the command line, or NULL. */
const char *cli_flag(int argc, char **argv, const char *name);
/* --db, else $PAYD_DB, else ./payd.db. */
const char *cli_db_url(int argc, char **argv);
/* The store of --db; NULL when it cannot be opened (said why on stderr). */
store *cli_open_store(int argc, char **argv);
/* A reader of s; NULL when the database does not answer (said on stderr). */
db_conn *cli_reader(store *s);
/* A row as the API shows it (its resource's writer), as text to free. */
char *cli_row_text(void (*write_row)(db_stmt *st, jsonw *w), db_stmt *st);
/* The same, printed on a line of its own. */
void cli_print_row(void (*write_row)(db_stmt *st, jsonw *w), db_stmt *st);
/* j on one line; takes j. */
void cli_print_json(json_t *j);

/* The store, with a node id leased for the ids this command makes; NULL (said why) when either
 * fails. cli_close gives both back; cli_id makes the next id. */
store *cli_open_store_for_ids(int argc, char **argv);
void cli_close(store *s);
uint64_t cli_id(void);

#endif
