#ifndef PAYD_SERVER_USER_ADMIN_H
#define PAYD_SERVER_USER_ADMIN_H
/* The operator's user commands beside `payd user create` (main.c), straight on the database:
 *
 *   payd user list [--format jsonl|table] --db URL   id, name, email, created, disabled and the
 *                                                    count of active keys; never a key
 *   payd user disable USER_ID --db URL               every key of the user answers 401, on
 *                                                    every node within --auth-cache-ttl
 *   payd user enable USER_ID --db URL                its active keys work again
 *
 * Returns the exit code, or -1 when `sub` is none of these. */
int user_admin_main(const char *sub, int argc, char **argv);

#endif
