# Thin wrapper over scripts/setup.sh, CMake and CTest. Every target does the whole set-up on a fresh
# machine (install dependencies -> configure -> build -> run), so `make test` works straight after a clone.
# The real build logic lives in CMakeLists.txt; nothing here is needed to build braid by hand.
#
#   make run     build, then train examples/hybrid/job.yaml (the hybrid parameter-server job: 4 trainers
#                with DDP, a parameter-server worker, a master) on 6 ranks under mpirun; prints progress and
#                the summary
#   make test    build, then every CTest test: unit tests, layering checks, the cli, and the examples
#                (each example is a CTest test labelled "example", run under mpirun)
#   make install PREFIX=/opt/braid   build, then install braid there (relocatable; docs/INSTALL.md)
#   make package build, then build/braid_<version>_amd64.deb (CPack; `apt-get install ./build/braid_*.deb`)
#   make bench   run every benchmark driver (bench/run_*.sh), each on its own Release build
#   make asan    the same tests in build-asan, compiled with -fsanitize=address,undefined
#   make tsan    the same tests in build-tsan, compiled with -fsanitize=thread
#   make check-all  make test, then the sanitizer builds on the unit tests and a few multi-process suites
#                (SAN_UNIT, SAN_MP below): what CI cannot afford on every run (two more builds), run before a
#                release; `make check-sanitizers` is that second half alone
#   make fuzz    build every libFuzzer target of fuzz/ in build-fuzz (clang, -fsanitize=fuzzer,address,undefined)
#                and run each for FUZZ_SECONDS; prints per target the executions and any crash
#                (docs/FUZZING.md). `make test` replays the committed corpora without clang.
#   make clean   remove the build folders above
#
# Overrides: make test BUILD_TYPE=Debug JOBS=8 TEST_TIMEOUT=600 CMAKE_ARGS="-DBRAID_WITH_CUDA=OFF"
#            make run JOB=examples/digits/job.yaml NP=4 RUN_ARGS="--steps 100"
#            make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="rpc_wire store_frames" FUZZ_ARGS="-max_len=4096"

BUILD_TYPE ?= RelWithDebInfo
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
# make run: the job, its rank count (the job's roles name 6 ranks) and extra `braid run` arguments.
JOB ?= examples/hybrid/train.yaml
NP ?= 6
RUN_ARGS ?=
# Seconds; CTest's limit for any test that does not set its own TIMEOUT property.
TEST_TIMEOUT ?= 300
CMAKE_ARGS ?=
# make install: where braid goes.
PREFIX ?= /usr/local
# make fuzz: seconds per target, which targets (default: all of fuzz/fuzz_*.cc), the compilers (clang),
# extra libFuzzer flags.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_CC ?= clang
FUZZ_CXX ?= clang++
FUZZ_ARGS ?=

# Containers often run as root, which Open MPI refuses without both variables.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1

MPIRUN := mpirun -np $(NP) --oversubscribe
CTEST_FLAGS := --output-on-failure --timeout $(TEST_TIMEOUT) -j$(JOBS)

# Sanitizer runtime options. protect_shadow_gap=0 lets the CUDA runtime map its memory under ASan;
# allocator_may_return_null=1 (both sanitizers) lets an impossible request fail as it does without
# them, so that braid's own OutOfMemoryError (what the out-of-memory tests check) is what surfaces, not the
# sanitizer's abort; the suppression files silence leaks and races inside Open MPI, UCX and friends, never
# in braid. Tests run under mpirun set their own, stronger options (BRAID_MPI_TEST_ENV in
# cmake/Sanitizers.cmake).
SAN_DIR := $(CURDIR)/scripts/sanitizers
ASAN_ENV := ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1 \
            LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# UCX_MEM_MMAP_HOOK_MODE=none: UCX's mmap/madvise hooks crash TSan's interceptors at thread exit.
TSAN_ENV := TSAN_OPTIONS=suppressions=$(SAN_DIR)/tsan.supp:second_deadlock_stack=1:halt_on_error=1:allocator_may_return_null=1 \
            UCX_MEM_MMAP_HOOK_MODE=none

# make check-all: the sanitizer builds' share of the tests. Every unit test, and multi-process suites that
# cover the store, the handshake and both engines (the rest take too long under TSan on two cores).
SAN_UNIT := -L unit
SAN_MP := -R "^(collectives_mp/(mpi|gloo)/np2|rpc_mp/tcp/np2|rpc_mp/ucx/np2|dist_autograd_mp/tcp/np2)$$"

.PHONY: all setup configure build run test install package bench asan tsan check-all check-sanitizers fuzz clean

all: build

setup:
	scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

run: build
	$(MPIRUN) $(BUILD_DIR)/cli/braid run $(JOB) $(RUN_ARGS)

test: build
	ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS)

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# The Debian package of this build: Depends from the binaries (dpkg-shlibdeps), files under /usr.
package: build
	cd $(BUILD_DIR) && cpack -G DEB
	@ls -1 $(BUILD_DIR)/braid_*_amd64.deb

# Each driver configures its own Release build (timings from RelWithDebInfo would mislead) and prints a
# table comparing braid with its reference.
bench: setup
	@for driver in bench/run_*.sh; do \
	  [ -x "$$driver" ] || continue; echo "== $$driver"; JOBS=$(JOBS) "$$driver" || exit 1; \
	done

asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBRAID_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build build-asan -j$(JOBS)
	$(ASAN_ENV) ctest --test-dir build-asan $(CTEST_FLAGS)

tsan: setup
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBRAID_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j$(JOBS)
	$(TSAN_ENV) ctest --test-dir build-tsan $(CTEST_FLAGS)

check-all: test check-sanitizers

# check-all's share after `make test`: the two sanitizer builds and their tests.
check-sanitizers: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBRAID_SANITIZE=address,undefined $(CMAKE_ARGS)
	cmake --build build-asan -j$(JOBS)
	$(ASAN_ENV) ctest --test-dir build-asan $(CTEST_FLAGS) $(SAN_UNIT)
	$(ASAN_ENV) ctest --test-dir build-asan $(CTEST_FLAGS) $(SAN_MP)
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DBRAID_SANITIZE=thread $(CMAKE_ARGS)
	cmake --build build-tsan -j$(JOBS)
	$(TSAN_ENV) ctest --test-dir build-tsan $(CTEST_FLAGS) $(SAN_UNIT)
	$(TSAN_ENV) ctest --test-dir build-tsan $(CTEST_FLAGS) $(SAN_MP)

# The fuzz build needs none of the GPU or optional transports: the decoders are the same without them.
fuzz: setup
	cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=$(FUZZ_CC) \
	  -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DBRAID_FUZZ=ON -DBRAID_SANITIZE=address,undefined -DBRAID_WITH_CUDA=OFF \
	  -DBRAID_WITH_NCCL=OFF -DBRAID_WITH_UCX=OFF -DBRAID_WITH_GLOO=OFF $(CMAKE_ARGS)
	cmake --build build-fuzz -j$(JOBS) --target fuzzers
	FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_ARGS="$(FUZZ_ARGS)" fuzz/run_fuzzers.sh build-fuzz $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-fuzz
