"""ctypes binding of libhushmon (c/libhushmon/hushmon.h, docs/libhushmon.md).

The library is found at ``$HUSHMON_LIB``, else ``<build>/lib/libhushmon.so``
beside the built programs, else by the system loader (an installed
``libhushmon.so.1``). Every call returns at once; with no agent running the
calls do nothing. ::

    from hushmon.app import Hushmon
    hm = Hushmon()
    with hm.phase("solve"):
        ...
    hm.metric("iter_time_s", 0.012)

Control messages (``hushmon ctl app NAME COMMAND --job ID``) reach a
callback registered with :meth:`Hushmon.on_control`, from :meth:`Hushmon.poll`
on the thread that calls it (docs/libhushmon.md, "Control").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.paths import build_bin_dir


class _Stats(ctypes.Structure):
    _fields_ = [
        ("records", ctypes.c_uint64),
        ("sent_records", ctypes.c_uint64),
        ("dropped_records", ctypes.c_uint64),
        ("messages", ctypes.c_uint64),
        ("connected", ctypes.c_int),
    ]


# int fn(const char *command, const char *args, void *user_data)
_CONTROL_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
# A control callback: (command, args) -> 0 or None when done, else a status.
ControlCallback = Callable[[str, str], "int | None"]
# The C callback the library holds: kept alive here while registered (the
# registration is the process's, like the library's connection).
_registered: list[object] = []


@dataclass(frozen=True)
class HushmonStats:
    records: int
    sent_records: int
    dropped_records: int
    messages: int
    connected: bool


def _candidates() -> list[str]:
    env = os.environ.get("HUSHMON_LIB")
    if env:
        return [env]
    built = build_bin_dir().parent / "lib" / "libhushmon.so"
    found = ctypes.util.find_library("hushmon")
    return [str(built)] + ([found] if found else []) + ["libhushmon.so.1"]


def load() -> ctypes.CDLL:
    """The shared library with its prototypes set, or a HushmonError."""
    errors = []
    for name in _candidates():
        if "/" in name and not Path(name).is_file():
            errors.append(f"{name}: not found")
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError as exc:
            errors.append(str(exc))
            continue
        c_str, c_dbl = ctypes.c_char_p, ctypes.c_double
        protos: dict[str, tuple[list[type], type | None]] = {
            "hm_open": ([], ctypes.c_int),
            "hm_close": ([], None),
            "hm_flush": ([], None),
            "hm_metric": ([c_str, c_dbl], None),
            "hm_event": ([c_str, c_str], None),
            "hm_phase_begin": ([c_str], None),
            "hm_phase_end": ([c_str], None),
            "hm_profile_dump": (
                [c_str, ctypes.POINTER(c_str), ctypes.POINTER(c_dbl), ctypes.c_size_t],
                None,
            ),
            "hm_rank": ([], ctypes.c_int),
            "hm_size": ([], ctypes.c_int),
            "hm_stats_get": ([ctypes.POINTER(_Stats)], None),
            "hm_on_control": ([_CONTROL_FN, ctypes.c_void_p], ctypes.c_int),
            "hm_poll": ([], ctypes.c_int),
        }
        for fname, (args, res) in protos.items():
            fn = getattr(lib, fname)
            fn.argtypes = args
            fn.restype = res
        return lib
    raise HushmonError(
        "libhushmon not found (" + "; ".join(errors) + "): run 'make' or set HUSHMON_LIB"
    )


class Hushmon:
    """One process's connection to the agent (the library's, shared by all
    Hushmon objects of the process)."""

    def __init__(self, lib: ctypes.CDLL | None = None) -> None:
        self._lib = lib if lib is not None else load()
        self.connected = self._lib.hm_open() == 0

    def metric(self, name: str, value: float) -> None:
        self._lib.hm_metric(name.encode(), float(value))

    def event(self, name: str, text: str = "") -> None:
        self._lib.hm_event(name.encode(), text.encode())

    def phase_begin(self, name: str) -> None:
        self._lib.hm_phase_begin(name.encode())

    def phase_end(self, name: str) -> None:
        self._lib.hm_phase_end(name.encode())

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.phase_begin(name)
        try:
            yield
        finally:
            self.phase_end(name)

    def profile_dump(
        self, prefix: str, values: Sequence[float], names: Sequence[str] | None = None
    ) -> None:
        if names is not None and len(names) != len(values):
            raise ValueError("profile_dump: names and values differ in length")
        n = len(values)
        vals = (ctypes.c_double * n)(*values)
        cnames = (ctypes.c_char_p * n)(*[s.encode() for s in names]) if names else None
        self._lib.hm_profile_dump(prefix.encode(), cnames, vals, n)

    def flush(self) -> None:
        self._lib.hm_flush()

    def close(self) -> None:
        self._lib.hm_close()

    def stats(self) -> HushmonStats:
        s = _Stats()
        self._lib.hm_stats_get(ctypes.byref(s))
        return HushmonStats(
            int(s.records),
            int(s.sent_records),
            int(s.dropped_records),
            int(s.messages),
            bool(s.connected),
        )

    @property
    def rank(self) -> int:
        return int(self._lib.hm_rank())

    @property
    def size(self) -> int:
        return int(self._lib.hm_size())

    def on_control(self, callback: ControlCallback | None) -> bool:
        """Registers the process's control callback (None: stop). It runs in
        :meth:`poll`; an exception in it is reported to the sender as status 1,
        never raised through the library. Returns whether an agent is there."""
        if callback is None:
            rc = self._lib.hm_on_control(_CONTROL_FN(), None)  # a NULL function pointer
            _registered.clear()
            return rc == 0

        def trampoline(command: bytes, args: bytes, _user: int | None) -> int:
            try:
                status = callback(command.decode(errors="replace"), args.decode(errors="replace"))
            except Exception:  # noqa: BLE001 - the sender gets the failure as status 1
                return 1
            return int(status or 0)

        c_fn = _CONTROL_FN(trampoline)
        rc = self._lib.hm_on_control(c_fn, None)
        _registered[:] = [c_fn]
        return rc == 0

    def poll(self) -> int:
        """Delivers the control messages that arrived; returns how many."""
        return int(self._lib.hm_poll())
