"""Vectorized line-protocol parsing: numpy finds the structure, Arrow casts.

A batch of lines is one byte buffer. numpy locates every delimiter
(space, comma, equals sign, newline) in a few passes over the bytes, derives
from them where each key, field name, value and timestamp starts and ends,
and checks the line's shape. The value and timestamp substrings are cut out
of the buffer by Arrow (an offsets array that alternates substring / gap,
then a take of every other element) and cast to numbers by Arrow's C++
parsers. No Python code runs per line or per value.

A line goes to the exact parser (:mod:`hushmon.store.lineproto`) instead when
it contains a backslash or a double quote, does not have exactly two spaces,
has fields that do not alternate ``name=value``, has a value that is not a
plain decimal or ``i``-suffixed integer, or has a bad timestamp; the exact
parser then stores it or gives the reason it is invalid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NL, SPACE, COMMA, EQ = 10, 32, 44, 61
_NUMERIC_END = np.zeros(256, dtype=bool)
_NUMERIC_END[list(b"0123456789.")] = True
_NUMBER_RE = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_INTEGER_RE = r"^[+-]?\d+$"


@dataclass
class FastBatch:
    """Parsed values of the fast-path lines; line numbers are 0-based in the batch."""

    n_lines: int
    keys: list[str]  # key_id -> 'measurement,tag=v,...' as written
    names: list[str]  # name_id -> field name
    key_id: np.ndarray  # per value, int32
    name_id: np.ndarray  # per value, int32
    time_ns: np.ndarray  # per value, int64
    value: np.ndarray  # per value, float64
    line: np.ndarray  # per value, int64 (line index in the batch)
    exact_lines: np.ndarray  # lines for the exact parser (int64, sorted)
    line_starts: np.ndarray  # byte offset of every line, plus the buffer end


def _substrings(buf: pa.Buffer, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """buf[starts[i]:ends[i]] as a string array (requires ends[i] <= starts[i+1])."""
    n = len(starts)
    if n == 0:
        return pa.array([], pa.large_string())
    offsets = np.empty(2 * n, dtype=np.int64)
    offsets[0::2] = starts
    offsets[1::2] = ends
    both = pa.LargeStringArray.from_buffers(2 * n - 1, pa.py_buffer(offsets), buf)
    return pc.take(both, pa.array(np.arange(0, 2 * n - 1, 2, dtype=np.int64)))


def _cast_numbers(
    strings: pa.Array, pattern: str, target: pa.DataType
) -> tuple[np.ndarray, np.ndarray]:
    """(values, ok) — Arrow's cast, with a regex pass only when something fails."""
    try:
        values = pc.cast(strings, target)
        return values.to_numpy(zero_copy_only=False), np.ones(len(strings), dtype=bool)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        ok = pc.match_substring_regex(strings, pattern).to_numpy(zero_copy_only=False)
        out = np.zeros(len(strings), dtype=np.float64 if target == pa.float64() else np.int64)
        idx = np.flatnonzero(ok)
        if len(idx):
            good = pc.take(strings, pa.array(idx))
            try:
                out[idx] = pc.cast(good, target).to_numpy(zero_copy_only=False)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                # e.g. an integer beyond 64 bits: leave it to the exact parser
                ok[:] = False
        return out, ok


def parse_batch(data: bytes) -> FastBatch:
    """Parse a buffer of whole lines (it must end with a newline)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    buf = pa.py_buffer(data)
    nl_pos = np.flatnonzero(raw == NL)
    n_lines = len(nl_pos)
    line_starts = np.concatenate(([0], nl_pos + 1)).astype(np.int64)

    pos = np.flatnonzero((raw == NL) | (raw == SPACE) | (raw == COMMA) | (raw == EQ))
    code = raw[pos]
    is_nl = code == NL
    is_sp = code == SPACE
    # line of each delimiter = newlines before it
    line_of = np.cumsum(is_nl, dtype=np.int64) - is_nl
    # spaces before each delimiter within its line
    sp_cum = np.cumsum(is_sp, dtype=np.int32) - is_sp
    nl_idx = np.flatnonzero(is_nl)
    first_idx = np.concatenate(([0], nl_idx[:-1] + 1))  # first delimiter of each line
    sp_before = sp_cum - sp_cum[first_idx][line_of]
    spaces = np.bincount(line_of[is_sp], minlength=n_lines)

    bad = spaces != 2
    lengths = np.diff(line_starts)  # including the newline
    blank = lengths == 1
    comment = np.zeros(n_lines, dtype=bool)
    nonblank = np.flatnonzero(~blank)
    comment[nonblank] = raw[line_starts[:-1][nonblank]] == ord("#")
    special = np.flatnonzero((raw == ord("\\")) | (raw == ord('"')))
    if len(special):
        bad[np.searchsorted(nl_pos, special)] = True

    # Field section: delimiters after the first space, up to and including
    # the second. Their codes must alternate '=' then ',' (or the space).
    in_fields = (sp_before == 1) & ~is_nl
    fidx = np.flatnonzero(in_fields)
    f_line = line_of[fidx]
    f_new = np.flatnonzero(np.diff(f_line, prepend=-1) != 0)
    f_first = np.repeat(f_new, np.diff(np.append(f_new, len(f_line))))
    rank = np.arange(len(fidx)) - f_first
    f_code = code[fidx]
    expect_eq = rank % 2 == 0
    shape_bad = np.where(expect_eq, f_code != EQ, f_code == EQ)
    # each '=' needs a non-empty name before it and a value after it
    eq_at = fidx[expect_eq]
    name_start = pos[eq_at - 1] + 1
    name_end = pos[eq_at]
    value_start = pos[eq_at] + 1
    value_end = pos[eq_at + 1]
    empty = (name_end == name_start) | (value_end == value_start)
    bad[f_line[shape_bad]] = True
    odd_count = np.bincount(f_line, minlength=n_lines) % 2 == 1
    bad |= odd_count  # a line whose fields end on '=' has no value
    v_line = line_of[eq_at]
    bad[v_line[empty]] = True

    skip = blank | comment
    bad &= ~skip
    # values must end in a digit or '.', or be an 'i'-suffixed integer; anything
    # else (booleans, 'u' integers, strings) goes to the exact parser
    last = raw[np.maximum(value_end - 1, 0)]
    is_int = last == ord("i")
    bad[v_line[~(_NUMERIC_END[last] | is_int)]] = True

    keep_v = ~bad[v_line] & ~skip[v_line]
    value_start, value_end = value_start[keep_v], value_end[keep_v]
    name_start, name_end = name_start[keep_v], name_end[keep_v]
    v_line, is_int = v_line[keep_v], is_int[keep_v]

    # timestamps of the good lines: between the second space and the newline
    good_lines = np.flatnonzero(~bad & ~skip)
    second_sp = np.flatnonzero(is_sp & (sp_before == 1))
    ts_start = pos[second_sp[~bad[line_of[second_sp]] & ~skip[line_of[second_sp]]]] + 1
    ts_end = nl_pos[good_lines]
    ts_strings = _substrings(buf, ts_start, ts_end)
    ts_vals, ts_ok = _cast_numbers(ts_strings, _INTEGER_RE, pa.int64())
    line_time = np.zeros(n_lines, dtype=np.int64)
    line_time[good_lines] = ts_vals
    bad[good_lines[~ts_ok]] = True

    values = np.empty(len(value_start), dtype=np.float64)
    ok = np.ones(len(value_start), dtype=bool)
    float_idx = np.flatnonzero(~is_int)
    if len(float_idx):
        fv, fok = _cast_numbers(
            _substrings(buf, value_start[float_idx], value_end[float_idx]),
            _NUMBER_RE,
            pa.float64(),
        )
        values[float_idx], ok[float_idx] = fv, fok & np.isfinite(fv)
    int_idx = np.flatnonzero(is_int)
    if len(int_idx):
        iv, iok = _cast_numbers(
            _substrings(buf, value_start[int_idx], value_end[int_idx] - 1),
            _INTEGER_RE,
            pa.int64(),
        )
        values[int_idx], ok[int_idx] = iv.astype(np.float64), iok
    bad[v_line[~ok]] = True

    keep = ~bad[v_line]
    good_lines = np.flatnonzero(~bad & ~skip)
    first_sp = np.flatnonzero(is_sp & (sp_before == 0))
    line_key_end = np.zeros(n_lines, dtype=np.int64)
    line_key_end[line_of[first_sp]] = pos[first_sp]
    key_strings = _substrings(buf, line_starts[good_lines], line_key_end[good_lines])
    key_enc = pc.dictionary_encode(key_strings)
    line_key = np.full(n_lines, -1, dtype=np.int32)
    line_key[good_lines] = key_enc.indices.to_numpy(zero_copy_only=False)
    name_enc = pc.dictionary_encode(_substrings(buf, name_start[keep], name_end[keep]))
    v_line = v_line[keep]
    return FastBatch(
        n_lines=n_lines,
        keys=key_enc.dictionary.to_pylist(),
        names=name_enc.dictionary.to_pylist(),
        key_id=line_key[v_line],
        name_id=name_enc.indices.to_numpy(zero_copy_only=False).astype(np.int32),
        time_ns=line_time[v_line],
        value=values[keep],
        line=v_line.astype(np.int64),
        exact_lines=np.flatnonzero(bad),
        line_starts=line_starts,
    )
