"""Case 2: case 1 against `payd processor-sim` that fails before charging, loses answers after
charging (as 500s) and so leaves payd in doubt; payd is killed -9 under load meanwhile, and
every fourth time the processor-sim too."""
import chaos

if __name__ == "__main__":
    chaos.kill_loop_case("case2 processor-sim kills", kills=12,
                         sim_args=["--fail-before", "0.05", "--fail-after", "0.05",
                                   "--lose-by", "500"])
