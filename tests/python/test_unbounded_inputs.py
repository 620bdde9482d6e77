"""Inputs that used to be taken without a bound, through the real commands:
a host list of a hundred million hosts, a hundred million MPI ranks. Each
is refused in one line with a non-zero exit (a hang fails the timeout)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HUSHMON = [sys.executable, "-m", "hushmon.cli"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["ctl", "status", "--nodes", "n[1-99999999]", "--url", "nats://127.0.0.1:1"],
         "hushmon: host list 'n[1-99999999]' names more than 65,536 hosts"),
        (["ctl", "status", "--nodes", "n[1-300]x[1-300]", "--url", "nats://127.0.0.1:1"],
         "names more than 65,536 hosts"),
        (["ctl", "status", "--nodes", "n[1-" + "9" * 5000 + "]", "--url", "nats://127.0.0.1:1"],
         "(at most 9 digits)"),
        (["bench", "--np", "100000000"], "--np must be 1 .. "),
    ],
)  # fmt: skip
def test_unbounded_input_is_one_line(args: list[str], expected: str) -> None:
    r = subprocess.run([*HUSHMON, *args], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0 and expected in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
