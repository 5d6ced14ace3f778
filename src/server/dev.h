#ifndef PAYD_SERVER_DEV_H
#define PAYD_SERVER_DEV_H
/* `payd dev seed --account ACCOUNT_ID --count N [--db URL]`: bulk payments for benchmarks,
 * written in large transactions straight to the database (not through the API). */
int dev_seed_main(int argc, char **argv);

#endif
