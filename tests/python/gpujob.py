"""A synthetic GPU job for the digest's GPU tests: spool lines as the
agent's gpu_nvidia source writes them (docs/formats.md), ingested into a
store. Each pattern is a span of seconds on chosen GPUs, so every
factor's answer is known in advance."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hushmon.store.ingest import ingest_spool

START_NS = 1_732_270_000_000_000_000
CAPACITY = 16 * 1969.2e6  # PCIe gen 4 x16, per direction
GPU = tuple[int, int]  # (node, gpu)


@dataclass
class GpuScenario:
    nodes: int = 2
    gpus: int = 4
    seconds: int = 60
    job: str = "g1"
    idle: list[GPU] = field(default_factory=list)  # SM 0 all job long
    mem_full: dict[GPU, tuple[int, int]] = field(default_factory=dict)  # 97 % in [a, b)
    power_capped: dict[GPU, tuple[int, int]] = field(default_factory=dict)
    hot: dict[GPU, tuple[int, int]] = field(default_factory=dict)
    transfer_bound: dict[GPU, tuple[int, int]] = field(default_factory=dict)  # rx 85 %, SM 20


def _in(spans: dict[GPU, tuple[int, int]], key: GPU, t: int) -> bool:
    span = spans.get(key)
    return span is not None and span[0] <= t < span[1]


def gpu_line(sc: GpuScenario, node: int, gpu: int, t: int) -> str:
    key = (node, gpu)
    sm = 0.0 if key in sc.idle else 90.0 + (t % 3)
    mem_pct = 97.0 if _in(sc.mem_full, key, t) else 50.0
    capped, hot = _in(sc.power_capped, key, t), _in(sc.hot, key, t)
    clock = 1400 if capped or hot else 1980
    rx = 0.85 * CAPACITY if _in(sc.transfer_bound, key, t) else 2e9
    if _in(sc.transfer_bound, key, t):
        sm = 20.0
    fields = (
        f"sm_pct={sm},mem_util_pct={sm / 2},mem_used_pct={mem_pct},"
        f"mem_total_bytes=85899345920,power_w={700 if capped else 450},"
        f"sm_clock_mhz={clock},temp_c={88 if hot else 65},"
        f"throttle_power={int(capped)}i,throttle_thermal={int(hot)}i,throttle_hw=0i,"
        f"pcie_tx_bytes_per_s=1e9,pcie_rx_bytes_per_s={rx},pcie_capacity_bytes_per_s={CAPACITY}"
    )
    return f"gpu,host=node{node:03d},gpu={gpu} {fields} {START_NS + t * 1_000_000_000}\n"


def gpu_store(sc: GpuScenario, folder: Path) -> Path:
    spool = folder / "spool"
    spool.mkdir(parents=True, exist_ok=True)
    for node in range(sc.nodes):
        host = f"node{node:03d}"
        lines = []
        for t in range(sc.seconds):
            ts = START_NS + t * 1_000_000_000
            lines.append(f"cpu,host={host},cpu=total user_pct=20,system_pct=2,idle_pct=78 {ts}\n")
            lines.extend(gpu_line(sc, node, g, t) for g in range(sc.gpus))
            lines.append(f"job,host={host},job={sc.job} active=1i {ts}\n")
        (spool / f"{host}-{START_NS}-0.lp").write_text("".join(lines), encoding="ascii")
    db = folder / "hushmon.duckdb"
    report = ingest_spool(db, spool)
    assert not report.rejected_lines, report.rejected[:3]
    return db
