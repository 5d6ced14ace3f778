#ifndef PAYD_SERVER_ADMIN_COMMANDS_H
#define PAYD_SERVER_ADMIN_COMMANDS_H
/* payd's commands that work straight on the database (docs/api.md §13):
 *
 *   payd user create NAME [--email E] [--rate-limit R] --db URL   a live and a test key
 *   payd account create --user USER_ID --currency C [--name N] [--mode test|live] --db URL
 *   payd key create|list|revoke ...                                 API keys of a user
 *   payd id decode ID                                               what a Snowflake id holds
 *
 * Each takes the arguments after its name and returns the exit code. */
int cmd_user_create(int argc, char **argv);
int cmd_account_create(int argc, char **argv);
int cmd_key(int argc, char **argv);
int cmd_id_decode(int argc, char **argv);

#endif
