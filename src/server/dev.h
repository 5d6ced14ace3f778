#ifndef PAYD_SERVER_DEV_H
#define PAYD_SERVER_DEV_H
/* `payd dev seed --account ACCOUNT_ID --count N [--db URL]`: bulk payments for benchmarks,
 * written in large transactions straight to the database (not through the API). */
int dev_seed_main(int argc, char **argv);

/* `payd dev store-bench [--db PATH] [--threads T] [--jobs N] [--max-batch B]`: the store's durable
 * write rate on its own, without HTTP: T threads each submit N/T one-row write jobs and wait for
 * each. --max-batch 1 is one transaction (one fsync) per job, the naive way. Prints JSON. */
int dev_store_bench_main(int argc, char **argv);

/* `payd dev routes --json`: the route table as JSON, with each route's declared body and query
 * as JSON Schema (http/schema.h), for the test that holds docs/openapi.json to it. */
int dev_routes_main(int argc, char **argv);

#endif
