"""``hushmon ...`` run as another uid, from a checkout that uid cannot read.

The agent tells users apart by the uid on its socket (SO_PEERCRED at
connect), so a test of who may do what needs a client of another uid. A
clone under a 0700 home (CI) hides the package, the virtual environment
and its wheels from that uid: the client imports everything it needs as
us, then gives up our uid for good (setresuid: real, effective, saved)
before it parses its arguments or touches the socket. Only root may do
that; the tests that use this skip otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_PYTHON = Path(__file__).resolve().parents[1] / "python"

# What `hushmon ctl` imports while it runs (inside its functions), besides
# the command's own module: loaded before the uid changes, since the new
# uid may not be able to read them.
CTL_MODULES = (
    "hushmon.cli",
    "hushmon.transport.ctl_cli",
    "hushmon.transport.ctl",
    "hushmon.transport.slurmjob",
    "hushmon.hostlist",
    "hushmon.errors",
    "shutil",  # argparse's help and error formatter
)

_DROP_AND_RUN = """\
import importlib, os, sys
uid, modules, argv = int(sys.argv[1]), sys.argv[2].split(","), sys.argv[3:]
for name in modules:
    importlib.import_module(name)
from hushmon.cli import main
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
sys.exit(main(argv))
"""


def hushmon_as(
    uid: int, args: Sequence[str], modules: Sequence[str] = CTL_MODULES, timeout_s: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """``hushmon ARGS`` as ``uid`` (and gid ``uid``, no other groups)."""
    env = {**os.environ, "PYTHONPATH": str(REPO_PYTHON)}
    # a folder the new uid may stand in (the checkout may be closed to it)
    with tempfile.TemporaryDirectory(prefix="hm-uid-") as cwd:
        os.chmod(cwd, 0o755)
        return subprocess.run(
            [sys.executable, "-c", _DROP_AND_RUN, str(uid), ",".join(modules), *args],
            capture_output=True, text=True, timeout=timeout_s, check=False, env=env, cwd=cwd,
        )  # fmt: skip
