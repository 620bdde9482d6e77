"""The baseline: no monitoring agent started by the study."""

from __future__ import annotations

from pathlib import Path

from hushmon.overhead.modes.base import Processes


class NoMonitoring:
    name = "none"
    description = "no agent started (the baseline)"

    def missing(self) -> str | None:
        return None

    def start(self, work: Path, period_s: float) -> Processes:
        return Processes()


MODE = NoMonitoring()
