"""hushmon-agent's gpu_nvidia source as a command, on the fake NVML
(tests/fake_nvml, built as build/tests/fake_nvml/libnvidia-ml.so.1): GPU
lines with --once; without NVML one notice, no lines, exit 0. The error
cases (GPU lost, permission denied, unsupported fields) are in
tests/c/test_agent_gpu.c, which also runs under ASan/UBSan."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from test_agent_once import parse_lines

SCRIPT = Path(__file__).resolve().parents[1] / "fake_nvml" / "two_gpus.nvml"


@pytest.fixture(scope="module")
def fake_nvml(bin_dir: Path) -> Path:
    lib = bin_dir.parent / "tests" / "fake_nvml" / "libnvidia-ml.so.1"
    if not lib.is_file():
        pytest.fail(f"{lib} missing: run 'make' before the tests")
    return lib


def agent(bin_dir: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--once", "--sink", "stdout", "--host", "n1", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={**os.environ, **env},
    )


def test_fake_nvml_gives_gpu_lines(bin_dir: Path, fake_nvml: Path) -> None:
    # The default name, found through the loader's path as on a GPU node.
    env = {"HM_FAKE_NVML_SCRIPT": str(SCRIPT), "LD_LIBRARY_PATH": str(fake_nvml.parent)}
    proc = agent(bin_dir, "--sources", "gpu_nvidia", "--once-interval-ms", "1000", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = parse_lines(proc.stdout)
    gpus = {x.tags["gpu"]: x.fields for x in lines if x.m == "gpu"}
    assert set(gpus) == {"0", "1"}
    g0, g1 = gpus["0"], gpus["1"]
    assert g0["sm_pct"] == 97 and g1["sm_pct"] == 0
    assert g0["throttle_power"] == 1 and g1["throttle_power"] == 0
    # Counters of the fake grow per second of the real clock; the agent's rate
    # is off only by a preemption between its clock reading and the fake's.
    assert g0["pcie_rx_bytes_per_s"] == pytest.approx(24e9, rel=0.25)
    assert g0["power_avg_w"] == pytest.approx(698, rel=0.25)
    assert g0["pcie_capacity_bytes_per_s"] == pytest.approx(16 * 3938.5e6)
    assert "pcie_rx_bytes_per_s" not in g1  # not supported: absent, not 0
    # GPM, between the two samples --once takes (the script's values)
    assert g0["dram_bw_util_pct"] == 78 and g0["fp32_util_pct"] == 14
    assert g1["dram_bw_util_pct"] == 0 and g1["sm_occupancy_pct"] == 0


def test_library_path_option(bin_dir: Path, fake_nvml: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "agent.toml"
    cfg.write_text(f'sources = ["gpu_nvidia"]\n[gpu]\nnvml_library = "{fake_nvml}"\n')
    proc = agent(bin_dir, "--config", str(cfg), env={"HM_FAKE_NVML_SCRIPT": str(SCRIPT)})
    assert proc.returncode == 0, proc.stderr
    assert {x.tags["gpu"] for x in parse_lines(proc.stdout) if x.m == "gpu"} == {"0", "1"}


def test_without_nvml_one_notice_no_lines(bin_dir: Path, tmp_path: Path) -> None:
    proc = agent(
        bin_dir,
        "--sources",
        "gpu_nvidia",
        "--nvml-library",
        str(tmp_path / "libnvidia-ml.so.1"),
        env={},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    notice = proc.stderr.strip().splitlines()
    assert len(notice) == 1 and "gpu_nvidia: no NVML library" in notice[0], proc.stderr


def test_permission_denied_turns_the_source_off(
    bin_dir: Path, fake_nvml: Path, tmp_path: Path
) -> None:
    script = tmp_path / "denied.nvml"
    script.write_text("init NO_PERMISSION\n")
    proc = agent(
        bin_dir,
        "--sources",
        "gpu_nvidia,load",
        "--nvml-library",
        str(fake_nvml),
        env={"HM_FAKE_NVML_SCRIPT": str(script)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "source gpu_nvidia off: nvmlInit_v2" in proc.stderr
    assert "Insufficient Permissions" in proc.stderr
    assert [x.m for x in parse_lines(proc.stdout)] == ["load"]
