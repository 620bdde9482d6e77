"""scripts/install-deps.sh on a host without systemd as PID 1 (a container, a
small VM), with apt and dpkg replaced by stand-ins that keep the one rule
that broke it: apt runs dpkg, and so the packages' maintainer scripts, with
the PATH of APT's ``DPkg::Path``, not the caller's. The maintainer script is
pcp's postinst logic (``which systemctl`` then ``systemctl start``), and the
system's systemctl fails as it does without systemd (issue 19)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "install-deps.sh"

# apt-get: 'install' runs every package's postinst with PATH from -o
# DPkg::Path=..., else from apt-config (as apt does); records its arguments.
FAKE_APT_GET = r"""#!/bin/bash
echo "apt-get $*" >> "$FAKE_ROOT/calls"
[ "$1" = update ] && exit 0
dpkg_path=$(apt-config dump DPkg::Path --format '%v%n')
while [ $# -gt 0 ]; do
  if [ "$1" = -o ]; then
    case "$2" in DPkg::Path=*) dpkg_path=${2#DPkg::Path=} ;; esac
    shift
  fi
  shift
done
if ! PATH=$dpkg_path "$FAKE_ROOT/postinst"; then
  echo "dpkg: error processing package pcp" >&2
  exit 100
fi
"""
FAKE_APT_CONFIG = """#!/bin/sh
echo "$FAKE_ROOT/sys/usr/sbin:$FAKE_ROOT/sys/usr/bin"
"""
# dpkg-query: every package is missing; the full status list is clean.
FAKE_DPKG_QUERY = """#!/bin/sh
for a in "$@"; do case "$a" in -*) ;; *) exit 1 ;; esac; done
echo "install ok installed"
"""
POSTINST = """#!/bin/sh
do_systemctl=true
which systemctl >/dev/null 2>&1 || do_systemctl=false
if $do_systemctl; then
  systemctl start pmcd.service || exit 1
fi
echo configured >> "$FAKE_ROOT/calls"
"""
SYSTEMCTL_WITHOUT_SYSTEMD = """#!/bin/sh
echo "System has not been booted with systemd as init system (PID 1). Can't operate." >&2
exit 1
"""


def _exe(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_host(tmp_path: Path) -> Path:
    """A PATH with the stand-ins first; the 'system' dirs of DPkg::Path hold
    the systemctl that fails without systemd and the tools a postinst uses."""
    root = tmp_path
    _exe(root / "bin" / "apt-get", FAKE_APT_GET)
    _exe(root / "bin" / "apt-config", FAKE_APT_CONFIG)
    _exe(root / "bin" / "dpkg-query", FAKE_DPKG_QUERY)
    _exe(root / "bin" / "id", "#!/bin/sh\necho 0\n")  # the script installs only as root
    _exe(root / "postinst", POSTINST)
    _exe(root / "sys" / "usr" / "bin" / "systemctl", SYSTEMCTL_WITHOUT_SYSTEMD)
    for tool in ("which", "sh", "echo", "cat"):
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True)
        if found.stdout.strip().startswith("/"):
            (root / "sys" / "usr" / "bin" / tool).symlink_to(found.stdout.strip())
    return root


def _run(root: Path, systemd: bool) -> subprocess.CompletedProcess[str]:
    systemd_dir = root / "run-systemd"
    if systemd:
        systemd_dir.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{root / 'bin'}:{os.environ['PATH']}",
        "FAKE_ROOT": str(root),
        "TMPDIR": str(root),
        "HUSHMON_POLICY_RC": str(root / "policy-rc.d"),
        "HUSHMON_SYSTEMD_DIR": str(systemd_dir),
        "HUSHMON_PCP_PMNS": str(root / "no-pmns"),
    }
    return subprocess.run(
        ["bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_stand_ins_fail_as_apt_did_without_the_shim(fake_host: Path) -> None:
    """The recorded failure: a postinst run with DPkg::Path finds the
    system's systemctl, whatever the caller's PATH holds."""
    shim = fake_host / "shim"
    _exe(shim / "systemctl", "#!/bin/sh\nexit 0\n")
    env = {
        **os.environ,
        "PATH": f"{shim}:{fake_host / 'bin'}:{os.environ['PATH']}",
        "FAKE_ROOT": str(fake_host),
    }
    r = subprocess.run(
        ["apt-get", "install", "-y", "pcp"], capture_output=True, text=True, env=env, timeout=30
    )
    assert r.returncode == 100
    assert "booted with systemd" in r.stderr


def test_installs_where_pid_1_is_not_systemd(fake_host: Path) -> None:
    r = _run(fake_host, systemd=False)
    assert r.returncode == 0, r.stderr
    assert "install-deps: done" in r.stdout
    calls = (fake_host / "calls").read_text().splitlines()
    install = next(c for c in calls if c.startswith("apt-get install"))
    # the shim goes first on dpkg's own PATH, the system's dirs after it
    assert "DPkg::Path=/" in install
    dpkg_path = install.split("DPkg::Path=", 1)[1].split(" ", 1)[0]
    first, rest = dpkg_path.split(":", 1)
    assert (Path(first) / "systemctl").name == "systemctl" and first != str(fake_host / "bin")
    assert rest == f"{fake_host}/sys/usr/sbin:{fake_host}/sys/usr/bin"
    assert "configured" in calls
    # nothing left behind: the policy-rc.d, the shim and the log are removed
    assert not (fake_host / "policy-rc.d").exists()
    assert not Path(first).exists()
    assert not list(fake_host.glob("hushmon-install-deps.*"))


def test_with_systemd_apt_keeps_its_own_path(fake_host: Path) -> None:
    # with systemd, the system's systemctl works: the stand-in for it says so
    _exe(fake_host / "sys" / "usr" / "bin" / "systemctl", "#!/bin/sh\nexit 0\n")
    r = _run(fake_host, systemd=True)
    assert r.returncode == 0, r.stderr
    install = next(
        c for c in (fake_host / "calls").read_text().splitlines() if c.startswith("apt-get inst")
    )
    assert "DPkg::Path" not in install


def test_a_failed_install_shows_apt_s_last_lines_and_keeps_the_log(fake_host: Path) -> None:
    # a maintainer script that fails for another reason: one clear line and the log
    _exe(fake_host / "postinst", "#!/bin/sh\necho 'pcp: disk full' >&2\nexit 1\n")
    r = _run(fake_host, systemd=False)
    assert r.returncode == 1
    assert "pcp: disk full" in r.stderr
    assert "install-deps: apt-get install failed (full log: " in r.stderr.splitlines()[-1]
    assert len(list(fake_host.glob("hushmon-install-deps.*"))) == 1
