#ifndef PAYD_SERVER_LEDGER_VERIFY_H
#define PAYD_SERVER_LEDGER_VERIFY_H
/* `payd ledger verify --db URL [--processor builtin|none|URL]` (docs/ledger.md, "Verify"): reads
 * the books in one snapshot and checks the ledger's invariants against the accounts, the
 * payments, refunds and transfers, and the processor's own records. Prints one JSON object:
 * the figures, and every violation found. Returns 0 when there is none, 1 when there is any,
 * 2 on a usage or database error. */
int ledger_verify_main(int argc, char **argv);

#endif
