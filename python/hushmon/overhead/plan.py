"""The order of the runs: randomized and interleaved.

Each round holds every (kernel, configuration, mode) once, in an order of
its own drawn from a seeded generator. A slow spell of the machine (another
job, a file system stall) then touches every mode alike instead of all runs
of one mode, and the round a run belonged to is kept so an anomaly can be
traced to its time."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hushmon.overhead.spec import Config


@dataclass(frozen=True)
class PlannedRun:
    index: int  # 0-based position in the whole study
    round: int
    kernel: str
    config: Config
    mode: str


def plan(
    kernels: list[str], configs: list[Config], modes: list[str], runs: int, seed: int
) -> list[PlannedRun]:
    rng = random.Random(seed)
    cells = [(k, c, m) for k in kernels for c in configs for m in modes]
    order: list[PlannedRun] = []
    for r in range(runs):
        rng.shuffle(cells)
        order += [PlannedRun(len(order) + i, r, k, c, m) for i, (k, c, m) in enumerate(cells)]
    return order
