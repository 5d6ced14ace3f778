/* Versioned schema migrations, one SQL text per version, shared by SQLite and PostgreSQL; a
 * version whose PostgreSQL text differs also has an entry in postgres_migrations (below), which
 * PostgreSQL runs instead (17, the month partitions: SQLite's text is empty). Renumbering such a
 * version means renumbering both.
 * `ID_PK` becomes INTEGER PRIMARY KEY on SQLite (the rowid itself, no second index) and
 * BIGINT PRIMARY KEY on PostgreSQL. Times are BIGINT µs since the Unix epoch; money is BIGINT
 * minor units. Every list has a composite index ending in (created_at, id), so each page is one
 * index range scan. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/timefmt.h"
#include "store/store.h"

static const char *const migrations[] = {
    /* 1: the whole first schema */
    "CREATE TABLE users ("
    "  id ID_PK, name TEXT NOT NULL, email TEXT, api_key_hash TEXT NOT NULL UNIQUE,"
    "  rate_limit TEXT, version BIGINT NOT NULL DEFAULT 1,"
    "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"

    "CREATE TABLE accounts ("
    "  id ID_PK, user_id BIGINT NOT NULL, currency TEXT NOT NULL, name TEXT,"
    "  balance BIGINT NOT NULL DEFAULT 0 CHECK (balance >= 0),"
    "  version BIGINT NOT NULL DEFAULT 1, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"
    "CREATE INDEX accounts_page ON accounts (user_id, created_at, id);"

    "CREATE TABLE payments ("
    "  id ID_PK, user_id BIGINT NOT NULL, account_id BIGINT NOT NULL, amount BIGINT NOT NULL,"
    "  currency TEXT NOT NULL, status TEXT NOT NULL, source TEXT NOT NULL, order_id BIGINT,"
    "  description TEXT, metadata TEXT, refunded_amount BIGINT NOT NULL DEFAULT 0,"
    "  processor_charge_id TEXT, decline_code TEXT, created_at BIGINT NOT NULL);"
    "CREATE INDEX payments_page ON payments (account_id, created_at, id);"
    "CREATE INDEX payments_status_page ON payments (account_id, status, created_at, id);"
    /* the business guard: at most one non-failed payment per order, whatever the keys */
    "CREATE UNIQUE INDEX payments_one_per_order ON payments (order_id)"
    "  WHERE order_id IS NOT NULL AND status <> 'failed';"

    "CREATE TABLE refunds ("
    "  id ID_PK, user_id BIGINT NOT NULL, payment_id BIGINT NOT NULL, amount BIGINT NOT NULL,"
    "  reason TEXT, status TEXT NOT NULL, processor_refund_id TEXT, created_at BIGINT NOT NULL);"
    "CREATE INDEX refunds_page ON refunds (payment_id, created_at, id);"

    "CREATE TABLE orders ("
    "  id ID_PK, user_id BIGINT NOT NULL, external_order_id TEXT NOT NULL,"
    "  amount BIGINT NOT NULL, currency TEXT NOT NULL, description TEXT, status TEXT NOT NULL,"
    "  payment_id BIGINT, version BIGINT NOT NULL DEFAULT 1,"
    "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"
    "CREATE UNIQUE INDEX orders_external_id ON orders (user_id, external_order_id);"
    "CREATE INDEX orders_page ON orders (user_id, created_at, id);"
    "CREATE INDEX orders_status_page ON orders (user_id, status, created_at, id);"

    "CREATE TABLE transfers ("
    "  id ID_PK, user_id BIGINT NOT NULL, biz_seq TEXT NOT NULL, fingerprint TEXT NOT NULL,"
    "  from_account BIGINT NOT NULL, to_account BIGINT NOT NULL, amount BIGINT NOT NULL,"
    "  currency TEXT NOT NULL, description TEXT, status TEXT NOT NULL,"
    "  response_status INTEGER NOT NULL, response_body TEXT NOT NULL, created_at BIGINT NOT NULL);"
    /* the flow table's guard: the index decides, never a check-then-insert */
    "CREATE UNIQUE INDEX transfers_biz_seq ON transfers (user_id, biz_seq);"
    /* one row per account a transfer touches, so an account's transfers (both directions) are
     * one range scan */
    "CREATE TABLE transfer_legs ("
    "  account_id BIGINT NOT NULL, created_at BIGINT NOT NULL, transfer_id BIGINT NOT NULL,"
    "  PRIMARY KEY (account_id, created_at, transfer_id));"

    "CREATE TABLE products ("
    "  id ID_PK, user_id BIGINT NOT NULL, sku TEXT NOT NULL, name TEXT NOT NULL,"
    "  stock BIGINT NOT NULL CHECK (stock >= 0), version BIGINT NOT NULL DEFAULT 1,"
    "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"
    "CREATE UNIQUE INDEX products_sku ON products (user_id, sku);"
    "CREATE TABLE reservations ("
    "  id ID_PK, user_id BIGINT NOT NULL, product_id BIGINT NOT NULL, quantity BIGINT NOT NULL,"
    "  order_id BIGINT, created_at BIGINT NOT NULL);"

    /* Idempotency keys: the claim is the primary key. locked_at is 0 when unlocked (in doubt). */
    "CREATE TABLE idempotency_keys ("
    "  user_id BIGINT NOT NULL, idem_key TEXT NOT NULL, fingerprint TEXT NOT NULL,"
    "  method TEXT NOT NULL, path TEXT NOT NULL, request_body TEXT,"
    "  state TEXT NOT NULL, claimed_at BIGINT NOT NULL, locked_at BIGINT NOT NULL,"
    "  response_status INTEGER, response_location TEXT, response_body TEXT,"
    "  PRIMARY KEY (user_id, idem_key));"
    "CREATE INDEX idempotency_keys_open ON idempotency_keys (state, locked_at);"
    "CREATE INDEX idempotency_keys_age ON idempotency_keys (claimed_at);"

    /* The builtin processor simulator's own dedupe tables, keyed by the processor key. */
    "CREATE TABLE processor_charges ("
    "  processor_key TEXT PRIMARY KEY, charge_id TEXT NOT NULL, status TEXT NOT NULL,"
    "  decline_code TEXT, amount BIGINT NOT NULL, currency TEXT NOT NULL, source TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL);"
    "CREATE TABLE processor_refunds ("
    "  processor_key TEXT PRIMARY KEY, refund_id TEXT NOT NULL, charge_id TEXT NOT NULL,"
    "  amount BIGINT NOT NULL, created_at BIGINT NOT NULL);"

    "CREATE TABLE secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL);",

    /* 2: a refund row remembers the processor key of the claim that made it, so a retry or the
     * recoverer finds the refund it reserved (status 'pending') and finishes it instead of
     * reserving again; unique, so one claim can never hold two refunds */
    "ALTER TABLE refunds ADD COLUMN processor_key TEXT;"
    "CREATE UNIQUE INDEX refunds_processor_key ON refunds (processor_key);",

    /* 3: several API keys per user (§13), so a key can be rotated without downtime and revoked.
     * Only the SHA-256 of a key is stored, with its first characters (prefix) to tell keys
     * apart. Each user's existing key moves here under the user's own id (unique: one such key
     * per user); its prefix was never stored, so it shows as just "sk_". users.api_key_hash
     * stays (SQLite cannot drop a UNIQUE column) and holds the user's first key's hash; nothing
     * reads it any more. */
    "CREATE TABLE api_keys ("
    "  id ID_PK, user_id BIGINT NOT NULL, name TEXT, key_hash TEXT NOT NULL UNIQUE,"
    "  prefix TEXT NOT NULL, status TEXT NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT);"
    "CREATE INDEX api_keys_page ON api_keys (user_id, created_at, id);"
    "CREATE INDEX api_keys_status_page ON api_keys (user_id, status, created_at, id);"
    "INSERT INTO api_keys (id, user_id, name, key_hash, prefix, status, created_at)"
    "  SELECT id, id, NULL, api_key_hash, 'sk_', 'active', created_at FROM users;",
    /* 4: the payment volume rollup behind /v1/accounts/{id}/payments/stats (api/stats.c): per
     * account and UTC hour (µs), the charged payments created in it, their amount and what was
     * refunded from them, written in the payment's and the refund's own transactions; filled
     * here from the payments that already exist */
    "CREATE TABLE payment_volume ("
    "  account_id BIGINT NOT NULL, bucket_start BIGINT NOT NULL,"
    "  succeeded_count BIGINT NOT NULL, succeeded_amount BIGINT NOT NULL,"
    "  refunded_amount BIGINT NOT NULL, PRIMARY KEY (account_id, bucket_start));"
    "INSERT INTO payment_volume (account_id, bucket_start, succeeded_count, succeeded_amount,"
    "  refunded_amount) SELECT account_id, created_at / 3600000000 * 3600000000, COUNT(*),"
    "  SUM(amount), SUM(refunded_amount) FROM payments WHERE status <> 'failed' GROUP BY 1, 2;",
    /* 5: fencing and node leases (docs/idempotency.md, docs/concurrency.md).
     * fence: the token of the key's current holder, grown by every claim and takeover; every
     * later write for the key names it. generation: fixed for one logical operation (its
     * first claim's time), part of the processor key. A released key keeps its row (state
     * 'released') so a re-claim keeps the generation. */
    "ALTER TABLE idempotency_keys ADD COLUMN fence BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE idempotency_keys ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;"
    "UPDATE idempotency_keys SET fence = claimed_at, generation = claimed_at;"
    /* keys open across the upgrade keep the processor key they were given before it (a
     * negative generation says so), so their resumption finds the charge they made */
    "UPDATE idempotency_keys SET generation = -claimed_at WHERE state IN ('started', 'in_doubt');"
    /* charges their own request could not record, waiting for the recoverer to void them by
     * their processor key unless the key's current holder records the same charge */
    "CREATE TABLE charge_voids ("
    "  processor_key TEXT PRIMARY KEY, user_id BIGINT NOT NULL, idem_key TEXT NOT NULL,"
    "  fingerprint TEXT NOT NULL, generation BIGINT NOT NULL, account_id BIGINT NOT NULL,"
    "  charge_id TEXT NOT NULL,"
    "  amount BIGINT NOT NULL, created_at BIGINT NOT NULL);"
    /* snowflake node ids leased by live processes (PostgreSQL), renewed by a heartbeat */
    "CREATE TABLE node_leases ("
    "  node_id INTEGER PRIMARY KEY, holder TEXT NOT NULL, acquired_at BIGINT NOT NULL,"
    "  expires_at BIGINT NOT NULL);",
    /* 6: events and webhooks (§15), a transactional outbox. An event is written by the job that
     * makes its change, together with one pending delivery per matching endpoint; delivery
     * workers claim due deliveries with a lease (lease_id fences a worker whose lease expired).
     * events holds ",type,…," or ",*,". Retention
     * deletes by id range (Snowflake ids carry their time), so no index on age is needed. */
    "CREATE TABLE events ("
    "  id ID_PK, user_id BIGINT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,"
    "  created_at BIGINT NOT NULL);"
    "CREATE INDEX events_page ON events (user_id, created_at, id);"
    "CREATE INDEX events_type_page ON events (user_id, type, created_at, id);"
    "CREATE TABLE webhook_endpoints ("
    "  id ID_PK, user_id BIGINT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL,"
    "  description TEXT, secret TEXT NOT NULL, disabled INTEGER NOT NULL DEFAULT 0,"
    "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL);"
    "CREATE INDEX webhook_endpoints_page ON webhook_endpoints (user_id, created_at, id);"
    "CREATE TABLE webhook_deliveries ("
    "  endpoint_id BIGINT NOT NULL, event_id BIGINT NOT NULL, status TEXT NOT NULL,"
    "  attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at BIGINT NOT NULL,"
    "  lease_until BIGINT NOT NULL DEFAULT 0, lease_id BIGINT NOT NULL DEFAULT 0,"
    "  created_at BIGINT NOT NULL, PRIMARY KEY (endpoint_id, event_id));"
    "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);"
    "CREATE TABLE webhook_attempts ("
    "  id ID_PK, endpoint_id BIGINT NOT NULL, event_id BIGINT NOT NULL, attempt INTEGER NOT NULL,"
    "  response_status INTEGER, latency_ms BIGINT NOT NULL, error TEXT, next_attempt_at BIGINT,"
    "  outcome TEXT NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE INDEX webhook_attempts_page ON webhook_attempts (endpoint_id, created_at, id);",
    /* 7: a stored answer that is word for word an event's data (a payment's 201) names that
     * event instead of holding a second copy; a replay reads the body from it */
    "ALTER TABLE idempotency_keys ADD COLUMN response_event BIGINT;"
    /* …which a node of an older release would replay empty: leases say who reads them */
    "ALTER TABLE node_leases ADD COLUMN answers_by_event INTEGER NOT NULL DEFAULT 0;",
    /* 8: how a key's processor key is derived (idem.c, derive_processor_key): 1, the sha256 of
     * what names the operation; 2, the same behind the generation's time, so that the
     * processor's index of keys grows at its end instead of at a random page per charge. A
     * key keeps its scheme for the life of its operation; rows written before this migration,
     * or by a node of an older release, are 1. A lease says its holder knows the schemes. */
    "ALTER TABLE idempotency_keys ADD COLUMN processor_key_scheme INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE node_leases ADD COLUMN processor_key_schemes INTEGER NOT NULL DEFAULT 0;",
    /* 9: a webhook endpoint's secret rotation (api/webhook_rotation.c): the secret it replaced,
     * sealed like the current one, signs beside it until previous_secret_expires_at */
    "ALTER TABLE webhook_endpoints ADD COLUMN previous_secret TEXT;"
    "ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at BIGINT;",
    /* 10: an endpoint's streak of failed attempts (docs/webhooks.md, "Disabled after days of
     * failures"): the time of the first failed attempt since its last 2xx, NULL when its latest
     * attempt succeeded or it was enabled again */
    "ALTER TABLE webhook_endpoints ADD COLUMN failing_since BIGINT;",
    /* 11: `payd user disable` (server/user_admin.c): when the user was disabled, NULL while
     * enabled; a disabled user's keys authenticate nothing (node/auth.c) */
    "ALTER TABLE users ADD COLUMN disabled_at BIGINT;",
    /* 12: the double-entry ledger (docs/ledger.md). accounts.balance is the account's
     * `available` book; `pending` is its second book (authorized, not yet captured). An entry's
     * lines sum to zero per currency; a line is a signed amount on one ledger account: a payd
     * account's book (account_id set) or the currency's system account `processor` or `holds`
     * (account_id NULL; their balances are the sums of their lines, kept in no row, which
     * every payment of the currency would otherwise lock). A line on a payd account is a
     * balance transaction (txn_). type and source_id are the entry's, copied so the list's
     * filters need no join. The indexes serve the two lists only: per user, and per account. */
    "ALTER TABLE accounts ADD COLUMN pending BIGINT NOT NULL DEFAULT 0 CHECK (pending >= 0);"
    "CREATE TABLE journal_entries ("
    "  id ID_PK, user_id BIGINT NOT NULL, type TEXT NOT NULL, source_id BIGINT NOT NULL,"
    "  currency TEXT NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE TABLE journal_lines ("
    "  id ID_PK, entry_id BIGINT NOT NULL, user_id BIGINT NOT NULL, account_id BIGINT,"
    "  book TEXT NOT NULL, currency TEXT NOT NULL, amount BIGINT NOT NULL, type TEXT NOT NULL,"
    "  source_id BIGINT NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE INDEX journal_lines_page ON journal_lines (user_id, created_at, id)"
    "  WHERE account_id IS NOT NULL;"
    "CREATE INDEX journal_lines_account_page ON journal_lines (account_id, created_at, id)"
    "  WHERE account_id IS NOT NULL;"
    /* The backfill: one entry per charged payment, refund (pending ones too: their money left
     * the account when they were reserved) and succeeded transfer, under its source's own id
     * and time, so the processor's records match entries one for one. Line ids are small
     * numbers that no Snowflake id of a later line can equal. */
    "INSERT INTO journal_entries (id, user_id, type, source_id, currency, created_at)"
    "  SELECT id, user_id, 'charge', id, currency, created_at FROM payments"
    "  WHERE status <> 'failed';"
    "INSERT INTO journal_entries (id, user_id, type, source_id, currency, created_at)"
    "  SELECT r.id, r.user_id, 'refund', r.id, p.currency, r.created_at"
    "  FROM refunds r JOIN payments p ON p.id = r.payment_id;"
    "INSERT INTO journal_entries (id, user_id, type, source_id, currency, created_at)"
    "  SELECT id, user_id, 'transfer', id, currency, created_at FROM transfers"
    "  WHERE status = 'succeeded';"
    "INSERT INTO journal_lines (id, entry_id, user_id, account_id, book, currency, amount, type,"
    "  source_id, created_at)"
    "  SELECT ROW_NUMBER() OVER (ORDER BY e.id, l.k), e.id, e.user_id, l.account_id, l.book,"
    "  e.currency, l.amount, e.type, e.source_id, e.created_at FROM journal_entries e JOIN ("
    "    SELECT id AS entry_id, 0 AS k, account_id, 'available' AS book, amount FROM payments"
    "    WHERE status <> 'failed'"
    "    UNION ALL SELECT id, 1, NULL, 'processor', -amount FROM payments"
    "    WHERE status <> 'failed'"
    "    UNION ALL SELECT r.id, 0, p.account_id, 'available', -r.amount"
    "    FROM refunds r JOIN payments p ON p.id = r.payment_id"
    "    UNION ALL SELECT id, 1, NULL, 'processor', amount FROM refunds"
    "    UNION ALL SELECT id, 0, from_account, 'available', -amount FROM transfers"
    "    WHERE status = 'succeeded'"
    "    UNION ALL SELECT id, 1, to_account, 'available', amount FROM transfers"
    "    WHERE status = 'succeeded') l ON l.entry_id = e.id;",
    /* 13: each node id's high-water mark (node/lease.c, docs/concurrency.md): no id issued under
     * it carries a later millisecond than last_ms, so a process that takes the id again, with
     * its clock set back, never issues an id older than one issued before it */
    "CREATE TABLE node_id_marks (node_id INTEGER PRIMARY KEY, last_ms BIGINT NOT NULL);",
    /* 14: the recoverer's index holds the open keys only (docs/operations.md, "Retention"). The
     * index on (state, locked_at) held every key, and the sweeper's query filtered every
     * finished key through it (a scan of the whole table inside the writer's transaction, every
     * pass, growing with the table) instead of walking idempotency_keys_age; a settled key now
     * leaves this index instead of moving inside it. */
    "DROP INDEX idempotency_keys_open;"
    "CREATE INDEX idempotency_keys_open ON idempotency_keys (locked_at)"
    "  WHERE state IN ('started', 'in_doubt');",
    /* 15: authorize now, capture later (docs/api.md §17, docs/payments.md). A payment's hold:
     * amount_captured + amount_released + amount_capturable = amount at every commit; a
     * payment charged before this migration was captured in full. capture_count bounds the
     * captures (50). A canceled payment no longer holds its order, so the business guard
     * leaves it out. payment_captures: one row per capture or release (a cancel, a final
     * capture's rest, an expiry), under the processor key that made it at the processor,
     * 'pending' until the processor confirms. The builtin processor's side: a charge's hold
     * (captured, released) and one record per capture or release, keyed like its charges. */
    "ALTER TABLE payments ADD COLUMN capture_method TEXT NOT NULL DEFAULT 'automatic';"
    "ALTER TABLE payments ADD COLUMN amount_capturable BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE payments ADD COLUMN amount_captured BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE payments ADD COLUMN amount_released BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE payments ADD COLUMN capture_count INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE payments ADD COLUMN capture_before BIGINT;"
    "ALTER TABLE payments ADD COLUMN canceled_at BIGINT;"
    "ALTER TABLE payments ADD COLUMN cancellation_reason TEXT;"
    "UPDATE payments SET amount_captured = amount WHERE status <> 'failed';"
    "CREATE INDEX payments_capture_due ON payments (capture_before)"
    "  WHERE status = 'requires_capture';"
    "DROP INDEX payments_one_per_order;"
    "CREATE UNIQUE INDEX payments_one_per_order ON payments (order_id)"
    "  WHERE order_id IS NOT NULL AND status NOT IN ('failed', 'canceled');"
    "CREATE TABLE payment_captures ("
    "  id ID_PK, user_id BIGINT NOT NULL, payment_id BIGINT NOT NULL, kind TEXT NOT NULL,"
    "  amount BIGINT NOT NULL, released BIGINT NOT NULL, status TEXT NOT NULL,"
    "  processor_key TEXT NOT NULL UNIQUE, processor_id TEXT, created_at BIGINT NOT NULL);"
    "CREATE INDEX payment_captures_payment ON payment_captures (payment_id, created_at, id);"
    "ALTER TABLE processor_charges ADD COLUMN captured BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE processor_charges ADD COLUMN released BIGINT NOT NULL DEFAULT 0;"
    "UPDATE processor_charges SET captured = amount WHERE status = 'succeeded';"
    "CREATE TABLE processor_captures ("
    "  processor_key TEXT PRIMARY KEY, capture_id TEXT NOT NULL, charge_id TEXT NOT NULL,"
    "  amount BIGINT NOT NULL, released BIGINT NOT NULL, created_at BIGINT NOT NULL);"
    "CREATE INDEX processor_captures_charge ON processor_captures (charge_id);",
    /* 16: test mode and live mode (docs/modes.md). A user's test mode is a second users row, its
     * test twin (mode 'test', live_user_id naming the live user; at most one per user), so every
     * row a test key makes is scoped by the twin's id exactly as a live key's rows are by the
     * user's. Existing users, and their keys, are live. A key shows its mode, and the user it
     * belongs to (owner_id: the live user, for a test key; NULL: user_id itself). */
    "ALTER TABLE users ADD COLUMN mode TEXT NOT NULL DEFAULT 'live';"
    "ALTER TABLE users ADD COLUMN live_user_id BIGINT;"
    "CREATE UNIQUE INDEX users_test_twin ON users (live_user_id);"
    "ALTER TABLE api_keys ADD COLUMN mode TEXT NOT NULL DEFAULT 'live';"
    "ALTER TABLE api_keys ADD COLUMN owner_id BIGINT;",
    /* 17: events and payments partitioned by month (PostgreSQL only: postgres_migrations
     * below). SQLite keeps its tables as they are. */
    "",
};

#define MIGRATION_COUNT (int)(sizeof migrations / sizeof migrations[0])

/* A version whose PostgreSQL text differs from SQLite's: migrations[] holds the text SQLite
 * runs (an empty one when the change is PostgreSQL's alone) and this table the text PostgreSQL
 * runs instead. A version absent here runs migrations[]'s text on both. */
typedef struct postgres_migration {
    int version;
    const char *sql;
} postgres_migration;

/* payd_month_first_id below writes the epoch as a literal: a migration's text never changes. */
_Static_assert(PAYD_EPOCH_MS == 1767225600000LL, "migration 17 names the Snowflake epoch");

/* 17's parts: each table's conversion, and the functions that keep the partitions. */
#define PG_PARTITION_FUNCTIONS                                                                     \
    /* a month's first Snowflake id: ids carry their millisecond since PAYD_EPOCH_MS (core/ids.h,  \
     * 2026-01-01T00:00:00Z) above 22 bits of node and sequence */                                 \
    "CREATE FUNCTION payd_month_first_id(m timestamptz) RETURNS bigint LANGUAGE sql IMMUTABLE"     \
    "  AS $$ SELECT (CAST(floor(extract(epoch FROM m) * 1000) AS bigint) - 1767225600000) << 22 "  \
    "$$;" /* the partition of tbl for the UTC month of `month`, made when missing; rows of that    \
           * month that went to the DEFAULT partition meanwhile move into it. SECURITY DEFINER: a  \
           * node's role, which may create no table (docs/deployment.md), keeps the partitions     \
           * through it */                                                                         \
    "CREATE FUNCTION payd_ensure_partition(tbl text, month timestamptz) RETURNS boolean"           \
    "  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET TimeZone = 'UTC'"        \
    "  SET lock_timeout = '200ms' AS $$"                                                           \
    "DECLARE"                                                                                      \
    "  m timestamptz := date_trunc('month', month);"                                               \
    "  lo bigint := payd_month_first_id(m);"                                                       \
    "  hi bigint := payd_month_first_id(m + interval '1 month');"                                  \
    "  part text := tbl || '_p' || to_char(m, 'YYYY_MM');"                                         \
    "  strays boolean;"                                                                            \
    "BEGIN"                                                                                        \
    "  IF tbl NOT IN ('events', 'payments') THEN"                                                  \
    "    RAISE EXCEPTION 'payd partitions events and payments only';"                              \
    "  END IF;"                                                                                    \
    "  IF m < timestamptz '2026-01-01 00:00:00+00' OR to_regclass(quote_ident(part)) IS NOT NULL"  \
    "  THEN RETURN false; END IF;" /* a node making the same partition at the same time made it    \
                                      first: nothing to do */                                      \
    "  BEGIN"                                                                                      \
    "  EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE id >= %s AND id < %s)',"              \
    "    tbl || '_default', lo, hi) INTO strays;"                                                  \
    "  IF strays THEN"                                                                             \
    "    EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', tbl, tbl || '_default');"            \
    "  END IF;"                                                                                    \
    "  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%s) TO (%s)',"             \
    "    part, tbl, lo, hi);"                                                                      \
    "  IF strays THEN" /* taken out before they go back in, so the order guard's trigger sees each \
                        * payment leave (if it still fires on the detached partition) before it    \
                        * comes back */                                                            \
    "    EXECUTE format('CREATE TEMP TABLE payd_moving AS WITH moved AS (DELETE FROM %I"           \
    "      WHERE id >= %s AND id < %s RETURNING *) SELECT * FROM moved', tbl || '_default', lo, "  \
    "hi);"                                                                                         \
    "    EXECUTE format('INSERT INTO %I SELECT * FROM payd_moving', tbl);"                         \
    "    DROP TABLE payd_moving;"                                                                  \
    "    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I DEFAULT', tbl, tbl || '_default');"    \
    "  END IF;"                                                                                    \
    "  EXCEPTION WHEN duplicate_table THEN RETURN false;"                                          \
    "  END;"                                                                                       \
    "  RETURN true;"                                                                               \
    "END $$;" /* this month's and the next months_ahead months' partitions of both tables: how     \
               * many were made */                                                                 \
    "CREATE FUNCTION payd_ensure_partitions(months_ahead integer) RETURNS integer"                 \
    "  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET TimeZone = 'UTC'"        \
    "  SET lock_timeout = '200ms' AS $$"                                                           \
    "DECLARE made integer := 0; t text; i integer;"                                                \
    "BEGIN"                                                                                        \
    "  FOREACH t IN ARRAY ARRAY['events', 'payments'] LOOP"                                        \
    "    FOR i IN 0..months_ahead LOOP"                                                            \
    "      IF payd_ensure_partition(t, date_trunc('month', now()) + make_interval(months => i))"   \
    "      THEN made := made + 1; END IF;"                                                         \
    "    END LOOP;"                                                                                \
    "  END LOOP;"                                                                                  \
    "  RETURN made;"                                                                               \
    "END $$;" /* retention (store/prune.c): every month partition of events whose ids all lie      \
               * below before_id, dropped; how many. Never payments': they are the books. */       \
    "CREATE FUNCTION payd_drop_event_partitions(before_id bigint) RETURNS integer"                 \
    "  LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT SET lock_timeout = '200ms'"  \
    "  AS $$"                                                                                      \
    "DECLARE r record; dropped integer := 0;"                                                      \
    "BEGIN"                                                                                        \
    "  FOR r IN SELECT c.relname, CAST((regexp_match(pg_get_expr(c.relpartbound, c.oid),"          \
    "      'TO \\(''?(-?[0-9]+)''?\\)'))[1] AS bigint) AS hi"                                      \
    "    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"                                 \
    "    WHERE i.inhparent = CAST('events' AS regclass) ORDER BY 2 LOOP"                           \
    "    IF r.hi IS NOT NULL AND r.hi <= before_id THEN"                                           \
    "      EXECUTE format('DROP TABLE IF EXISTS %I', r.relname);"                                  \
    "      dropped := dropped + 1;"                                                                \
    "    END IF;"                                                                                  \
    "  END LOOP;"                                                                                  \
    "  RETURN dropped;"                                                                            \
    "END $$;"

/* the months of a table's existing rows (those of sane Snowflake ids), each given its
 * partition before the rows move in; other ids go to the DEFAULT partition */
#define PG_PARTITIONS_FOR_ROWS(tbl, old)                                                           \
    "SELECT payd_ensure_partition('" tbl "', m) FROM (SELECT DISTINCT date_trunc('month',"         \
    "  to_timestamp(CAST((id >> 22) + 1767225600000 AS double precision) / 1000), 'UTC') AS m"     \
    "  FROM " old                                                                                  \
    "  WHERE id > 0 AND id < payd_month_first_id(now() + interval '1 year')) months;"

/* a table moved under a partitioned one of the same name: the old one renamed, its indexes
 * dropped (they are made again on the new one, and the copy needs none), then emptied into the
 * new one, whose month partitions exist by then, and dropped */
#define PG_PARTITIONED(tbl)                                                                        \
    "ALTER TABLE " tbl " RENAME TO " tbl "_unpartitioned;"                                         \
    "ALTER TABLE " tbl "_unpartitioned RENAME CONSTRAINT " tbl "_pkey TO " tbl                     \
    "_unpartitioned_pkey;"                                                                         \
    "CREATE TABLE " tbl " (LIKE " tbl "_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"   \
    "  PARTITION BY RANGE (id);"                                                                   \
    "ALTER TABLE " tbl " ADD CONSTRAINT " tbl "_pkey PRIMARY KEY (id);"                            \
    "CREATE TABLE " tbl "_default PARTITION OF " tbl " DEFAULT;"
#define PG_MOVE_ROWS(tbl)                                                                          \
    PG_PARTITIONS_FOR_ROWS(tbl, tbl "_unpartitioned")                                              \
    "INSERT INTO " tbl " SELECT * FROM " tbl "_unpartitioned;"                                     \
    "DROP TABLE " tbl "_unpartitioned;"

static const postgres_migration postgres_migrations[] = {
    /* 17: events and payments partitioned BY RANGE (id), one partition per UTC month (a
     * Snowflake id carries its time, so a month is an id range), plus a DEFAULT partition so no
     * insert ever fails for a missing month (docs/operations.md, "Partitions"). The primary key
     * holds the partition key, so a lookup by id is one probe of one partition; the page
     * indexes are each partition's. Retention drops an old month of events whole (prune.c);
     * payments are never pruned, an operator may detach and archive old months. A unique index
     * must hold the partition key, so the order guard (one payment per order that is neither
     * failed nor canceled, payments_one_per_order) moves to payment_order_holds, whose primary
     * key bears its name and which the payments' own triggers keep in the same statement: a
     * second payment for a held order fails as the index failed it (23505, same constraint). */
    {17, PG_PARTITION_FUNCTIONS
     /* events */
     "DROP INDEX events_page;"
     "DROP INDEX events_type_page;" PG_PARTITIONED(
         "events") "CREATE INDEX events_page ON events (user_id, created_at, id);"
                   "CREATE INDEX events_type_page ON events (user_id, type, created_at, "
                   "id);" PG_MOVE_ROWS("events")
     /* payments */
     "DROP INDEX payments_page;"
     "DROP INDEX payments_status_page;"
     "DROP INDEX payments_capture_due;"
     "DROP INDEX payments_one_per_order;" PG_PARTITIONED(
         "payments") "CREATE INDEX payments_page ON payments (account_id, created_at, id);"
                     "CREATE INDEX payments_status_page ON payments (account_id, status, "
                     "created_at, id);"
                     "CREATE INDEX payments_capture_due ON payments (capture_before)"
                     "  WHERE status = 'requires_capture';"
                     "CREATE TABLE payment_order_holds ("
                     "  order_id BIGINT CONSTRAINT payments_one_per_order PRIMARY KEY,"
                     "  payment_id BIGINT NOT NULL);"
                     "CREATE FUNCTION payd_payment_order_hold() RETURNS trigger LANGUAGE plpgsql "
                     "AS $$"
                     "BEGIN"
                     "  IF TG_OP <> 'INSERT' THEN"
                     "    IF OLD.order_id IS NOT NULL AND OLD.status NOT IN ('failed', 'canceled') "
                     "THEN"
                     "      DELETE FROM payment_order_holds WHERE order_id = OLD.order_id AND "
                     "payment_id = OLD.id;"
                     "    END IF;"
                     "  END IF;"
                     "  IF TG_OP <> 'DELETE' THEN"
                     "    IF NEW.order_id IS NOT NULL AND NEW.status NOT IN ('failed', 'canceled') "
                     "THEN"
                     /* the same payment again (moved between partitions) keeps its hold */
                     "      INSERT INTO payment_order_holds AS h (order_id, payment_id)"
                     "        VALUES (NEW.order_id, NEW.id) ON CONFLICT (order_id) DO UPDATE"
                     "        SET payment_id = EXCLUDED.payment_id WHERE h.payment_id = "
                     "EXCLUDED.payment_id;"
                     "      IF NOT FOUND THEN"
                     "        RAISE unique_violation USING CONSTRAINT = 'payments_one_per_order',"
                     "          TABLE = 'payments', MESSAGE = 'duplicate key value violates unique "
                     "constraint"
                     " \"payments_one_per_order\"', DETAIL = format('Key (order_id)=(%s) already "
                     "exists.',"
                     "          NEW.order_id);"
                     "      END IF;"
                     "    END IF;"
                     "  END IF;"
                     "  RETURN NULL;"
                     "END $$;"
                     "CREATE TRIGGER payments_order_hold_insert AFTER INSERT ON payments FOR EACH "
                     "ROW"
                     "  WHEN (NEW.order_id IS NOT NULL) EXECUTE FUNCTION payd_payment_order_hold();"
                     "CREATE TRIGGER payments_order_hold_update AFTER UPDATE OF order_id, status "
                     "ON payments"
                     "  FOR EACH ROW WHEN (OLD.order_id IS NOT NULL OR NEW.order_id IS NOT NULL)"
                     "  EXECUTE FUNCTION payd_payment_order_hold();"
                     "CREATE TRIGGER payments_order_hold_delete AFTER DELETE ON payments FOR EACH "
                     "ROW"
                     "  WHEN (OLD.order_id IS NOT NULL) EXECUTE FUNCTION "
                     "payd_payment_order_hold();" PG_MOVE_ROWS("payments")
     /* this month's and the next two months' partitions: payd keeps making them (prune.c) */
     "SELECT payd_ensure_partitions(2);"},
};

#define POSTGRES_MIGRATION_COUNT (int)(sizeof postgres_migrations / sizeof postgres_migrations[0])

/* The text version v runs on a database of this kind. */
static const char *migration_text(int v, db_kind kind)
{
    if (kind == DB_POSTGRES)
        for (int i = 0; i < POSTGRES_MIGRATION_COUNT; i++)
            if (postgres_migrations[i].version == v)
                return postgres_migrations[i].sql;
    return migrations[v - 1];
}

static char *dialect(const char *sql, db_kind kind)
{
    const char *pk = kind == DB_SQLITE ? "INTEGER PRIMARY KEY" : "BIGINT PRIMARY KEY";
    size_t cap = strlen(sql) * 2 + 1;
    char *out = malloc(cap), *o = out;
    for (const char *p = sql; *p;) {
        if (!strncmp(p, "ID_PK", 5)) {
            o += sprintf(o, "%s", pk);
            p += 5;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* The versions the database has recorded: applied[v] for v in 1..MIGRATION_COUNT, and the
 * highest of any (a newer release's may be above ours). None when it has no schema_migrations
 * table yet. */
static void read_applied(db_conn *c, bool applied[MIGRATION_COUNT + 1], int *highest)
{
    memset(applied, 0, sizeof(bool) * (MIGRATION_COUNT + 1));
    *highest = 0;
    db_stmt *st = db_query(c, "SELECT version FROM schema_migrations", "");
    while (db_step(st) == DB_ROW) {
        int64_t v = db_int(st, 0);
        if (v >= 1 && v <= MIGRATION_COUNT)
            applied[v] = true;
        if (v > *highest)
            *highest = (int)v;
    }
    db_done(st);
}

static atomic_int schema_version_seen;

int store_schema_version(void)
{
    return atomic_load(&schema_version_seen);
}

void store_schema_status(db_conn *c, schema_status *out)
{
    bool applied[MIGRATION_COUNT + 1];
    read_applied(c, applied, &out->at); /* no table yet: nothing applied */
    out->needed = MIGRATION_COUNT;
    out->pending = false;
    for (int v = 1; v <= MIGRATION_COUNT; v++)
        out->pending |= !applied[v];
}

int store_migrate(db_conn *c, char *err, size_t errlen)
{
    /* Nodes migrating at once take turns, and the turn is taken before any DDL: two
     * CREATE TABLE IF NOT EXISTS racing on an empty database can both fail on PostgreSQL. */
    if (db_kind_of(c) == DB_POSTGRES &&
        db_exec_script(c, "SELECT pg_advisory_lock(7340001)") != DB_DONE) {
        snprintf(err, errlen, "migrate: cannot take the migration lock: %s", db_last_error(c));
        return -1;
    }
    /* created only when missing: a role that may not create tables (a node's, see
     * docs/deployment.md) can still check that the schema is current */
    db_stmt *exists = db_query(c, "SELECT 1 FROM schema_migrations LIMIT 1", "");
    bool have_table = db_step(exists) != DB_ERROR;
    db_done(exists);
    if (!have_table &&
        db_exec_script(c, "CREATE TABLE IF NOT EXISTS schema_migrations ("
                          "version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)") != DB_DONE) {
        snprintf(err, errlen, "migrate: %s", db_last_error(c));
        if (db_kind_of(c) == DB_POSTGRES)
            db_exec_script(c, "SELECT pg_advisory_unlock(7340001)");
        return -1;
    }
    /* Every version the database has not recorded runs, in order (as Rails does), so a version
     * missing below the newest one applied is still applied. */
    bool applied[MIGRATION_COUNT + 1];
    int highest;
    read_applied(c, applied, &highest);
    int rc = 0;
    for (int v = 1; v <= MIGRATION_COUNT && rc == 0; v++) {
        if (applied[v])
            continue;
        char *sql = dialect(migration_text(v, db_kind_of(c)), db_kind_of(c));
        if (db_exec_script(c, "BEGIN") != DB_DONE || db_exec_script(c, sql) != DB_DONE ||
            db_exec(c, "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", "ii",
                    (int64_t)v, now_us()) != DB_DONE ||
            db_exec_script(c, "COMMIT") != DB_DONE) {
            snprintf(err, errlen, "migration %d: %s", v, db_last_error(c));
            db_exec_script(c, "ROLLBACK");
            rc = -1;
        }
        free(sql);
    }
    if (rc == 0) /* what /metrics shows: ours, or a newer release's above it */
        atomic_store(&schema_version_seen, highest > MIGRATION_COUNT ? highest : MIGRATION_COUNT);
    if (db_kind_of(c) == DB_POSTGRES)
        db_exec_script(c, "SELECT pg_advisory_unlock(7340001)");
    return rc;
}
