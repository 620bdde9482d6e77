"""The monitoring modes a study compares, one file each, registered here.

A mode is a :class:`~hushmon.overhead.modes.base.Mode`: ``missing()`` says why
it cannot run on this machine (None when it can), ``start(work)`` starts the
agent and returns a handle whose ``stop()`` ends it. ``none`` starts nothing
and is the baseline every other mode is compared with. Adding a mode is a
new file and one line in MODES.
"""

from __future__ import annotations

import importlib

from hushmon.overhead.modes.base import Mode

BASELINE = "none"

# name -> module defining MODE
MODES: dict[str, str] = {
    "none": "hushmon.overhead.modes.none",
    "hushmon": "hushmon.overhead.modes.hushmon_agent",
    "hushmon_pmu": "hushmon.overhead.modes.hushmon_pmu",
    "node_exporter": "hushmon.overhead.modes.node_exporter",
    "collectd": "hushmon.overhead.modes.collectd",
    "pcp": "hushmon.overhead.modes.pcp",
}


def get(name: str) -> Mode:
    mode: Mode = importlib.import_module(MODES[name]).MODE
    return mode
