"""What a long-lived hushmon process (commands.DAEMONS: collect, serve,
metrics, alert) sets for itself at its start, before its threads start and
before anything imports Arrow: hushmon.cli calls set_for_a_daemon.

- glibc's heap (tune_malloc_for_a_daemon): two arenas and a fixed mmap
  threshold.
- Arrow's buffers from glibc: Arrow picks its C++ default memory pool once,
  from ARROW_DEFAULT_MEMORY_POOL, the first time any of its code asks for
  it, and pyarrow's import already does. ``pyarrow.set_memory_pool`` later
  moves only pyarrow's own calls: the Parquet writer's encoders still take
  their buffers from the C++ default, mimalloc in the wheels, whose arena
  keeps what it once held (~30 MiB of a raw collector that writes a Parquet
  file a second) and which no trim gives back. With the variable set first,
  every Arrow buffer comes from glibc's heap, whose large blocks go back to
  the system at free.

A site's own MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_ or
ARROW_DEFAULT_MEMORY_POOL is kept.
"""

from __future__ import annotations

import functools
import os
from typing import Any

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


@functools.cache
def _libc() -> Any:
    # found at the first use, not at import: every hushmon command imports
    # this module, and ctypes.util's import and find_library's ldconfig
    # cost ~25 ms
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def libc_function(name: str) -> Any:
    """One of glibc's functions, or None (no libc found, or not glibc)."""
    return getattr(_libc(), name, None)


# mallopt's parameter numbers (glibc's malloc.h)
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
# A daemon's glibc heap: two arenas, whatever the core count, and blocks of
# 1 MiB or more always mmapped (so given back whole at free).
DAEMON_ARENA_MAX = 2
DAEMON_MMAP_THRESHOLD_BYTES = 1 << 20


def tune_malloc_for_a_daemon() -> dict[str, int]:
    """Sets glibc's heap for a process that runs for weeks, before its
    threads start; returns what it set (nothing where glibc is missing).

    glibc gives each new thread that allocates an arena of its own, up to
    8 per core, and every arena keeps its high-water mark in fragments a
    trim cannot return: DuckDB's worker threads, a store
    thread and the event loop took a collector's arenas from 38 to 45 MiB
    in 20 minutes while their bytes in use stayed flat. glibc also raises
    its mmap threshold to the largest block freed so far, after which such
    blocks come from the arenas and fragment them too. A site's own
    MALLOC_ARENA_MAX or MALLOC_MMAP_THRESHOLD_ is kept."""
    fn = libc_function("mallopt")
    if fn is None:
        return {}
    wanted = {
        "arena_max": ("MALLOC_ARENA_MAX", _M_ARENA_MAX, DAEMON_ARENA_MAX),
        "mmap_threshold_bytes": (
            "MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, DAEMON_MMAP_THRESHOLD_BYTES,
        ),
    }  # fmt: skip
    done = {}
    for name, (env, param, value) in wanted.items():
        if env not in os.environ and fn(param, value) == 1:
            done[name] = value
    return done


def set_for_a_daemon() -> dict[str, int]:
    """Both settings above; returns what tune_malloc_for_a_daemon set."""
    os.environ.setdefault(ARROW_POOL_ENV, "system")
    return tune_malloc_for_a_daemon()
