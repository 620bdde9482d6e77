"""Reading hushmon-bench --json output: the full schema, optional fields, bad files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hushmon.bench.results import load_run, loads_run
from hushmon.errors import HushmonError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"


def minimal_result(**override: object) -> dict[str, object]:
    result: dict[str, object] = {
        "op": "bcast",
        "size": 8,
        "nprocs": 2,
        "n_total": 12,
        "n_valid": 10,
        "n_used": 6,
        "mean": 1e-6,
        "median": 1e-6,
        "se": 1e-8,
        "min": 9e-7,
        "max": 2e-6,
        "ci_level": 0.95,
        "ci_low": 9.8e-7,
        "ci_high": 1.02e-6,
    }
    result.update(override)
    return result


def document(*results: dict[str, object]) -> str:
    return json.dumps({"meta": {"program": "hushmon-bench"}, "results": list(results)})


def test_full_fixture_reads_every_field() -> None:
    run = load_run(FIXTURES / "sync_loop.json")
    assert run.meta.mpi_library == "Open MPI v4.1.4"
    assert run.meta.sync == "ring"
    assert run.meta.sync_rounds_without_improvement == 100
    assert run.meta.clock_offset_residual_max_s == pytest.approx(1.2e-7)
    assert run.meta.hosts == ("node01",)
    assert run.ops() == ["bcast", "allreduce", "barrier", "waitpatternup", "waitpatternnull"]
    assert run.methods() == ["sync", "loop"]
    bcast_sync = next(r for r in run.results if r.op == "bcast" and r.method == "sync")
    assert bcast_sync.size == 1
    assert bcast_sync.global_mean is not None
    assert set(bcast_sync.ci) == {"0.90", "0.95", "0.99"}
    low90, high90 = bcast_sync.ci["0.90"]
    low99, high99 = bcast_sync.ci["0.99"]
    assert low99 < low90 < bcast_sync.mean < high90 < high99
    barrier = next(r for r in run.results if r.op == "barrier" and r.method == "sync")
    assert [p["rank"] for p in barrier.per_rank] == [0, 1]


def test_missing_optional_fields_get_defaults() -> None:
    run = load_run(FIXTURES / "minimal.json")
    assert run.meta.timer is None and run.meta.hosts == () and run.meta.params == {}
    first = run.results[0]
    assert first.method == "sync"  # the synchronized method is the program's default
    assert first.global_mean is None and first.root is None and first.ci == {}
    assert first.per_rank == ()


def test_null_statistics_of_a_result_without_valid_launches_are_nan() -> None:
    run = load_run(FIXTURES / "minimal.json")
    scan = next(r for r in run.results if r.op == "scan")
    assert scan.n_valid == 0
    assert math.isnan(scan.mean) and math.isnan(scan.ci_low)
    assert math.isnan(scan.rse)


def test_rse_is_se_over_mean() -> None:
    run = loads_run(document(minimal_result(mean=2e-6, se=1e-7)))
    assert run.results[0].rse == pytest.approx(0.05)


def test_bad_json_names_file_and_position() -> None:
    with pytest.raises(HushmonError) as err:
        load_run(FIXTURES / "bad_syntax.json")
    message = str(err.value)
    assert "bad_syntax.json" in message
    assert "not valid JSON (line 2" in message
    assert "\n" not in message


def test_bad_field_names_result_and_field() -> None:
    with pytest.raises(
        HushmonError, match=r"results\[1\] \(gather\): field 'mean' must be a number"
    ):
        load_run(FIXTURES / "bad_field.json")


def test_other_programs_output_is_refused() -> None:
    with pytest.raises(HushmonError, match="written by 'osu_bcast'"):
        load_run(FIXTURES / "wrong_program.json")


def test_missing_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(HushmonError, match="no such file"):
        load_run(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[1, 2]", "must be an object"),
        ('{"meta": {}}', "missing 'results'"),
        ('{"results": {}}', "results: must be a list"),
        ('{"results": [3]}', r"results\[0\]: must be an object"),
        ('{"meta": [], "results": []}', "meta: must be an object"),
    ],
)
def test_wrong_shapes_are_refused(text: str, expected: str) -> None:
    with pytest.raises(HushmonError, match=expected):
        loads_run(text, "x.json")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"op": ""}, "field 'op' must be a non-empty string"),
        ({"size": -8}, "field 'size' must be a non-negative integer"),
        ({"size": 1.5}, "field 'size' must be a non-negative integer"),
        ({"n_total": True}, "field 'n_total' must be a number"),
        ({"ci_level": 95}, "ci_level must be in"),
        ({"ci": {"0.95": [1]}}, r"ci\['0.95'\] must be \[low, high\]"),
        ({"per_rank": {"rank": 0}}, "per_rank' must be a list"),
    ],
)
def test_bad_values_are_refused(override: dict[str, object], expected: str) -> None:
    with pytest.raises(HushmonError, match=expected):
        loads_run(document(minimal_result(**override)), "x.json")


def test_missing_required_statistic_is_refused() -> None:
    result = minimal_result()
    del result["n_used"]
    with pytest.raises(HushmonError, match="missing field 'n_used'"):
        loads_run(document(result), "x.json")


def test_output_captured_from_the_real_program_reads() -> None:
    """real_2ranks.json: hushmon-bench --per-rank --raw on 2 ranks, kept as written."""
    run = load_run(FIXTURES / "real_2ranks.json")
    assert run.meta.program == "hushmon-bench"
    assert run.meta.nprocs == 2 and len(run.meta.hosts) >= 1
    assert run.meta.clock_offset_residual_end_max_s is not None
    assert set(run.methods()) == {"sync", "loop"}
    for r in run.results:
        assert [p["rank"] for p in r.per_rank] == [0, 1]
        assert set(r.ci) == {"0.90", "0.95", "0.99"}
        assert (r.global_mean is not None) == (r.method == "sync")


def test_raw_launches_are_read_and_checked() -> None:
    run = load_run(FIXTURES / "real_2ranks.json")
    raw = run.results[0].raw
    assert raw is not None and len(raw.local_s) == len(raw.valid) == run.results[0].n_total
    assert sum(raw.valid) == run.results[0].n_valid
    bad = minimal_result(raw={"local_s": [1e-6, 2e-6], "global_s": [1e-6], "valid": [True, True]})
    with pytest.raises(HushmonError, match="differ in length"):
        loads_run(document(bad), "x.json")
    bad = minimal_result(raw={"local_s": [1e-6], "global_s": [], "valid": [1]})
    with pytest.raises(HushmonError, match="true/false"):
        loads_run(document(bad), "x.json")
