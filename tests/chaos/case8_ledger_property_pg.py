"""case7's property test on PostgreSQL: two payd nodes charging through `payd processor-sim`
with its faults (and its own kills), a shorter run (20,000 operations, 10 kills -9 spread over
both nodes). See case7_ledger_property.py."""
import case7_ledger_property

if __name__ == "__main__":
    case7_ledger_property.run(ops=20000, kills=10, clients=8, pg=True, use_sim=True)
