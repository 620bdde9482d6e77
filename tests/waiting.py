"""Waiting for a condition instead of sleeping a quiet machine's time: the
tests run on 3 pytest-xdist workers on a 2-vCPU machine shared with builds,
beds and MPI jobs, where a process that wrote in 1 s alone takes 10."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    check: Callable[[], T], what: str, timeout_s: float = 30.0, step_s: float = 0.1
) -> T:
    """check()'s first true value; an AssertionError naming WHAT (and the
    last value) once timeout_s passed. The limit is the bug's, not the
    expected time: a condition that holds at all holds long before it."""
    deadline_s = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline_s:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {got!r})")
        time.sleep(step_s)
