"""The vectorized parser agrees with the exact one, and hands over what it cannot take."""

from __future__ import annotations

import numpy as np

from hushmon.store.fastparse import parse_batch
from hushmon.store.lineproto import LineError, parse_line


def _random_lines(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        nf = int(rng.integers(1, 6))
        fields = []
        for j in range(nf):
            kind = rng.integers(0, 4)
            if kind == 0:
                v = f"{rng.normal() * 10.0 ** int(rng.integers(-5, 12)):.6g}"
            elif kind == 1:
                v = f"{int(rng.integers(-(10**12), 10**12))}i"
            elif kind == 2:
                v = f"{rng.random():.17g}"
            else:
                v = str(int(rng.integers(0, 1000)))
            fields.append(f"f{j}={v}")
        tags = ",".join(f"t{k}=v{int(rng.integers(0, 3))}" for k in range(int(rng.integers(0, 3))))
        key = f"m{i % 5},host=h{i % 7}" + (f",{tags}" if tags else "")
        lines.append(f"{key} {','.join(fields)} {1732270000000000000 + i * 10**9}")
    return lines


def test_fast_path_equals_exact_parser() -> None:
    lines = _random_lines(2000)
    fb = parse_batch(("\n".join(lines) + "\n").encode())
    assert len(fb.exact_lines) == 0
    got: dict[tuple[int, str], float] = {}
    for k, nm, line, v in zip(fb.key_id, fb.name_id, fb.line, fb.value, strict=True):
        got[(int(line), fb.names[nm])] = float(v)
        assert lines[int(line)].startswith(fb.keys[k] + " ")
    expected = {}
    for i, line in enumerate(lines):
        p = parse_line(line)
        for name, v in p.fields.items():
            expected[(i, name)] = v
        assert all(fb.time_ns[fb.line == i] == p.time_ns)
    assert got == expected


def test_tricky_lines_go_to_the_exact_parser() -> None:
    lines = [
        "ok,host=a x=1 1",  # 1 fast
        "",  # 2 blank: skipped
        "# comment",  # 3 skipped
        r"esc,host=a\ b x=1 1",  # 4 escape
        'str,host=a s="x y" 1',  # 5 quoted string
        "bool,host=a x=true 1",  # 6 boolean
        "uint,host=a x=3u 1",  # 7 unsigned
        "bad,host=a x=abc 1",  # 8 invalid number
        "bad,host=a x=1",  # 9 no timestamp
        "bad,host=a x=1,y 1",  # 10 field without value
        "bad,host=a x=1 1 2",  # 11 extra section
        "crlf,host=a x=1 1\r",  # 12 CR before newline
        "bad,host=a =1 1",  # 13 empty field name
        "bad,host=a x=1e999 1",  # 14 overflow
        "ok,host=b y=2.5,z=-3i 2",  # 15 fast
    ]
    fb = parse_batch(("\n".join(lines) + "\n").encode())
    assert (fb.exact_lines + 1).tolist() == [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]
    assert sorted((fb.line + 1).tolist()) == [1, 15, 15]
    assert sorted(fb.value.tolist()) == [-3.0, 1.0, 2.5]
    for no in (4, 5, 6, 7, 12):  # valid: the exact parser takes them
        parse_line(lines[no - 1].rstrip("\r"))
    for no in (8, 9, 10, 11, 13, 14):
        try:
            parse_line(lines[no - 1])
        except LineError:
            continue
        raise AssertionError(f"line {no} should be invalid")
