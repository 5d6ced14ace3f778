# The two commands of the README: `make run` and `make test`. Everything builds with CMake into build/.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
CTEST_FLAGS ?=

.PHONY: all deps build run test test-sanitize bench clean format install

all: build

deps:
	@scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Quiet: the compiler's progress is shown only when the build fails, so the demo's API key is
# the first thing on the screen.
run: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@log=$$(cmake --build $(BUILD) -j $(JOBS) 2>&1) || { printf '%s\n' "$$log" >&2; exit 1; }
	@scripts/run-demo.sh $(BUILD)/payd

test:
	@scripts/install-deps.sh test
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	@# three at a time on two cores: most tests spend their time waiting on the servers they start
	@cd $(BUILD) && ctest --output-on-failure -j 3 $(CTEST_FLAGS)
	@cat $(BUILD)/fuzz/*.summary 2>/dev/null || true # each fuzz target's edges (tests/fuzz/run.sh)

# The suite under AddressSanitizer and UndefinedBehaviorSanitizer (CI runs it after `make test`):
# every label but the kill-loop, cluster, failover (ha), browser and webhook-chaos runs, the
# Node and Python clients' suites, and of the PostgreSQL runs only the core ones (label core-pg:
# idempotency, fencing, ledger, refunds, transfers, storage failures). The runs left out test
# behaviour under faults or repeat on PostgreSQL what the api label has just run sanitized on
# the same handlers; `make test` has just run them on the same code, and the fencing and
# recovery code they reach is also driven step by step by the api label's fault-point tests.
# Running them sanitized doubled CI's time. The Node and Python clients hold no C code (the C
# client's conformance run, client-c, is sanitized), and the fuzz targets are built with ASan
# and UBSan in every run already. `^ha` and `^pg` match whole labels here (chaos and core-pg do
# not start with them); a `$` would not survive the recursive make.
test-sanitize:
	@$(MAKE) --no-print-directory test BUILD=build-sanitize \
	    CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Debug -DPAYD_SANITIZE=ON" \
	    CTEST_FLAGS="-LE 'chaos|cluster|browser|webhooks|client-node|client-python|fuzz|^ha|^pg'"

bench: build
	@scripts/install-deps.sh bench
	@bench/run.sh

# PREFIX=/opt/payd installs there instead of CMake's default (/usr/local).
install: build
	@cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX))

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	@rm -rf build build-sanitize
