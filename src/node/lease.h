#ifndef PAYD_NODE_LEASE_H
#define PAYD_NODE_LEASE_H
/* Node identity (docs/concurrency.md).
 *
 * A Snowflake node id is leased in the database (table node_leases, on both backends): a row
 * per id in use, naming its holder and when the lease ends. `--node-id auto` takes a free (or
 * expired) id; an explicit id is taken only if no live holder has it. A renewal thread moves
 * the lease forward every LEASE_RENEW_MS; the id generator issues ids only until
 * LEASE_MARGIN_MS before the lease could end, so a node that cannot renew stops issuing ids
 * before another node could take its id. Command-line commands lease an id for their run.
 *
 * SQLite: one `payd serve` owns the database file, by an exclusive lock on `<file>.lock` held
 * for the process's life; command-line commands do not take it. */
#include <stdbool.h>
#include <stddef.h>

#include "core/ids.h"
#include "store/store.h"

#define LEASE_TTL_MS    15000
#define LEASE_RENEW_MS  3000
#define LEASE_MARGIN_MS 5000 /* also covers clock skew between nodes up to this much */
#define NODE_AUTO       (-1)
/* The longest a start waits for a clock behind its node id's high-water mark (the newest ms an
 * id was stamped with, kept in node_id_marks) to pass it; further behind, it refuses to start. */
#define CLOCK_WAIT_MAX_MS LEASE_TTL_MS

typedef struct node_lease node_lease;

/* Takes a node id (requested: 0..1023 or NODE_AUTO) and points gen at it, bounded by the lease.
 * NULL with a message in err when the id is held by a live node or none is free. When the
 * database cannot answer: NULL, or for a serve on PostgreSQL a lease not yet held, which the
 * renewal thread acquires once the database is back (gen issues no id until then). A serve on
 * SQLite, which holds the file's serve lock (sqlite_serve_lock, taken first), takes over the
 * lease of a serve that crashed. */
typedef enum lease_role { LEASE_SERVE, LEASE_COMMAND } lease_role;
node_lease *lease_acquire(store *s, int requested, id_generator *gen, lease_role role, char *err,
                          size_t errlen);
int lease_node_id(const node_lease *l); /* -1 while not held */
bool lease_held(const node_lease *l);
/* Whether every live node id lease is held by a release that reads an idempotent answer stored
 * as a reference to its event: seen when the lease is taken and at each renewal. */
bool lease_fleet_reads_event_answers(node_lease *l);
/* Whether every live lease is held by a release that derives a key's processor key by the
 * scheme stored with the key (idempotency_keys.processor_key_scheme); seen likewise. */
bool lease_fleet_knows_processor_key_schemes(node_lease *l);
/* Renews in the background until lease_release; a lease lost to another holder ends the
 * process (exit 1), since every id issued after would be another node's. */
void lease_start_renewal(node_lease *l);
/* Stops renewing and frees the id for others. */
void lease_release(node_lease *l);

/* SQLite serve: takes the exclusive lock on `<file>.lock`. -1 with err when another serve holds
 * it. The lock lives until the process exits. 0 and no lock for PostgreSQL URLs. */
int sqlite_serve_lock(const char *url, char *err, size_t errlen);

#endif
