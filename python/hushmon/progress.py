"""Progress bars for long runs: on a terminal they draw, in a log they stay quiet."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm import tqdm

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
    yield from tqdm(items, desc=desc, total=total, disable=not sys.stderr.isatty(), leave=False)


def bar(desc: str, total: float | None = None, unit: str = "it") -> tqdm:
    """A manually advanced bar (e.g. seconds of a time budget)."""
    return tqdm(desc=desc, total=total, unit=unit, disable=not sys.stderr.isatty(), leave=False)
