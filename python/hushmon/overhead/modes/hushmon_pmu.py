"""hushmon-agent with hardware counters by kernel multiplexing.

Where the machine has no PMU (a VM, this test machine) the agent runs its
simulated PMU: then only the agent's own work of reading and computing is
measured, not what counting costs in the CPU (the seed's subject)."""

from __future__ import annotations

from pathlib import Path

from hushmon.overhead.modes.base import Processes
from hushmon.overhead.modes.hushmon_agent import HushmonAgent, start_agent

# The kernel lists a core PMU here on machines that have one.
CPU_PMU = Path("/sys/bus/event_source/devices/cpu")


def backend() -> str:
    return "perf" if CPU_PMU.exists() else "sim"


class HushmonPmu(HushmonAgent):
    name = "hushmon_pmu"
    description = (
        "hushmon-agent, default sources + hardware counters (kernel multiplexing); "
        "simulated PMU where there is none: then only the agent's own work is measured"
    )

    def start(self, work: Path, period_s: float) -> Processes:
        return start_agent(
            work, period_s, ["--pmu", "kernel", "--pmu-backend", backend()], "hushmon-agent"
        )


MODE = HushmonPmu()
