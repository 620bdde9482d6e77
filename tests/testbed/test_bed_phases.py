"""The phases program (c/apps/phases.c) as a Slurm job across two racks: its
phases, reported through libhushmon (hm_phase_begin/end), are the digest's
phases by name and in order, and each gets the main limit the bed can show.

A bed of its own: 2 nodes, one per rack, behind the default 200 Mbit/s rack
uplinks, the spool transport (the per-rack byte counts that measure the
crossed share: testbed/rackcount.py), 0.5-s periods; one rank per node,
four phases of 5 s (10 periods each).

What each phase's limit is and what the bed can show of it:
- transpose (MPI_Alltoall of 4 MiB blocks): every byte crosses the uplink
  between the racks, which runs near its ceiling: the main limit is the
  network (network_bandwidth or topology), [medium] or worse, with an
  estimated loss, and the crossed share is measured, not guessed.
- solve (dense LU per rank, one tiny allreduce per system): CPU-bound; the
  bed shows it as "not the network": the network is not its main limit.
- random_access (table updates larger than the caches): memory-latency
  bound, which takes a PMU's cache-miss or stall counters to show; the bed's
  agents have only a simulated PMU (synthetic rates that do not follow the
  program), so the test asserts only what the sensors can say: not the
  network (as for solve).
- alltoall (8-byte MPI_Alltoall back to back): latency-bound; no sensor
  measures message latency, and a few hundred kB/s is no bandwidth limit:
  the test asserts that network bandwidth is not named its limit. Topology
  may be: one rank per rack, every message crosses the uplinks and pays
  their hops, which is what a latency-bound exchange loses to where its
  partners sit (runs have given it [low] and [medium] topology findings).
The bed's nodes share this machine's CPUs, so the CPU phases' main limit
is often the CPU-sharing finding; that is the bed's truth, not the
program's, and the test does not assert it.

The program exits right after its last phase (no second of lingering): the
agent keeps the job for the period the epilog ends it in, so alltoall's
record, read at the job's end, is in the job's last period (docs/agent.md,
"Jobs"; before, that phase was missing from the digest).

Run under the bed lock (flock /tmp/hushmon-bed.lock); about 45 s of bed
time (up 4 s, job and digest 35 s, down 4 s)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from bedlib import LiveBed, bed_unavailable, bed_up, hushmon

from hushmon.digest.phases import APP, OUTSIDE
from hushmon.paths import build_bin_dir

pytestmark = [pytest.mark.testbed, pytest.mark.slow]

PHASES = ["solve", "transpose", "random_access", "alltoall"]
NETWORK = ("network_bandwidth", "topology")


@pytest.fixture(scope="module")
def phases_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], str, str]]:
    reason = bed_unavailable()
    if reason:
        pytest.skip(reason)
    if not (build_bin_dir() / "phases").exists():
        pytest.skip(f"{build_bin_dir() / 'phases'} is not built")
    with bed_up("--nodes", "2", "--racks", "2", "--period-ms", "500") as (info, data):
        bed = LiveBed(info, data)
        run = hushmon(
            "run", "--data-dir", str(bed.data), "--json", "-", "--",
            "srun", "-N", "2", str(build_bin_dir() / "phases"), "--phase-s", "5",
            timeout=240,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
        paths = json.loads(run.stdout)["digest"]
        assert paths is not None, run.stderr[-3000:]
        digest = json.loads(Path(paths["json"]).read_text())
        report = Path(paths["report"]).read_text()
        # kept after the bed's folder goes, to look at when a test fails
        kept = tmp_path_factory.mktemp("bed_phases")
        (kept / "digest.json").write_text(json.dumps(digest, indent=1))
        (kept / "report.html").write_text(report)
        yield digest, report, run.stderr


def _named(digest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in digest["phases"]["phases"] if p["name"] != OUTSIDE}


def test_the_phases_are_the_programs_in_order(phases_run: tuple) -> None:
    digest, _, stderr = phases_run
    phases = digest["phases"]
    assert phases["source"] == APP, phases["note"]
    assert list(_named(digest)) == PHASES, [p["name"] for p in phases["phases"]]
    for p in _named(digest).values():
        # 5 s each at 0.5-s periods: 10 periods; each boundary is known to half a
        # period, and where two phases both fill a boundary period to half the
        # shorter one takes it (9 and 11 seen at 07:55)
        assert 8 <= p["periods"] <= 12 and not p["not_analyzed"], p
    # the last phase, ended as the program exits, is analyzed like the others
    assert _named(digest)["alltoall"]["main_limit"] is not None, _named(digest)["alltoall"]
    assert "phases (libhushmon):" in stderr


def test_transpose_is_limited_by_the_network_between_the_racks(phases_run: tuple) -> None:
    digest, _, _ = phases_run
    transpose = _named(digest)["transpose"]
    main = transpose["main_limit"]
    assert main is not None and main["factor"] in NETWORK, transpose["findings"]
    assert main["severity"] in ("medium", "high"), main
    assert main["loss"] is not None and main["loss"]["high_share"] > 0.1, main
    # one node per rack: every byte crossed, and the bed's per-rack counts say so
    found = {f["factor"] for f in transpose["findings"]}
    assert "topology" in found, transpose["findings"]
    topology = next(f for f in digest["findings"] if f["factor"] == "topology")
    assert topology["evidence"]["partners"].startswith("measured"), topology["evidence"]
    assert topology["evidence"]["share_that_crossed_racks_at_least"] == 1.0


def test_the_other_phases_are_not_network_bound(phases_run: tuple) -> None:
    """The network is not their main limit. Network findings of their own are
    not ruled out: a phase boundary is known to half a period, and a period of
    the transpose beside the solve gave it a [low] topology finding (0-8 %,
    07:26); at 07:59 the alltoall phase (0.4 MB/s of 8-byte messages) had a
    [medium] topology finding of 0-26 %, reported to the topology factor's
    owner (no uplink ran near its capacity in that phase). At 10:20 (load 7-17)
    the transpose's last period was counted random_access's (transpose 9
    periods, random_access 10): with the CPU finding [low] at 0 %, the main
    limit of random_access was [low] network bandwidth 5-9 % from that one
    period (message_periods 1); at 10:39 solve's, from the transpose's
    first. Such a boundary finding is allowed; the network named from a
    phase's own periods, or above [low], is not. One more is allowed: a
    [low] topology finding for random_access, whose partners are random, so
    that half its messages cross racks (a CI-like run, 2026-11-27 21:46:
    [low] topology 0-9 %, the machine loaded by an upload beside the tests);
    a topology finding is a fair small limit there, as for alltoall."""
    digest, _, _ = phases_run
    spans = {p["name"]: p["spans"] for p in digest["phases"]["phases"]}
    not_limits = {
        "solve": NETWORK,
        "random_access": NETWORK,
        # all of its messages cross racks: topology is a fair limit (docstring)
        "alltoall": ("network_bandwidth",),
    }
    for name, factors in not_limits.items():
        phase = _named(digest)[name]
        main = phase["main_limit"]
        boundary = (
            main is not None
            and main["severity"] == "low"
            and main.get("evidence", {}).get("message_periods", 99) <= 1
        )
        random_partners = (
            name == "random_access"
            and main is not None
            and main["factor"] == "topology"
            and main["severity"] == "low"
        )
        assert main is None or main["factor"] not in factors or boundary or random_partners, (
            name,
            main,
            spans,
        )


class _Rows(HTMLParser):
    """The cells of the table that follows the report's "Phases" heading."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._heading = self._in_phases = self._cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "h2":
            self._heading, self._in_phases = True, False
        elif tag == "tr" and self._in_phases:
            self.rows.append([])
        elif tag in ("td", "th") and self._in_phases:
            self._cell = True
            self.rows[-1].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._cell = False
        elif tag == "table":
            self._in_phases = False

    def handle_data(self, data: str) -> None:
        if self._heading:
            self._in_phases, self._heading = data.strip() == "Phases", False
        elif self._cell:
            self.rows[-1][-1] += data


def test_the_reports_phases_table_names_them(phases_run: tuple) -> None:
    _, report, _ = phases_run
    parser = _Rows()
    parser.feed(report)
    header, *rows = parser.rows
    assert header[0] == "phase" and header[-1] == "main limit", header
    names = [r[0] for r in rows if r[0] != OUTSIDE]
    assert names == PHASES, parser.rows
    transpose = next(r for r in rows if r[0] == "transpose")
    assert "Network" in transpose[-1] or "topology" in transpose[-1], transpose
