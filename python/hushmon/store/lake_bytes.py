"""Byte counts as people write them: a budget's text and a size's display."""

from __future__ import annotations

import re

from hushmon.errors import HushmonError

# K, M, G, T, P are powers of 1000 (as df -H and disk vendors), KiB... powers of
# 1024; a bare number is bytes. 'B' may follow (500GB).
_UNITS = {
    "": 1,
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "p": 10**15,
    "ki": 2**10,
    "mi": 2**20,
    "gi": 2**30,
    "ti": 2**40,
    "pi": 2**50,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgtp]i?)?b?\s*", re.IGNORECASE)


def parse_bytes(text: str) -> int:
    """``'500G'`` -> 500,000,000,000; ``'1.5TiB'``, ``'200M'``, ``'4096'``.
    Bad text or zero is a HushmonError naming the text."""
    match = _SIZE.fullmatch(text)
    if not match:
        raise HushmonError(
            f"bad size {text!r}: a number and an optional unit K, M, G, T, P "
            "(powers of 1000) or KiB, MiB, GiB, TiB, PiB (powers of 1024), e.g. 500G",
            exit_code=1,
        )
    value = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if value < 1:
        raise HushmonError(f"bad size {text!r}: must be at least 1 byte", exit_code=1)
    return int(value)


def human_bytes(n_bytes: float) -> str:
    """1234567 -> '1.23 MB' (powers of 1000, as parse_bytes reads them back)."""
    value = float(n_bytes)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")
