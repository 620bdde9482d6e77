"""The agent's sampling period bounds, 10 ms .. 1 h, for every Python check
of a period (``hushmon run --period``, ``hushmon testbed up --period-ms``).
The agent checks the same pair (``HM_PERIOD_MS_MIN``/``MAX`` in
``c/agent/config.h``): a period accepted here is one the agent takes."""

from __future__ import annotations

PERIOD_MS_MIN = 10
PERIOD_MS_MAX = 3_600_000

# A period's summaries are closed (stored merged, rebuilt from raw data a
# last time: store/lake_summaries_compact.py) this long after it: far above
# the collectors' lag (p99 5 s) and above HM_RAW's duplicate window, which
# natsserver.StreamLimits keeps at most half of it.
SUMMARY_CLOSE_S = 3600
