"""Alpha spending for sequential looks at accumulating data.

Testing after every new run and stopping at the first p < alpha inflates the
false-positive rate far above alpha. Here the total alpha is spread over the
planned number of runs (linear spending: alpha * k / k_max may have been
spent after run k), and each look tests at the alpha still unspent. A look is
taken only when the test can reject at all there — its smallest attainable
p-value, which depends only on the design (the sample sizes), is within the
unspent alpha; otherwise the alpha carries over to later looks. By the union
bound the probability of any false detection is at most the sum of the levels
tested at, which never exceeds alpha.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Look:
    index: int  # runs so far
    level: float  # alpha tested at (0: no test possible here)
    p_value: float | None
    rejected: bool


@dataclass
class AlphaSpender:
    alpha: float
    max_runs: int
    spent: float = 0.0
    looks: list[Look] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if self.max_runs < 1:
            raise ValueError("max_runs must be at least 1")

    def available(self, runs: int) -> float:
        """Alpha that may be used at a look after `runs` runs."""
        budget = self.alpha * min(runs, self.max_runs) / self.max_runs
        return max(0.0, budget - self.spent)

    def look(self, runs: int, min_attainable_p: float, test: Callable[[], float]) -> Look:
        """Tests (calls `test` for a p-value) if it can reject here; spends
        the level tested at."""
        level = self.available(runs)
        if min_attainable_p > level:
            result = Look(runs, 0.0, None, False)
        else:
            p = test()
            self.spent += level
            result = Look(runs, level, p, p <= level)
        self.looks.append(result)
        return result
