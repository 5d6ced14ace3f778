"""Case 1: SQLite, 20 kill -9 at random moments under load (8 retrying clients), builtin
processor. Every acknowledged payment survives, none is charged twice, none is orphaned."""
import chaos

if __name__ == "__main__":
    chaos.kill_loop_case("case1 sqlite kills", kills=20)
