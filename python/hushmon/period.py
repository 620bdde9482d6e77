"""The agent's sampling period bounds, 10 ms .. 1 h, for every Python check
of a period (``hushmon run --period``, ``hushmon testbed up --period-ms``).
The agent checks the same pair (``HM_PERIOD_MS_MIN``/``MAX`` in
``c/agent/config.h``): a period accepted here is one the agent takes."""

from __future__ import annotations

PERIOD_MS_MIN = 10
PERIOD_MS_MAX = 3_600_000
