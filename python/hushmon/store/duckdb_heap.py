"""DuckDB's own allocators: read from Python, and made to give freed pages
back.

DuckDB's Linux builds link jemalloc into their library under the prefix
``duckdb_je_`` and export its control call. DuckDB's data buffers (vectors,
string heaps, hash tables, query results, Parquet writers) are allocated
there, not by glibc's malloc, so neither ``mallinfo2`` nor
``duckdb_memory()`` (the buffer manager only) sees them; its C++ objects
(catalog entries, DuckLake's metadata) go through ``operator new`` to glibc.
Each extension loaded from a file (ducklake, sqlite_scanner) carries a
private copy of that jemalloc, with arenas of its own: its symbols are not
exported, so a copy is read by the address of its control call (the
symbol's offset from ``nm`` plus the file's load address in
/proc/self/maps), for the memory report only.

jemalloc keeps freed pages ("dirty") until its decay (1 s here) runs, and
without a background thread decay runs only when the arena that holds them
allocates again: a thread that stored one big group and then idles keeps
that group's pages, and so does an extension's copy between its bursts
(the ducklake copy of a 1000-agent summaries collector: 0.4 MiB allocated,
24.7 dirty after 11 minutes). DuckDB purges its arenas when a database is
closed, not between queries. :func:`purge_freed_pages` has every copy give
pages back as they are freed (decay 0): the library's set at run time
(:func:`set_decay_ms`), the extensions' by their start-up variable (their
background threads do not start: the copy's flag reads true, and no
thread runs). With the library's 1 s decay and its background thread, a
1000-agent summaries collector still held 6-44 MiB freed at any moment.

Closing any DuckDB database switches the library's background thread off
for the whole process, whatever that database's settings (measured on
DuckDB 1.5: the flag reads false after any close), so the collector's reopen
every 256 transactions left it off for the rest of each cycle and the
library kept 20-60 MiB of freed pages. :func:`after_close` switches it
on again and gives back at once what the closed database freed.

Where the library has no such symbol (another platform, a build without
jemalloc) :func:`stats_mib` says so by returning None.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import duckdb

_MIB = 1 << 20
# each jemalloc copy reads this when it starts (the prefix's variable), after
# the configuration DuckDB compiled in; freed pages are given back at once
# (measured: the same CPU per summary group, 42-46 against 39-52 ms)
CONF_ENV = "DUCKDB_JE_MALLOC_CONF"
PURGE_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"
_EXTENSION_SUFFIX = ".duckdb_extension"
_CTL_ARGS = (
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p,
    ctypes.c_size_t,
)
_CTL_TYPE = ctypes.CFUNCTYPE(ctypes.c_int, *_CTL_ARGS)


def _mallctl() -> Any:
    try:
        import _duckdb  # the extension module, the library DuckDB's allocator lives in

        fn = ctypes.CDLL(_duckdb.__file__).duckdb_je_mallctl
    except (ImportError, OSError, AttributeError):
        return None
    fn.argtypes = list(_CTL_ARGS)
    fn.restype = ctypes.c_int
    return fn


_MALLCTL = _mallctl()
# a site's own setting for DuckDB's allocators, as this process started:
# kept as it is, in the library's copy too
_SITE_CONF = os.environ.get(CONF_ENV)
# an extension file -> its copy's control call offset (None: not found)
_OFFSETS: dict[str, int | None] = {}


def _read(ctl: Any, name: str, ctype: Any = ctypes.c_size_t) -> Any:
    """One jemalloc setting or statistic as a ctypes ``ctype`` (size_t
    unless told), its value; None where the control refuses it."""
    value = ctype()
    size = ctypes.c_size_t(ctypes.sizeof(value))
    rc = ctl(name.encode(), ctypes.byref(value), ctypes.byref(size), None, 0)
    return value.value if rc == 0 else None


def _write(ctl: Any, name: str, value: Any) -> bool:
    """Sets one jemalloc control to ``value`` (a ctypes value); False where
    the control refuses it."""
    return ctl(name.encode(), None, None, ctypes.byref(value), ctypes.sizeof(value)) == 0


def _refresh(ctl: Any) -> bool:
    """Advances the epoch: jemalloc's statistics are a snapshot taken then."""
    epoch = ctypes.c_uint64(1)
    size = ctypes.c_size_t(ctypes.sizeof(epoch))
    return ctl(b"epoch", ctypes.byref(epoch), ctypes.byref(size), ctypes.byref(epoch), 8) == 0


def _stats_of(ctl: Any) -> dict[str, float] | None:
    if not _refresh(ctl):
        return None
    names = ("allocated", "active", "metadata", "resident", "mapped")
    read = {k: _read(ctl, f"stats.{k}") for k in names}
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


def stats_mib() -> dict[str, float] | None:
    """The library's jemalloc totals, fresh: ``allocated`` (what DuckDB
    holds), ``resident`` (pages it has touched and not given back:
    allocated, its metadata and the dirty pages freed but kept), ``dirty``
    (resident less active and metadata: freed pages it keeps) and
    ``mapped``; None where DuckDB's allocator cannot be read."""
    return None if _MALLCTL is None else _stats_of(_MALLCTL)


def _loaded_extensions() -> dict[str, int]:
    """Each extension file mapped into this process -> its load address."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                # the mapping of the file's start gives its load address
                if (
                    len(parts) >= 6
                    and parts[5].endswith(_EXTENSION_SUFFIX)
                    and int(parts[2], 16) == 0
                ):
                    out.setdefault(parts[5], int(parts[0].split("-")[0], 16))
    except (OSError, ValueError):
        return {}
    return out


def _ctl_offset(path: str) -> int | None:
    if path not in _OFFSETS:
        _OFFSETS[path] = None
        nm = shutil.which("nm")
        if nm is not None:
            try:
                out = subprocess.run(
                    [nm, path], capture_output=True, text=True, timeout=60, check=True
                ).stdout
            except (OSError, subprocess.SubprocessError):
                out = ""
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[2] == "duckdb_je_mallctl":
                    _OFFSETS[path] = int(parts[0], 16)
                    break
    return _OFFSETS[path]


# jemalloc's control that purges every arena ("every arena" is index 4096)
_PURGE_ALL = b"arena.4096.purge"


def _controls() -> dict[str, Any]:
    """Every jemalloc's control call in the process by name: the library's
    (``duckdb``) and each loaded extension's private copy's; None where one
    cannot be reached (no ``nm``, no symbol table, not a Linux build)."""
    out: dict[str, Any] = {"duckdb": _MALLCTL}
    for path, base in _loaded_extensions().items():
        offset = _ctl_offset(path)
        name = Path(path).name.removesuffix(_EXTENSION_SUFFIX)
        out[name] = None if offset is None else _CTL_TYPE(base + offset)
    return out


def arenas_of(name: str = "duckdb") -> list[tuple[int, float, int | None]] | None:
    """Per arena of one jemalloc copy (the library's by default): its index,
    the freed pages it keeps (MiB) and its dirty decay (ms; -1 never, 0 at
    once), for the arenas that keep any: which arena holds freed pages
    that the decay should have given back. None where it cannot be read."""
    ctl = _controls().get(name)
    if ctl is None or not _refresh(ctl):
        return None
    page = _read(ctl, "arenas.page")
    narenas = _read(ctl, "arenas.narenas", ctypes.c_uint)
    if not page or narenas is None:
        return None
    out = []
    for i in range(narenas):
        pdirty = _read(ctl, f"stats.arenas.{i}.pdirty")
        if pdirty:
            decay = _read(ctl, f"arena.{i}.dirty_decay_ms", ctypes.c_ssize_t)
            out.append((i, pdirty * page / _MIB, decay))
    return out


def purge_every_copy() -> list[str]:
    """Every jemalloc of the process gives its freed pages back now (each
    arena's dirty and muzzy pages); the names of the copies that did."""
    return [
        name
        for name, ctl in _controls().items()
        if ctl is not None and ctl(_PURGE_ALL, None, None, None, 0) == 0
    ]


def copies_mib() -> dict[str, dict[str, float] | None]:
    """:func:`stats_mib` of every jemalloc in the process: DuckDB's library
    (``duckdb``) and each loaded extension's private copy (by its name),
    None for a copy that cannot be read (no ``nm``, no symbol table)."""
    out: dict[str, dict[str, float] | None] = {}
    for name, ctl in _controls().items():
        out[name] = None if ctl is None else _stats_of(ctl)
    return out


def background_thread_on() -> bool | None:
    """Whether the library's jemalloc runs its background thread (which
    gives freed pages back as they decay); None where it cannot be read."""
    if _MALLCTL is None:
        return None
    on = _read(_MALLCTL, "background_thread", ctypes.c_bool)
    return None if on is None else bool(on)


def after_close() -> bool:
    """After a DuckDB database of a long-running process was closed: the
    library's background thread on again (the close switched it off for
    every database of the process) and every arena's freed pages given
    back now. False where the library's allocator cannot be reached or
    refused either call."""
    if _MALLCTL is None:
        return False
    started = _write(_MALLCTL, "background_thread", ctypes.c_bool(True))
    purged = _MALLCTL(_PURGE_ALL, None, None, None, 0) == 0
    return started and purged


def decay_ms() -> int | None:
    """The library's jemalloc's dirty decay for arenas it makes (ms; 0: pages
    given back as they are freed, -1: never); None where it cannot be read."""
    if _MALLCTL is None:
        return None
    ms = _read(_MALLCTL, "arenas.dirty_decay_ms", ctypes.c_ssize_t)
    return None if ms is None else int(ms)


def set_decay_ms(ms: int) -> bool:
    """The library's jemalloc's dirty and muzzy decay, for each arena it has
    and for each it makes later (0: pages go back to the kernel as they are
    freed). Its copy read the start-up variable before any hushmon code ran,
    so this is set at run time. False where the allocator cannot be reached
    or refused the default for new arenas."""
    if _MALLCTL is None:
        return False
    value = ctypes.c_ssize_t(ms)
    kinds = ("dirty", "muzzy")
    ok = all(_write(_MALLCTL, f"arenas.{k}_decay_ms", value) for k in kinds)
    narenas = _read(_MALLCTL, "arenas.narenas", ctypes.c_uint) or 0
    for i in range(narenas):
        for k in kinds:
            # an arena not made yet refuses: it takes the default above
            _write(_MALLCTL, f"arena.{i}.{k}_decay_ms", value)
    return ok


def purge_freed_pages(con: duckdb.DuckDBPyConnection) -> None:
    """Every jemalloc of the process gives its freed pages back as it frees
    them: the library's by :func:`set_decay_ms` (its copy started with the
    import, before this), the extensions' copies by their start-up
    variable, which must be in the environment before they load. Where the
    site set that variable itself, its value stands for every copy, and the
    library's background thread (DuckDB's own runtime switch) gives pages
    back as the site's decay says. Child processes inherit the variable,
    which tunes only DuckDB's allocator.

    Why at once and not after jemalloc's 1 s decay: the decay leaves a
    long-running store process holding whatever its last seconds freed, and
    a collector's lake transactions free tens of MiB each (1000 agents: the
    library kept 6-44 MiB freed, the swings of its resident size, with no
    measurable CPU saved; docs/transport.md)."""
    os.environ.setdefault(CONF_ENV, PURGE_CONF)
    con.execute("SET allocator_background_threads = true").fetchall()
    if _SITE_CONF is None:
        set_decay_ms(0)
