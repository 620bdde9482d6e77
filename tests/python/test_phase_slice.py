"""A phase's slice of a job (digest/phase_slice.py) carries the arrays that
build_digest attached per period (the agents' CPU time per node and period)
sliced like the sensors: the energy factor pairs the two, and an unsliced one
stopped every digest whose job had phases (shapes (4, 5) and (4, 9) on the bed,
2026-11-27 07:04)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hushmon.digest.agent_cpu import agent_cpu_s_by_period, attach_agent_cpu
from hushmon.digest.factors import energy
from hushmon.digest.jobdata import load_job
from hushmon.digest.phase_slice import slice_job
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool

SECONDS = 30


def test_per_period_attachments_are_sliced_with_the_phase(tmp_path: Path) -> None:
    sc = Scenario(nodes=2, seconds=SECONDS, job="j", omit=("hushmon_agent",))
    spool = tmp_path / "spool"
    write_spool(sc, spool)
    for node in range(sc.nodes):
        host = sc.host(node)
        lines = [
            f"rapl,host={host},domain=package-0,zone=intel-rapl:0 energy_j=50,power_w=50 "
            f"{START_NS + i * sc.period_ns}\n"
            f"hushmon_agent,host={host} cpu_us={100 * (i + 1)} {START_NS + i * sc.period_ns}\n"
            for i in range(SECONDS)
        ]
        (spool / f"{host}-{START_NS}-901.lp").write_text("".join(lines), encoding="ascii")
    db = tmp_path / "hushmon.duckdb"
    assert ingest_spool(db, spool).rejected_lines == 0
    job = load_job(db, "j")
    attach_agent_cpu(job, db)
    whole = agent_cpu_s_by_period(job)
    assert whole is not None and whole.shape[1] == len(job.times_ns)
    for spans in ([(5, 12)], [(2, 6), (20, 25)]):
        part = slice_job(job, spans)
        got = agent_cpu_s_by_period(part)
        idx = np.concatenate([np.arange(a, b) for a, b in spans])
        assert got is not None and got.shape == (2, len(idx))
        assert np.array_equal(got, whole[:, idx])
        # the energy factor pairs it with the slice's sensors without a shape error
        energy.own_energy_j(part)
