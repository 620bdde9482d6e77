"""The sampling period's bounds are written once in C (c/agent/config.h)
and once in Python (hushmon.period): the two must say the same, and the
agent must take the bounds and refuse one step beyond them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hushmon.period import PERIOD_MS_MAX, PERIOD_MS_MIN


def test_python_and_c_bounds_agree(repo_root: Path) -> None:
    header = (repo_root / "c" / "agent" / "config.h").read_text()
    found = dict(re.findall(r"#define HM_PERIOD_MS_(MIN|MAX) (\d+)", header))
    assert found == {"MIN": str(PERIOD_MS_MIN), "MAX": str(PERIOD_MS_MAX)}


def test_the_agent_takes_the_bounds_and_refuses_beyond(bin_dir: Path, repo_root: Path) -> None:
    agent = str(bin_dir / "hushmon-agent")
    root = str(repo_root / "tests" / "fixtures" / "agent")

    def check(period_ms: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [agent, "--once", "--once-interval-ms", "10", "--root", root, "--sources", "load",
             "--period-ms", str(period_ms)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip

    for ok in (PERIOD_MS_MIN, PERIOD_MS_MAX):
        assert check(ok).returncode == 0, check(ok).stderr
    for bad in (PERIOD_MS_MIN - 1, PERIOD_MS_MAX + 1):
        out = check(bad)
        assert out.returncode == 2 and "period_ms" in out.stderr, out.stderr
