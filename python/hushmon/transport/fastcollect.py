"""The collector's C hot path (``libhushmon_collect.so``, c/transport/collect.h)
seen from Python: a source of :class:`RawGroup` that pulls, checks and reads
raw batches in C and hands their rows over as Arrow columns.

Each column crosses once: the C buffers are reused by the next fetch, so
every column is copied out of them (numpy for numbers, one bytes copy for
the offsets and the characters of a string column) and Arrow wraps those
copies without another. The library is found at ``$HUSHMON_COLLECT_LIB``,
else ``<build>/lib/libhushmon_collect.so`` (built by ``make``).

Use::

    source = FastSource(url)              # binds collect-raw on HM_RAW
    group = source.fetch_group(2048, 64 << 20, 1.0)
    ... store the group (its messages are not acked yet) ...
    source.ack_group()                    # one ack per message, after the commit
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hushmon.errors import HushmonError
from hushmon.paths import build_bin_dir
from hushmon.transport.collect_records import Event
from hushmon.transport.natsserver import COLLECT_RAW, MAX_PAYLOAD_BYTES, RAW_STREAM
from hushmon.transport.raw_group import (
    ACTIVITY_SCHEMA,
    BATCHES_SCHEMA,
    SAMPLES_SCHEMA,
    SERIES_SCHEMA,
    RawGroup,
)

__all__ = ["FastSource", "library_path"]

_ERR_BYTES = 1024
_I64 = ctypes.POINTER(ctypes.c_int64)
_I32 = ctypes.POINTER(ctypes.c_int32)
_U8 = ctypes.POINTER(ctypes.c_uint8)
_F64 = ctypes.POINTER(ctypes.c_double)


class _Strs(ctypes.Structure):
    _fields_ = [("offsets", _I32), ("bytes", ctypes.c_void_p), ("nbytes", ctypes.c_int64)]


class _View(ctypes.Structure):
    """hm_collect_view of collect.h, field for field."""

    _fields_ = [
        ("messages", ctypes.c_int64),
        ("message_bytes", ctypes.c_int64),
        ("n_samples", ctypes.c_int64),
        ("s_series_id", _I64),
        ("s_time_ns", _I64),
        ("s_value", _F64),
        ("s_batch", _I32),
        ("n_series", ctypes.c_int64),
        ("se_id", _I64),
        ("se_host", _Strs),
        ("se_measurement", _Strs),
        ("se_tags", _Strs),
        ("se_field", _Strs),
        ("n_activity", ctypes.c_int64),
        ("a_job", _Strs),
        ("a_host", _Strs),
        ("a_time_ns", _I64),
        ("a_batch", _I32),
        ("n_batches", ctypes.c_int64),
        ("b_host", _Strs),
        ("b_subject", _Strs),
        ("b_epoch", _I64),
        ("b_seq", _I64),
        ("b_lines", _I64),
        ("b_period_ns", _I64),
        ("b_period_valid", _U8),
        ("b_dropped", _I64),
        ("b_replay", _U8),
        ("b_stream_seq", _I64),
        ("b_received_us", _I64),
        ("n_events", ctypes.c_int64),
        ("e_kind", _Strs),
        ("e_host", _Strs),
        ("e_subject", _Strs),
        ("e_reason", _Strs),
        ("e_epoch", _I64),
        ("e_seq", _I64),
        ("e_has_key", _U8),
        ("e_count", _I64),
        ("n_recheck", ctypes.c_int64),
        ("recheck", _I32),
    ]


def library_path() -> Path:
    override = os.environ.get("HUSHMON_COLLECT_LIB")
    if override:
        return Path(override)
    return build_bin_dir().parent / "lib" / "libhushmon_collect.so"


def _load() -> ctypes.CDLL:
    path = library_path()
    if not path.exists():
        raise HushmonError(
            f"{path} not found: run 'make' first (it builds the C collector), "
            "or set HUSHMON_COLLECT_LIB"
        )
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise HushmonError(f"cannot load {path}: {exc}") from exc
    lib.hm_collect_open.restype = ctypes.c_void_p
    lib.hm_collect_open.argtypes = [
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_int64,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.hm_collect_fetch.restype = ctypes.c_int64
    lib.hm_collect_fetch.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.POINTER(_View),
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.hm_collect_ack.restype = ctypes.c_int
    lib.hm_collect_ack.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.hm_collect_in_progress.restype = ctypes.c_int
    lib.hm_collect_in_progress.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.hm_collect_note_stored.restype = ctypes.c_int
    lib.hm_collect_note_stored.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.hm_collect_close.restype = None
    lib.hm_collect_close.argtypes = [ctypes.c_void_p]
    return lib


def _numbers(ptr: Any, n: int, dtype: type) -> np.ndarray:
    """n values copied out of the C buffer at ptr. Not with
    np.ctypeslib.as_array: it makes a ctypes array type of each length (and
    a pointer type to it), and ctypes keeps every type it made for good, so
    a collector whose groups all differ in size grew by ~10 types a group
    (+580 objects a minute at 1000 agents: docs/transport.md, "What the raw
    collector's steps were")."""
    out: np.ndarray = np.empty(n, dtype=dtype)
    if n:
        ctypes.memmove(out.ctypes.data, ptr, out.nbytes)
    return out


def _strings(col: _Strs, n: int) -> pa.Array:
    if n == 0:
        return pa.array([], pa.string())
    offsets = _numbers(col.offsets, n + 1, np.int32)
    data = ctypes.string_at(col.bytes, col.nbytes) if col.nbytes else b""
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _group(v: _View) -> RawGroup:
    ns, nse, na, nb, ne = v.n_samples, v.n_series, v.n_activity, v.n_batches, v.n_events
    samples = pa.Table.from_arrays(
        [
            pa.array(_numbers(v.s_series_id, ns, np.int64)),
            pa.array(_numbers(v.s_time_ns, ns, np.int64)),
            pa.array(_numbers(v.s_value, ns, np.float64)),
            pa.array(_numbers(v.s_batch, ns, np.int32)),
        ],
        schema=SAMPLES_SCHEMA,
    )
    series = pa.Table.from_arrays(
        [
            pa.array(_numbers(v.se_id, nse, np.int64)),
            _strings(v.se_host, nse),
            _strings(v.se_measurement, nse),
            _strings(v.se_tags, nse),
            _strings(v.se_field, nse),
        ],
        schema=SERIES_SCHEMA,
    )
    activity = pa.Table.from_arrays(
        [
            _strings(v.a_job, na),
            _strings(v.a_host, na),
            pa.array(_numbers(v.a_time_ns, na, np.int64)),
            pa.array(_numbers(v.a_batch, na, np.int32)),
        ],
        schema=ACTIVITY_SCHEMA,
    )
    period_ok = _numbers(v.b_period_valid, nb, np.uint8).astype(bool)
    batches = pa.Table.from_arrays(
        [
            _strings(v.b_host, nb),
            pa.array(_numbers(v.b_epoch, nb, np.int64)),
            pa.array(_numbers(v.b_seq, nb, np.int64)),
            pa.array(_numbers(v.b_lines, nb, np.int64)),
            pa.array(_numbers(v.b_period_ns, nb, np.int64), mask=~period_ok),
            pa.array(_numbers(v.b_dropped, nb, np.int64)),
            pa.array(_numbers(v.b_replay, nb, np.uint8).astype(bool)),
            _strings(v.b_subject, nb),
            pa.array(_numbers(v.b_stream_seq, nb, np.int64)),
            pa.array(_numbers(v.b_received_us, nb, np.int64)).cast(pa.timestamp("us")),
        ],
        schema=BATCHES_SCHEMA,
    )
    return RawGroup(samples, series, activity, batches, _events(v, ne), _recheck(v))


def _events(v: _View, n: int) -> list[Event]:
    if n == 0:
        return []
    kinds = _strings(v.e_kind, n).to_pylist()
    hosts = _strings(v.e_host, n).to_pylist()
    subjects = _strings(v.e_subject, n).to_pylist()
    reasons = _strings(v.e_reason, n).to_pylist()
    epochs = _numbers(v.e_epoch, n, np.int64).tolist()
    seqs = _numbers(v.e_seq, n, np.int64).tolist()
    keyed = _numbers(v.e_has_key, n, np.uint8).tolist()
    counts = _numbers(v.e_count, n, np.int64).tolist()
    return [
        Event(
            kinds[i],
            hosts[i],
            subjects[i],
            epochs[i] if keyed[i] else None,
            seqs[i] if keyed[i] else None,
            counts[i],
            reasons[i],
        )
        for i in range(n)
    ]


def _recheck(v: _View) -> list[int]:
    return [int(i) for i in _numbers(v.recheck, v.n_recheck, np.int32).tolist()]


def _text(buf: ctypes.Array[ctypes.c_char]) -> str:
    return buf.value.decode("utf-8", errors="replace")


class FastSource:
    """One binding of the durable consumer (several processes may hold one
    each: the server shares the messages among them)."""

    def __init__(
        self,
        url: str,
        stream: str = RAW_STREAM,
        durable: str = COLLECT_RAW,
        max_batch_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        self._lib = _load()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        handle = self._lib.hm_collect_open(
            url.encode(), stream.encode(), durable.encode(), max_batch_bytes, err, _ERR_BYTES
        )
        if not handle:
            raise HushmonError(_text(err))
        self._handle: int | None = handle
        self._view = _View()
        self.messages = 0  # of the last group
        self.message_bytes = 0

    def fetch_group(self, max_msgs: int, max_bytes: int, timeout_s: float) -> RawGroup:
        """The next group (empty when nothing came within ``timeout_s``).
        The previous group's messages, if not acked, are let go: the server
        delivers them again after its AckWait."""
        handle = self._live()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        got = self._lib.hm_collect_fetch(
            handle,
            max_msgs,
            max_bytes,
            int(timeout_s * 1000),
            ctypes.byref(self._view),
            err,
            _ERR_BYTES,
        )
        if got < 0:
            raise HushmonError(_text(err))
        self.messages = int(got)
        self.message_bytes = int(self._view.message_bytes)
        if got == 0:
            return RawGroup.empty()
        return _group(self._view)

    def ack_group(self) -> None:
        """Acks each message of the last group (call after its commit)."""
        err = ctypes.create_string_buffer(_ERR_BYTES)
        if self._lib.hm_collect_ack(self._live(), err, _ERR_BYTES) != 0:
            raise HushmonError(_text(err))

    def in_progress(self) -> None:
        """Tells the server the last group is still being stored (+WPI per
        message): call it a few times per ack wait while a commit is slow,
        as the Python collector does, so it is not redelivered meanwhile."""
        err = ctypes.create_string_buffer(_ERR_BYTES)
        if self._lib.hm_collect_in_progress(self._live(), err, _ERR_BYTES) != 0:
            raise HushmonError(_text(err))

    def note_stored(self, newest: dict[tuple[str, int], int]) -> None:
        """The newest seq the store holds per (host, epoch) (read at start,
        as LakeWriter.newest_seqs gives it): later batches at or below it
        go to ``recheck``. Batches acked here count by themselves."""
        handle = self._live()
        err = ctypes.create_string_buffer(_ERR_BYTES)
        for (host, epoch), seq in newest.items():
            if self._lib.hm_collect_note_stored(handle, host.encode(), epoch, seq, err, _ERR_BYTES):
                raise HushmonError(_text(err))

    def close(self) -> None:
        if self._handle is not None:
            self._lib.hm_collect_close(self._handle)
            self._handle = None

    def _live(self) -> int:
        if self._handle is None:
            raise HushmonError("the C collector source is closed")
        return self._handle

    def __enter__(self) -> FastSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
