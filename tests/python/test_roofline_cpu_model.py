"""The roofline's ceilings matched by the nodes' CPU model (the agent's cpu_info
node metadata) where no probe record's host list names them.

The probe stored one record for "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
[ES], rev=2" with 8 CPUs and the hosts other[1-2]; the job's nodes published
the same model, as the agent's tag spells it (its , = [ ] made spaces), with
8 CPUs: they get that record's roof. node001's agent earlier ran on another
CPU: its latest line before the job's end counts."""

from __future__ import annotations

import json
from pathlib import Path

from hushmon.digest.compare import compare_runs
from hushmon.digest.cpu_models import CpuModel, read_cpu_models
from hushmon.digest.factors import parameters, roofline
from hushmon.digest.jobdata import load_job
from hushmon.probe.ceilings import (
    BY_CPU_MODEL,
    BY_HOST_LIST,
    ceilings_path,
    find_record,
    normal_model,
    save_ceilings,
)
from hushmon.store.ingest import ingest_spool
from hushmon.store.synthetic import START_NS, Scenario, write_spool
from test_factor_roofline import ceilings, spool_job

PROBED = "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz [ES], rev=2"
AS_TAGGED = r"Intel(R)\ Xeon(R)\ Gold\ 6148\ CPU\ @\ 2.40GHz\ ES\ rev\ 2"


def _cpu_info(db: Path, lines: list[tuple[str, str, int, int]]) -> None:
    """(host, model as line protocol, cpus, seconds from the job's start) lines."""
    spool = db.parent / "spool-cpuinfo"
    spool.mkdir()
    text = "".join(
        f"cpu_info,host={h},model={m} family=6i,model_number=85i,sockets=1i,cores=8i,"
        f"cpus={c}i {START_NS + t * 10**9}\n"
        for h, m, c, t in lines
    )
    (spool / f"node000-{START_NS}-1.lp").write_text(text, encoding="ascii")
    assert ingest_spool(db, spool).rejected_lines == 0


def _store_record(db: Path) -> None:
    rec = ceilings(["other[1-2]"])
    rec.cpu_model = PROBED
    save_ceilings(ceilings_path(db.parent), [rec])


def test_nodes_matched_by_their_cpu_model(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(40, 80.0, 1.0), (20, 1.5, 15.0)])
    _cpu_info(
        db,
        [
            ("node000", AS_TAGGED, 8, -3600),
            ("node001", r"Old\ CPU", 8, -7200),  # before a hardware change
            ("node001", AS_TAGGED, 8, -60),
            ("node001", r"Old\ CPU", 8, 3600),  # after the job: does not count
        ],
    )
    _store_record(db)
    job = load_job(db, "j")
    models = read_cpu_models(db, "j", int(job.info.end_ns))
    assert models == {
        "node000": CpuModel(normal_model(PROBED), 8),
        "node001": CpuModel(normal_model(PROBED), 8),
    }
    roofline.attach_ceilings(job, db)
    [f] = roofline.FACTOR.analyze(job, parameters()["roofline"])
    assert f.title.startswith("Roofline: compute-bound")  # a verdict, not "no probe record"
    assert f.evidence["nodes_matched_by_cpu_model"] == "node000, node001"
    assert f.evidence["peak_gflop_per_s"] == [100.0]
    assert "matched by their CPU model" in f.hint


def test_another_cpu_count_or_no_cpu_info_is_no_match(tmp_path: Path) -> None:
    db = spool_job(tmp_path, [(30, 80.0, 1.0)])
    _cpu_info(db, [("node000", AS_TAGGED, 16, -60)])  # node001 has no cpu_info at all
    _store_record(db)
    job = load_job(db, "j")
    roofline.attach_ceilings(job, db)
    [f] = roofline.FACTOR.analyze(job, parameters()["roofline"])
    assert f.title.startswith("Roofline: no probe record")
    assert f.evidence["hosts_without_record"] == ["node000", "node001"]
    assert "CPU model" in f.hint


def test_a_host_list_wins_and_unknown_models_match_nothing() -> None:
    listed = ceilings(["node[000-001]"])
    typed = ceilings(["other1"])
    typed.cpu_model = PROBED
    assert find_record([typed, listed], "node000", normal_model(PROBED), 8) == (
        listed,
        BY_HOST_LIST,
    )
    assert find_record([typed], "node000", normal_model(PROBED), 8) == (typed, BY_CPU_MODEL)
    assert find_record([typed], "node000", normal_model(PROBED), 4) == (None, "")
    unknown = ceilings(["other1"])
    unknown.cpu_model = "unknown"
    assert find_record([unknown], "node000", "unknown", 8) == (None, "")


def _two_runs(tmp: Path) -> Path:
    """Jobs j and k (1000 s later) in one store, each 30 s at 80 GFLOP/s on 1 GB/s
    (compute-bound against the record's 100 GFLOP/s) with RAPL package power."""
    db = tmp / "hushmon.duckdb"
    for name, offset_ns in (("j", 0), ("k", 10**12)):
        sc = Scenario(nodes=2, seconds=30, job=name, omit=("pmu",), start_ns=START_NS + offset_ns)
        spool = tmp / f"spool-{name}"
        write_spool(sc, spool)
        for node in range(sc.nodes):
            host = sc.host(node)
            lines = [f"cpu_info,host={host},model={AS_TAGGED} cpus=8i {sc.start_ns - 10**9}\n"]
            for i in range(30):
                ts = sc.start_ns + i * sc.period_ns
                lines.append(
                    f"pmu,host={host},cpu=total flops_per_s=80e9,mem_bytes_per_s=1e9 {ts}\n"
                    f"rapl,host={host},domain=package-0,zone=intel-rapl:0 "
                    f"energy_j=100,power_w=100 {ts}\n"
                )
            (spool / f"{host}-{sc.start_ns}-pmu.lp").write_text("".join(lines), encoding="ascii")
        assert ingest_spool(db, spool).rejected_lines == 0
    return db


def test_compare_reads_the_ceilings(tmp_path: Path) -> None:
    """compare attaches the store's ceilings (and the nodes' CPU models) to each
    run: both get the same roofline verdict against the same record, beside
    their energy per unit of work."""
    db = _two_runs(tmp_path)
    _store_record(db)
    compare_runs(db, ["j@1", "k@2"], tmp_path / "cmp")
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    for run in data["runs"]:
        roof = run["roofline"]
        assert roof["verdict"] == "compute-bound"
        assert roof["ceilings_file"] == str(ceilings_path(tmp_path))
        assert roof["node_types"] == [f"{PROBED} / 8 CPUs"]
        assert roof["nodes_matched_by_cpu_model"] == "node000, node001"
        assert run["energy_j_per_work"] is not None and run["energy_j_per_work"] > 0
    assert "compute-bound" in (tmp_path / "cmp" / "compare.html").read_text()


def test_compare_without_ceilings_says_so(tmp_path: Path) -> None:
    db = _two_runs(tmp_path)
    compare_runs(db, ["j@1", "k@2"], tmp_path / "cmp")
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [r["roofline"]["records"] for r in data["runs"]] == [0, 0]
    assert all(
        r["roofline"]["verdict"] == "no probe record for the node type" for r in data["runs"]
    )
