"""collectd (Debian collectd-core) at one period, a few standard plugins
(cpu per CPU, load, memory, disk, interface) and the csv writer, the way a
small site would run it."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.overhead.modes.base import Processes, spawn, wait_until

EXE = "collectd"
PLUGIN_DIR = Path("/usr/lib/collectd")

# The plugins a small site loads; bench_agent_cost adds the ones that match
# every sensor of hushmon's agent.
STANDARD_PLUGINS = ("cpu", "load", "memory", "disk", "interface")


def config_text(work: Path, period_s: float, plugins: tuple[str, ...] = STANDARD_PLUGINS) -> str:
    """collectd.conf: the plugins, per-CPU percentages, the csv writer into work/csv."""
    loads = "".join(f"LoadPlugin {p}\n" for p in (*plugins, "csv"))
    return (
        f'Interval {period_s}\nBaseDir "{work}"\nPIDFile "{work}/collectd.pid"\n'
        f'PluginDir "{PLUGIN_DIR}"\nTypesDB "/usr/share/collectd/types.db"\n{loads}'
        "<Plugin cpu>\n  ReportByCpu true\n  ValuesPercentage true\n</Plugin>\n"
        f'<Plugin csv>\n  DataDir "{work}/csv"\n</Plugin>\n'
    )


def executable() -> str | None:
    return shutil.which(EXE) or (
        "/usr/sbin/collectd" if Path("/usr/sbin/collectd").exists() else None
    )


class Collectd:
    name = "collectd"
    description = "collectd: cpu (per CPU), load, memory, disk, interface, csv writer"

    def missing(self) -> str | None:
        return None if executable() else "collectd not installed (scripts/install-deps.sh)"

    def start(self, work: Path, period_s: float) -> Processes:
        exe = executable()
        if exe is None:
            raise HushmonError("collectd not installed (scripts/install-deps.sh)", exit_code=1)
        work.mkdir(parents=True, exist_ok=True)
        conf = work / "collectd.conf"
        conf.write_text(config_text(work, period_s))
        log = work / "collectd.log"
        proc = spawn([exe, "-f", "-C", str(conf)], log)
        # Ready once the csv writer has written: every plugin has read once.
        csv = work / "csv"
        wait_until(lambda: csv.is_dir() and any(csv.rglob("*-*")), proc, EXE, log)
        return Processes([proc])


MODE = Collectd()


def main(argv: list[str]) -> int:
    """`python -m hushmon.overhead.modes.collectd DIR [PERIOD_S]`: collectd in
    the foreground with this mode's configuration (for `hushmon noise detect
    --noise-cmd`, which wants one process it can stop)."""
    exe = executable()
    if exe is None:
        print("collectd not installed (scripts/install-deps.sh)", file=sys.stderr)
        return 1
    try:
        period_s = float(argv[2]) if len(argv) == 3 else 1.0
    except ValueError:
        period_s = 0.0
    if not 2 <= len(argv) <= 3 or not 0.01 <= period_s <= 3600:
        print("usage: python -m hushmon.overhead.modes.collectd DIR [PERIOD_S]", file=sys.stderr)
        return 2
    work = Path(argv[1])
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "collectd.conf"
    conf.write_text(config_text(work, period_s))
    os.execv(exe, [exe, "-f", "-C", str(conf)])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
