# Thin wrapper: setup (Debian packages + Python venv), configure, build, run, test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all setup build run test test-unit test-asan fuzz goldens clean

all: build

setup:
	bash tools/setup/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j$(JOBS)

# The default suite on every available backend.
run: build
	./$(BUILD)/genfence run

# Every test (unit + CLI + fuzz corpus replay) on the Release build, then the unit
# tests and the fuzz corpus replay under ASan + UBSan.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	$(MAKE) test-asan

test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGENFENCE_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) -L 'unit|fuzz' --output-on-failure -j$(JOBS)

# libFuzzer targets (tests/fuzz/README.md), clang only: each for FUZZ_SECONDS
# seconds, one after another; a crash lands in $(FUZZ_BUILD)/fuzz/artifacts/.
fuzz: setup
	GENFENCE_EXTRA_PKGS="clang libclang-rt-14-dev" bash tools/setup/setup.sh
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	  -DGENFENCE_SANITIZE=ON -DGENFENCE_FUZZ=ON $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target $(foreach t,cases safetensors config tokenizer golden,fuzz_$(t))
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)

# Regenerate the committed goldens (golden/*.safetensors) of cases/golden*.yaml
# (and cases/detect/golden*.yaml) from transformers on PyTorch
# (docs/goldens.md); genfence reads the case files.
goldens: build
	.venv/bin/python tools/reference/golden.py --genfence $(BUILD)/genfence $(wildcard cases/golden*.yaml cases/detect/golden*.yaml)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
