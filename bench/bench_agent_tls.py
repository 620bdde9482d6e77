"""What TLS and a node login cost the agent: hushmon-agent with sink nats
against a plain nats-server (no login) and against a site as `deploy secrets`
makes it (TLS with the site's CA checked, the node's own login, a client
certificate), the same sources and period, in interleaved rounds.

Printed per round and as medians: the agent's CPU time per sample (the run
time of all its threads, from schedstat, over the samples it took), its
threads (under TLS libnats' reader thread serves the connection), resident
memory, and the batches the stream acknowledged; TLS / plain as a ratio.
The machine is shared: the load average is printed with the figures.

    .venv/bin/python bench/bench_agent_tls.py [--seconds 20 --rounds 3 --period-ms 100]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from hushmon.paths import program
from hushmon.transport import natsusers as nu
from hushmon.transport.natsserver import (
    LocalNatsServer,
    NatsServerConfig,
    ensure_streams,
    site_consumers,
)
from hushmon.transport.natstls import TlsFiles

NODE = "n1"
CLIENT_VARS = nu.CLIENT_ENV_VARS


@dataclass
class Round:
    mode: str
    samples: int
    cpu_s: float
    threads: int
    rss_kib: int
    acked: int

    @property
    def us_per_sample(self) -> float:
        return 1e6 * self.cpu_s / self.samples if self.samples else float("nan")


def _status(agent: Path, sock: Path) -> dict[str, str]:
    out = subprocess.run(
        [str(agent), "--socket", str(sock), "--send", "status"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    ).stdout
    return dict(re.findall(r"(\w+)=(\S+)", out))


def _cpu_s(pid: int) -> float:
    """CPU time of every thread of pid, from schedstat (ns; /proc/PID/stat
    counts clock ticks of 10 ms, too coarse for a few hundred us a sample)."""
    total_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total_ns += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total_ns / 1e9


def _proc_status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def run_agent(
    mode: str, url: str, env: dict[str, str], folder: Path, seconds: float, period_ms: int
) -> Round:
    agent = program("hushmon-agent")
    sock = folder / f"{mode}.sock"
    base = {k: v for k, v in os.environ.items() if k not in CLIENT_VARS}
    proc = subprocess.Popen(
        [str(agent), "--socket", str(sock), "--host", NODE, "--period-ms", str(period_ms),
         "--sink", "nats", "--nats-url", url, "--nats-rack", "r1",
         "--spool-dir", str(folder / f"{mode}-spool")],
        env={**base, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while not (sock.exists() and _status(agent, sock).get("connected") == "1"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"bench_agent_tls: the agent ({mode}) did not connect to {url}")
            time.sleep(0.1)
        first = _status(agent, sock)
        cpu0 = _cpu_s(proc.pid)
        time.sleep(seconds)
        last = _status(agent, sock)
        cpu1 = _cpu_s(proc.pid)
        return Round(
            mode,
            int(last.get("samples", 0)) - int(first.get("samples", 0)),
            cpu1 - cpu0,
            _proc_status(proc.pid, "Threads"),
            _proc_status(proc.pid, "VmRSS"),
            int(last.get("acked_seq", 0)) - int(first.get("acked_seq", 0)),
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--period-ms", type=int, default=100)
    args = ap.parse_args()
    if args.seconds <= 0 or args.rounds < 1 or not 10 <= args.period_ms <= 3_600_000:
        print(
            "bench_agent_tls: --seconds > 0, --rounds >= 1, --period-ms 10..3600000",
            file=sys.stderr,
        )
        return 2
    load0 = os.getloadavg()[0]
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        secrets = root / "secrets"
        nu.generate_secrets(secrets, ["127.0.0.1"], ["leaf1"], [NODE], 7422, ["r1"])
        plain_cfg = NatsServerConfig(name="plain", store_dir=root / "js-plain")
        tls_cfg = NatsServerConfig(
            name="site",
            store_dir=root / "js-site",
            users_block=(secrets / nu.USERS_FILE).read_text(),
            tls=TlsFiles.under(secrets / nu.TLS_DIR, "server-127.0.0.1"),
        )
        (root / "plain").mkdir()
        (root / "site").mkdir()
        with (
            LocalNatsServer(plain_cfg, root / "plain") as plain,
            LocalNatsServer(tls_cfg, root / "site") as site,
        ):
            ensure_streams(plain.url, consumers=site_consumers(["r1"]))
            admin = {
                "HUSHMON_NATS_USER": "admin",
                "HUSHMON_NATS_PASSWORD_FILE": str(secrets / "admin.password"),
                **TlsFiles.under(secrets / nu.TLS_DIR, "role-admin").env(),
            }
            saved = {k: os.environ.get(k) for k in admin}
            os.environ.update(admin)
            try:
                ensure_streams(site.url, consumers=site_consumers(["r1"]))
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            node_env = {
                "HUSHMON_NATS_USER": NODE,
                "HUSHMON_NATS_PASSWORD_FILE": str(secrets / nu.NODES_DIR / f"{NODE}.password"),
                **TlsFiles.under(secrets / nu.TLS_DIR, f"node-{NODE}").env(),
            }
            for r in range(args.rounds):
                order = [("plain", plain.url, {}), ("tls", site.url, node_env)]
                for mode, url, env in order if r % 2 == 0 else order[::-1]:
                    one = run_agent(mode, url, env, root, args.seconds, args.period_ms)
                    rounds.append(one)
                    print(
                        f"round {r + 1} {mode:5s}: {one.samples} samples, "
                        f"{one.us_per_sample:.0f} us CPU per sample, {one.threads} threads, "
                        f"RSS {one.rss_kib / 1024:.1f} MiB, {one.acked} batches acked",
                        flush=True,
                    )
    med = {
        mode: statistics.median(r.us_per_sample for r in rounds if r.mode == mode)
        for mode in ("plain", "tls")
    }
    print(
        f"median CPU per sample at {args.period_ms} ms: plain {med['plain']:.0f} us, "
        f"TLS + node login {med['tls']:.0f} us (TLS / plain = {med['tls'] / med['plain']:.2f}); "
        f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
