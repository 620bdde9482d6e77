#!/usr/bin/env bash
# Installs the system packages hushmon needs on Debian 12 (root). Idempotent:
# a package already present is not touched, and apt-get update runs only when
# something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  openmpi-bin libopenmpi-dev          # MPI programs and mpirun
  mpich libmpich-dev                  # MPICH beside it (make test-mpich; mpirun stays Open MPI's)
  nats-server libnats-dev             # online transport (cluster mode)
  libcurl4-openssl-dev                # the agent's bmc_power source: Redfish over HTTPS
  victoria-metrics                    # hushmon collect --forward-lp is tested against the real server
  prometheus                          # hushmon metrics and the Grafana dashboards' PromQL are tested against a real Prometheus
  linux-perf                          # perf stat, for checks of the PMU
  prometheus-node-exporter collectd-core pcp  # agents compared in bench/ and measured by hushmon noise
  chromium                            # headless screenshots of reports in tests
  tmux                                # hushmon top is tested in a tmux pane
  iproute2 procps util-linux          # namespaces, tc, nsenter: the test bed
  slurmctld slurmd slurm-client munge # real Slurm on the test bed
  slurmdbd mariadb-server             # the bed's accounting: sacct shows hushmon's AdminComment (the bed starts its own socket-only MariaDB)
  lammps hpcc                         # real applications for bench/bench_findings.py (the bed's nodes share /usr/bin)
)

# Settings a test of this script points elsewhere (tests/python/test_install_deps.py).
policy_rc=${HUSHMON_POLICY_RC:-/usr/sbin/policy-rc.d}
systemd_dir=${HUSHMON_SYSTEMD_DIR:-/run/systemd/system}
pmns_dir=${HUSHMON_PCP_PMNS:-/var/lib/pcp/pmns}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# pmcd reads the PMNS that its service script builds at first start; the
# noise study starts pmcd itself, so build it here (root only).
pcp_pmns() {
  if [ "$(id -u)" -eq 0 ] && [ -x "$pmns_dir/Rebuild" ] && [ ! -e "$pmns_dir/root" ]; then
    (cd "$pmns_dir" && ./Rebuild -u)
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  pcp_pmns
  echo "install-deps: all system packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root or install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The services these packages bring must not start on install: tests and
# benchmarks start their own instances with their own config.
printf '#!/bin/sh\nexit 101\n' > "$policy_rc"
chmod +x "$policy_rc"
trap 'rm -f "$policy_rc"' EXIT
# pcp's postinst calls systemctl itself (not through policy-rc.d) and fails
# where PID 1 is not systemd (containers, small VMs): a no-op systemctl first
# on the PATH that dpkg gives maintainer scripts. apt runs dpkg with its own
# PATH (APT's DPkg::Path), not ours, so the shim goes there.
dpkg_path=$(apt-config dump DPkg::Path --format '%v%n' 2>/dev/null | head -n 1)
dpkg_path=${dpkg_path:-/usr/sbin:/usr/bin:/sbin:/bin}
apt_opts=()
if [ ! -d "$systemd_dir" ]; then
  shim=$(mktemp -d)
  printf '#!/bin/sh\nexit 0\n' > "$shim/systemctl"
  chmod 755 "$shim" "$shim/systemctl"
  apt_opts=(-o "DPkg::Path=$shim:$dpkg_path")
  trap 'rm -f "$policy_rc"; rm -rf "$shim"' EXIT
fi
log=$(mktemp "${TMPDIR:-/tmp}/hushmon-install-deps.XXXXXX")
# A package left half-configured by an earlier run (the failure above, before
# this fix) makes apt refuse everything until dpkg finishes it.
if [ -n "$(dpkg-query -W -f='${Status}\n' 2>/dev/null | grep -v -e 'ok installed' -e 'not-installed' -e 'config-files' || true)" ]; then
  PATH=${shim:+$shim:}$dpkg_path dpkg --configure -a >>"$log" 2>&1 || true
fi
if ! apt-get install -y -qq --no-install-recommends "${apt_opts[@]}" "${missing[@]}" >>"$log" 2>&1; then
  tail -n 20 "$log" >&2
  echo "install-deps: apt-get install failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
pcp_pmns
echo "install-deps: done"
