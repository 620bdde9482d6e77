"""DuckDB's own allocator, read from Python.

DuckDB's Linux builds link jemalloc into their library under the prefix
``duckdb_je_`` and export its control call. DuckDB's data buffers (vectors,
string heaps, hash tables, query results, Parquet writers) are allocated
there, not by glibc's malloc, so neither ``mallinfo2`` nor
``duckdb_memory()`` (the buffer manager only) sees them; its C++ objects
(catalog entries, DuckLake's metadata) go through ``operator new`` to glibc.

jemalloc keeps freed pages ("dirty") until its decay (1 s here) runs, and
decay runs only when the arena that holds them allocates again: a thread
that stored one big group and then idles keeps that group's pages
resident. DuckDB purges its arenas when a database is
closed, not between queries.

Where the library has no such symbol (another platform, a build without
jemalloc) :func:`stats_mib` says so by returning None.
"""

from __future__ import annotations

import ctypes
from typing import Any

_MIB = 1 << 20


def _mallctl() -> Any:
    try:
        import _duckdb  # the extension module, the library DuckDB's allocator lives in

        fn = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
    except (ImportError, OSError, AttributeError):
        return None
    fn.argtypes = [
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_void_p,
        ctypes.c_size_t,
    ]
    fn.restype = ctypes.c_int
    return fn


_MALLCTL = _mallctl()


def _read_size(name: str) -> int | None:
    value = ctypes.c_size_t()
    size = ctypes.c_size_t(ctypes.sizeof(value))
    rc = _MALLCTL(name.encode(), ctypes.byref(value), ctypes.byref(size), None, 0)
    return int(value.value) if rc == 0 else None


def stats_mib() -> dict[str, float] | None:
    """jemalloc's totals, fresh: ``allocated`` (what DuckDB holds),
    ``resident`` (pages it has touched and not given back: allocated, its
    metadata and the dirty pages freed but kept), ``dirty`` (resident less
    active and metadata: freed pages it keeps) and ``mapped``;
    None where DuckDB's allocator cannot be read."""
    if _MALLCTL is None:
        return None
    epoch = ctypes.c_uint64(1)
    size = ctypes.c_size_t(ctypes.sizeof(epoch))
    # the statistics are a snapshot taken when the epoch advances
    if _MALLCTL(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8) != 0:
        return None
    names = ("allocated", "active", "metadata", "resident", "mapped")
    read = {k: _read_size(f"stats.{k}") for k in names}
    if any(v is None for v in read.values()):
        return None
    got = {k: float(v or 0) for k, v in read.items()}
    dirty = max(0.0, got["resident"] - got["active"] - got["metadata"])
    return {
        "allocated": got["allocated"] / _MIB,
        "resident": got["resident"] / _MIB,
        "dirty": dirty / _MIB,
        "mapped": got["mapped"] / _MIB,
    }
