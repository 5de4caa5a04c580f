# Thin wrapper around CMake so that the two README commands work from a clean
# clone: `make bench` (the main job) and `make test`.
BUILD ?= build
JOBS  ?= $(shell nproc)
PY    ?= /usr/bin/python3

.PHONY: all build test bench bench-full fuzz deps clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Installs what building and testing need (Debian packages; root or sudo).
deps:
	./scripts/install-deps.sh

test: deps build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# The main job: every benchmark, every allocator, quick sizes (< 10 minutes).
bench: deps build
	./scripts/install-peers.sh
	$(PY) bench/run.py --quick --build $(BUILD)

bench-full: deps build
	./scripts/install-peers.sh
	$(PY) bench/run.py --full --build $(BUILD)

# The differential fuzzer's long run (~5 minutes), before landing changes to
# spry's core. FUZZ_SEED=N repeats a run; FUZZ_SECONDS=S sets each run's length.
FUZZ_BUILD ?= build-fuzz
fuzz: deps build
	./scripts/fuzz.sh $(BUILD) $(FUZZ_BUILD)

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD)
