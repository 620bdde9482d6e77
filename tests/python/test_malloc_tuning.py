"""tune_malloc_for_a_daemon (daemon_env.py): a collector's glibc
heap holds at most two arenas however many threads allocate, and a site's
own MALLOC_ARENA_MAX is kept. Counted from glibc's own malloc_info, in a
fresh process (arenas are per process and never go away)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hushmon.commands import DAEMONS

# Starts 12 threads that each allocate (glibc gives each new thread an arena
# of its own until the limit, 8 per core by default) and prints the number
# of arenas malloc_info lists.
COUNT_ARENAS = r"""
import ctypes, sys, threading
from hushmon.daemon_env import tune_malloc_for_a_daemon
print(sorted(tune_malloc_for_a_daemon().items()) if sys.argv[1] == "tune" else [])
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
go = threading.Barrier(12)
def work():
    go.wait()
    for _ in range(200):
        libc.free(libc.malloc(4096))
threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads: t.start()
for t in threads: t.join()
buf, size = ctypes.c_char_p(), ctypes.c_size_t()
libc.open_memstream.restype = ctypes.c_void_p
stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
assert libc.malloc_info(0, stream) == 0
libc.fclose(stream)
print(buf.value.decode().count("<heap nr="))
"""


def arenas(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", COUNT_ARENAS, mode],
        capture_output=True, text=True, timeout=60, check=True, env={**clean, **env},
    )  # fmt: skip
    settings, count = out.stdout.split("\n")[:2]
    return settings, int(count)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_a_daemon_keeps_two_arenas_and_a_site_setting_wins() -> None:
    settings, tuned = arenas("tune")
    assert settings == "[('arena_max', 2), ('mmap_threshold_bytes', 1048576)]"
    assert 1 <= tuned <= 2
    # the same threads without the setting: an arena each, up to 8 per core
    _, untuned = arenas("plain")
    assert untuned > 2, "glibc shared its arenas unasked: the check above shows nothing"
    settings, site = arenas("tune", MALLOC_ARENA_MAX="3")
    assert settings == "[('mmap_threshold_bytes', 1048576)]" and site == 3


ARROW_POOL = r"""
import pyarrow as pa
from hushmon.transport.memdump import arrow_pool_for_a_daemon
print(sorted(arrow_pool_for_a_daemon().items()), pa.default_memory_pool().backend_name)
pa.array(range(1000))  # a buffer from the pool the process now uses
"""


def test_a_daemon_s_arrow_buffers_come_from_glibc_unless_the_site_says_otherwise() -> None:
    clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}

    def pool(**env: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", ARROW_POOL],
            capture_output=True, text=True, timeout=60, check=True, env={**clean, **env},
        )  # fmt: skip
        return out.stdout.strip()

    # started without hushmon.cli: pyarrow's calls move, Arrow's C++ parts
    # cannot, and the report says which they use
    assert pool() == (
        "[('arrow_pool', 'system, its C++ parts mimalloc (set ARROW_DEFAULT_MEMORY_POOL "
        "before start)')] system"
    )
    assert pool(ARROW_DEFAULT_MEMORY_POOL="system") == "[('arrow_pool', 'system')] system"
    # a site's choice is Arrow's own, and kept
    assert pool(ARROW_DEFAULT_MEMORY_POOL="jemalloc") == "[('arrow_pool', 'jemalloc')] jemalloc"


# A command started as the hushmon CLI starts it, then a Parquet file
# written as the lake writer writes its files: the bytes mimalloc's pool
# ever held, and Arrow's default pool.
CLI_THEN_PARQUET = r"""
import io, sys
from hushmon.cli import main
try:
    main([sys.argv[1], "--help"])
except SystemExit:
    pass
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"a": list(range(200_000))}), io.BytesIO(), compression="zstd")
print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory() > 0)
"""


def test_a_daemon_started_by_the_cli_writes_parquet_from_glibc_not_mimalloc() -> None:
    clean = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}

    def run(command: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", CLI_THEN_PARQUET, command],
            capture_output=True, text=True, timeout=120, check=True, env=clean,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[-1]

    for daemon in sorted(DAEMONS):
        assert run(daemon) == "system False", daemon
    # a command that ends soon keeps Arrow's own default
    assert run("digest") == "mimalloc True"
