# hushmon build: C programs into build/, the Python CLI into .venv/.
#   make        build everything (installs missing Debian packages as root)
#   make test   every test: C unit tests, sanitizer build, MPI and Python tests, lint,
#               and the MPI tests again against MPICH (make test-mpich)
#   make demo   run the main job on this machine and print where its report is

VENV    := .venv
BUILD   := build
ASAN    := build-asan
MPICH   := build-mpich
PY      := $(VENV)/bin/python
JOBS    ?= $(shell nproc)
# pytest's processes (pytest-xdist). Most tests wait on servers, agents'
# periods and subprocesses, so more workers than cores overlap those waits;
# the bed's tests and the MPI tests each stay on one worker
# (tests/xdist_groups.py). PYTEST_WORKERS=0: one process, as before.
PYTEST_WORKERS ?= 3
PYTEST_XDIST = -n $(PYTEST_WORKERS) --dist loadgroup
GEN     := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
# MPICH beside Open MPI (Debian's mpich package): its compiler wrapper and
# launcher; CMake's FindMPI takes the MPI of the wrapper it is given.
MPICH_CC  ?= mpicc.mpich
MPICH_RUN ?= mpiexec.mpich

# Warnings are errors (HUSHMON_WERROR) in every tree the test targets build.
# A plain `make` leaves build/ as it was configured, warnings only in a fresh
# one, so a newer compiler or another MPI cannot stop a user's build;
# `make WERROR=ON` (or OFF) sets it.
WERROR  ?=
test test-c test-asan test-py test-mpich: WERROR := ON
CMAKE_WERROR = $(if $(WERROR),-DHUSHMON_WERROR=$(WERROR))

.PHONY: all deps venv c install asan test test-c test-asan test-py test-mpich lint demo clean

all: deps venv c

deps:
	@bash scripts/install-deps.sh

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $@

$(BUILD)/CMakeCache.txt: CMakeLists.txt
	cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_WERROR)

c: $(BUILD)/CMakeCache.txt
	$(if $(WERROR),cmake -S . -B $(BUILD) $(CMAKE_WERROR) >/dev/null)
	cmake --build $(BUILD) -j $(JOBS)

# Installs what has install rules (libhushmon: header, shared and static
# library, pkg-config file) under PREFIX (default /usr/local).
PREFIX ?= /usr/local
install: c
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

# A second build with AddressSanitizer and UBSan, for the daemon that runs
# beside users' jobs (and its unit tests).
asan: deps
	cmake -S . -B $(ASAN) $(GEN) -DCMAKE_BUILD_TYPE=Debug -DHUSHMON_SANITIZE=ON $(CMAKE_WERROR)
	cmake --build $(ASAN) -j $(JOBS) --target hm_sanitized_tests

test: all test-c test-asan lint test-py test-mpich

test-c: c
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: asan
	cd $(ASAN) && ctest --output-on-failure -L sanitized

lint: venv
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench
	$(VENV)/bin/mypy python

test-py: all
	$(VENV)/bin/pytest -q $(PYTEST_XDIST)

# The C programs built against MPICH in their own tree, and the MPI
# integration tests (tests/mpi) run with them under MPICH's hydra launcher:
# those that start an MPI program (the few that start none ran in test-py;
# tests/mpi/conftest.py lists them).
test-mpich: deps venv
	cmake -S . -B $(MPICH) $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DMPI_C_COMPILER=$(MPICH_CC) $(CMAKE_WERROR)
	cmake --build $(MPICH) -j $(JOBS)
	HUSHMON_BIN=$(CURDIR)/$(MPICH)/bin HUSHMON_MPIRUN=$(MPICH_RUN) \
	  $(VENV)/bin/pytest -q tests/mpi --mpi-library-checks-only

demo: all
	$(VENV)/bin/hushmon run --demo

clean:
	rm -rf $(BUILD) $(ASAN) $(MPICH)
