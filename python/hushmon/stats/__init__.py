"""Statistics shared by hushmon's studies (noise, overhead, bench reports).

- :mod:`.intervals`: mean with a Student-t interval, median with its
  distribution-free (binomial order-statistic) interval (Hoefler & Belli, SC'15).
- :mod:`.ranktests`: the Mann-Whitney U test, exact under ties (midranks), with
  the asymptotic form for large samples.
- :mod:`.effects`: effect sizes (Cliff's delta, Hodges-Lehmann shift, Hedges' g,
  relative difference of means with a Welch interval).
- :mod:`.sequential`: alpha spending over sequential looks, so stopping early
  keeps the false-positive rate at alpha.
"""

from hushmon.stats.effects import (
    cliffs_delta,
    hedges_g,
    hodges_lehmann_shift,
    relative_difference,
)
from hushmon.stats.intervals import Interval, median_ci, t_ci
from hushmon.stats.ranktests import MannWhitney, mann_whitney_u
from hushmon.stats.sequential import AlphaSpender, Look

__all__ = [
    "AlphaSpender",
    "Interval",
    "Look",
    "MannWhitney",
    "cliffs_delta",
    "hedges_g",
    "hodges_lehmann_shift",
    "mann_whitney_u",
    "median_ci",
    "relative_difference",
    "t_ci",
]
