"""collectd (Debian collectd-core) at one period, a few standard plugins
(cpu per CPU, load, memory, disk, interface) and the csv writer, the way a
small site would run it."""

from __future__ import annotations

import shutil
from pathlib import Path

from hushmon.errors import HushmonError
from hushmon.overhead.modes.base import Processes, spawn, wait_until

EXE = "collectd"
PLUGIN_DIR = Path("/usr/lib/collectd")

CONF = """Interval {interval}
BaseDir "{work}"
PIDFile "{work}/collectd.pid"
PluginDir "{plugins}"
TypesDB "/usr/share/collectd/types.db"
LoadPlugin cpu
LoadPlugin load
LoadPlugin memory
LoadPlugin disk
LoadPlugin interface
LoadPlugin csv
<Plugin cpu>
  ReportByCpu true
  ValuesPercentage true
</Plugin>
<Plugin csv>
  DataDir "{work}/csv"
</Plugin>
"""


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
        conf.write_text(CONF.format(interval=period_s, work=work, plugins=PLUGIN_DIR))
        log = work / "collectd.log"
        proc = spawn([exe, "-f", "-C", str(conf)], log)
        # Ready once the csv writer has written: every plugin has read once.
        csv = work / "csv"
        wait_until(lambda: csv.is_dir() and any(csv.rglob("*-*")), proc, EXE, log)
        return Processes([proc])


MODE = Collectd()
