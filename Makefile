# Thin wrapper: setup (Debian packages + Python venv), configure, build, run, test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all setup build run test test-unit test-asan goldens clean

all: build

setup:
	bash tools/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j$(JOBS)

# The default suite on every available backend.
run: build
	./$(BUILD)/genfence run

# Every test (unit + CLI) on the Release build, then the unit tests under ASan + UBSan.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	$(MAKE) test-asan

test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGENFENCE_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) -L unit --output-on-failure -j$(JOBS)

# Regenerate the committed goldens (golden/*.safetensors) of cases/golden*.yaml
# (and cases/detect/golden*.yaml) from transformers on PyTorch
# (docs/goldens.md); genfence reads the case files.
goldens: build
	.venv/bin/python tools/golden.py --genfence $(BUILD)/genfence $(wildcard cases/golden*.yaml cases/detect/golden*.yaml)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
