#include "server/user_admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "server/command_line.h"
#include "store/store.h"

/* What `user list` shows of a user: never a key, a key's hash or its prefix. A user's test twin
 * (docs/modes.md) is no user of its own: its keys count as the user's, and it is never listed,
 * disabled or enabled by itself (disabling the user turns its test keys off too, node/auth.c). */
#define USER_COLUMNS                                                                               \
    "u.id, u.name, u.email, u.created_at, u.disabled_at, "                                         \
    "(SELECT COUNT(*) FROM api_keys k WHERE COALESCE(k.owner_id, k.user_id) = u.id "               \
    "AND k.status = 'active')"

static void write_user_json(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "usr", (uint64_t)db_int(st, 0));
    jw_member_string(w, "name", db_text(st, 1));
    jw_member_string(w, "email", db_text(st, 2));
    jw_member_time(w, "created_at", db_int(st, 3));
    jw_key(w, "disabled");
    jw_bool(w, !db_is_null(st, 4));
    if (db_is_null(st, 4)) {
        jw_key(w, "disabled_at");
        jw_null(w);
    } else {
        jw_member_time(w, "disabled_at", db_int(st, 4));
    }
    jw_member_int(w, "active_keys", db_int(st, 5));
    jw_object_end(w);
}

static void print_user_json(db_stmt *st)
{
    jsonw w;
    jw_init(&w);
    write_user_json(st, &w);
    char *text = jw_take(&w, NULL);
    puts(text);
    free(text);
}

/* A table cell of `width` columns and two of space: control characters shown as '?', so a name
 * cannot draw on the terminal, and a longer text cut with '~'. */
static void print_cell(const char *text, int width)
{
    const char *t = text ? text : "-";
    int len = (int)strlen(t);
    for (int i = 0; i < width; i++) {
        char c = i < len ? t[i] : ' ';
        if (i == width - 1 && len > width)
            c = '~';
        putchar((unsigned char)c < 0x20 || c == 0x7f ? '?' : c);
    }
    fputs("  ", stdout);
}

static void print_user_row(db_stmt *st)
{
    char id[ID_STR_MAX], created[32];
    id_format((uint64_t)db_int(st, 0), "usr", id);
    format_rfc3339_ms(db_int(st, 3), created);
    print_cell(id, 17);
    print_cell(db_text(st, 1), 20);
    print_cell(db_text(st, 2), 28);
    print_cell(created, 24);
    print_cell(db_is_null(st, 4) ? "no" : "yes", 8);
    printf("%lld\n", (long long)db_int(st, 5));
}

/* payd user list [--format jsonl|table]: every user, oldest first. */
static int user_list(int argc, char **argv)
{
    const char *format = cli_flag(argc, argv, "--format");
    bool table = format && !strcmp(format, "table");
    if (format && !table && strcmp(format, "jsonl") != 0) {
        fprintf(stderr, "usage: payd user list [--format jsonl|table] --db URL\n");
        return 2;
    }
    store *s = cli_open_store(argc, argv);
    if (!s)
        return 1;
    db_conn *db = cli_reader(s);
    int rc = 1;
    if (db) {
        db_stmt *st = db_query(db,
                               "SELECT " USER_COLUMNS " FROM users u WHERE u.mode = 'live' "
                               "ORDER BY u.created_at, u.id",
                               "");
        if (table)
            printf("%-19s%-22s%-30s%-26s%-10s%s\n", "ID", "NAME", "EMAIL", "CREATED", "DISABLED",
                   "ACTIVE KEYS");
        db_status step;
        while ((step = db_step(st)) == DB_ROW)
            table ? print_user_row(st) : print_user_json(st);
        db_done(st);
        rc = step == DB_DONE ? 0 : 1;
        if (rc)
            fprintf(stderr, "payd: could not read the users\n");
    }
    store_close(s);
    return rc;
}

typedef struct disable_job {
    uint64_t user;
    bool disable;
    int64_t now;
    bool found;
} disable_job;

/* Disabling a disabled user keeps its first time; enabling clears it. */
static write_result set_disabled(db_conn *db, void *arg)
{
    disable_job *job = arg;
    db_status rc =
        job->disable
            ? db_exec(db,
                      "UPDATE users SET disabled_at = COALESCE(disabled_at, $2) "
                      "WHERE id = $1 AND mode = 'live'",
                      "ii", (int64_t)job->user, job->now)
            : db_exec(db, "UPDATE users SET disabled_at = NULL WHERE id = $1 AND mode = 'live'",
                      "i", (int64_t)job->user);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    job->found = db_changes(db) > 0;
    return WRITE_OK;
}

/* payd user disable|enable USER_ID: prints the user as `user list` shows it. */
static int user_set_disabled(int argc, char **argv, bool disable)
{
    disable_job job = {.disable = disable, .now = now_us()};
    if (argc < 1 || id_parse(argv[0], "usr", &job.user) != 0) {
        fprintf(stderr, "usage: payd user %s usr_... --db URL\n", disable ? "disable" : "enable");
        return 2;
    }
    store *s = cli_open_store(argc, argv);
    if (!s)
        return 1;
    write_result rc = store_write(s, set_disabled, &job);
    if (rc != WRITE_OK || !job.found) {
        fprintf(stderr, "payd: %s\n",
                rc != WRITE_OK ? "could not change the user" : "no such user");
        store_close(s);
        return 1;
    }
    db_conn *db = store_reader(s);
    db_stmt *st = db ? db_query(db, "SELECT " USER_COLUMNS " FROM users u WHERE u.id = $1", "i",
                                (int64_t)job.user)
                     : NULL;
    if (st && db_step(st) == DB_ROW)
        print_user_json(st);
    if (st)
        db_done(st);
    store_close(s);
    return 0;
}

int user_admin_main(const char *sub, int argc, char **argv)
{
    if (!strcmp(sub, "list"))
        return user_list(argc, argv);
    if (!strcmp(sub, "disable"))
        return user_set_disabled(argc, argv, true);
    if (!strcmp(sub, "enable"))
        return user_set_disabled(argc, argv, false);
    return -1;
}
