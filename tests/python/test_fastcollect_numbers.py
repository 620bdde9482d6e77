"""fastcollect's copy of a C column into numpy: the values, and no ctypes
type left behind per column length (ctypes keeps every array and pointer
type it made, so a copy that made one per length grew the collector by ~10
types a group)."""

from __future__ import annotations

import ctypes
import gc

import numpy as np

from hushmon.transport.fastcollect import _numbers


def test_a_column_copied_out_holds_its_values_and_no_type_stays_per_length() -> None:
    source = np.arange(5000, dtype=np.int64) * 3
    buf = (ctypes.c_int64 * len(source)).from_buffer(source)
    ptr = ctypes.cast(buf, ctypes.POINTER(ctypes.c_int64))
    assert _numbers(ptr, 0, np.int64).shape == (0,)
    first = _numbers(ptr, 7, np.int64)
    assert first.tolist() == [0, 3, 6, 9, 12, 15, 18]
    source[0] = -1  # a copy: the C buffer is reused by the next group
    assert first[0] == 0
    source[0] = 0
    gc.collect()
    before = len(gc.get_objects())
    for n in range(1, 1001):
        assert _numbers(ptr, n, np.int64)[-1] == 3 * (n - 1)
    gc.collect()
    # 1000 lengths: as_array left two types (and their dicts) for each
    assert len(gc.get_objects()) - before < 100
