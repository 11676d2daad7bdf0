# Thin wrapper over CMake: the README's two commands and a few helpers.
#   make demo       set up, build, run a real example end to end
#   make test       set up, build, run the whole suite (ctest)
#   make build      set up and build into build/
#   make train-demo train the examples' perceptron on Fashion-MNIST (examples/train_mlp.c)
#   make test-asan  the suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   make fuzz       build the libFuzzer targets (build-fuzz/), FUZZ_SECONDS=60 make fuzz-run to run each
#   make fuzz-diff  the differential fuzzer for FUZZ_SECONDS (build/tests/fuzz_diff; FUZZ_SEED=...)
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build test demo train-demo test-asan fuzz fuzz-run fuzz-diff clean
all: build

setup:
	@sh tools/setup-deps.sh

build: setup
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

test: build
	cd build && ctest --output-on-failure -j $(JOBS)

demo: build
	@sh examples/demo.sh build

train-demo: build
	@build/train_mlp $(TRAIN_ARGS)

test-asan: setup
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTCOMP_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

fuzz: setup
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCOMP_FUZZ=ON -DTCOMP_TESTS=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_frontend fuzz_npy fuzz_cache_import

FUZZ_SECONDS ?= 60
fuzz-run: fuzz
	mkdir -p build-fuzz/corpus build-fuzz/crashes
	cp tests/corpus/*.tc build-fuzz/corpus/ 2>/dev/null || true
	build-fuzz/tests/fuzz/fuzz_frontend -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-dict=tests/fuzz/tc.dict -artifact_prefix=build-fuzz/crashes/ \
		build-fuzz/corpus tests/fuzz/seeds
	mkdir -p build-fuzz/corpus-npy build-fuzz/corpus-cache
	build-fuzz/tests/fuzz/fuzz_npy -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-artifact_prefix=build-fuzz/crashes/ build-fuzz/corpus-npy tests/fuzz/seeds-npy
	build-fuzz/tests/fuzz/fuzz_cache_import -max_total_time=$(FUZZ_SECONDS) -max_len=8192 \
		-timeout=10 -artifact_prefix=build-fuzz/crashes/ build-fuzz/corpus-cache \
		tests/fuzz/seeds-cache

# The differential fuzzer: new cases (seed FUZZ_SEED, default from the clock)
# for FUZZ_SECONDS; reproducers of failures go to build/fuzz-diff/failures.
FUZZ_SEED ?= $(shell date +%s)
fuzz-diff: build
	build/tests/fuzz_diff --seed $(FUZZ_SEED) --cases 100000000 --seconds $(FUZZ_SECONDS) \
		--out build/fuzz-diff/failures

clean:
	rm -rf build build-asan build-fuzz
