# hushmon build: C programs into build/, the Python CLI into .venv/.
#   make        build everything (installs missing Debian packages as root)
#   make test   every test: C unit tests, sanitizer build, MPI and Python tests, lint
#   make demo   run the main job on this machine and print where its report is

VENV    := .venv
BUILD   := build
ASAN    := build-asan
PY      := $(VENV)/bin/python
JOBS    ?= $(shell nproc)
GEN     := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps venv c asan test test-c test-asan test-py lint demo clean

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
	cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo

c: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# A second build with AddressSanitizer and UBSan, for the daemon that runs
# beside users' jobs (and its unit tests).
asan: deps
	cmake -S . -B $(ASAN) $(GEN) -DCMAKE_BUILD_TYPE=Debug -DHUSHMON_SANITIZE=ON
	cmake --build $(ASAN) -j $(JOBS) --target hm_sanitized_tests

test: all test-c test-asan lint test-py

test-c: c
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: asan
	cd $(ASAN) && ctest --output-on-failure -L sanitized

lint: venv
	$(VENV)/bin/ruff check python tests bench
	$(VENV)/bin/ruff format --check python tests bench
	$(VENV)/bin/mypy python

test-py: all
	$(VENV)/bin/pytest -q

demo: all
	$(VENV)/bin/hushmon run --demo

clean:
	rm -rf $(BUILD) $(ASAN)
