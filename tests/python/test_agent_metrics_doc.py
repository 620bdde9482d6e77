"""Each agent source names its fields once, in one list per measurement in its C
file (c/agent/sampler.h, HM_FIELDS); `hushmon-agent --help` prints those lists.
docs/formats.md's table of measurements must name exactly the same fields, so
a field added, renamed or dropped in the code fails here until the docs say so."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

FIELD = re.compile(r"^(?:[a-z][a-z0-9_]*|<event>_per_s)$")
# (measurement, from the `node` source: the node scope's own lines)
Key = tuple[str, bool]


def code_fields(bin_dir: Path) -> dict[Key, set[str]]:
    """Per measurement, the fields the sources' lists name, from --help."""
    out = subprocess.run(
        [str(bin_dir / "hushmon-agent"), "--help"], capture_output=True, text=True, timeout=30
    ).stdout
    sources = out.split("\nSources", 1)[1].split("\nSinks", 1)[0]
    found: dict[Key, set[str]] = {}
    source = ""
    for line in sources.splitlines():
        head = re.match(r"^  [* ] (\S+)\s", line)
        if head:
            source = head.group(1)
            continue
        arrow = re.match(r"^\s+-> ([^:]+): (.*)$", line)
        if not arrow:
            continue
        measurement, fields = arrow.group(1).split()[0], arrow.group(2)
        parts = fields.split("; ") if re.match(r"^\w+:", fields) else [f"{measurement}: {fields}"]
        for part in parts:
            name, names = part.split(": ", 1)
            key = (name, source == "node" and name != "node_cgroup")
            found[key] = set(names.split())
    return found


def doc_fields(repo_root: Path, wanted: set[str]) -> dict[Key, set[str]]:
    """Per measurement of the agent's sources, the field names in backticks
    in docs/formats.md's table (settings like `net.link_bits_per_s` are not
    field names and are left out)."""
    text = (repo_root / "docs" / "formats.md").read_text()
    table = text.split("| measurement | tags | fields | source |", 1)[1].split("\n\n", 1)[0]
    found: dict[Key, set[str]] = {}
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        first = re.match(r"^`(\w+)`(.*)$", cells[0]) if len(cells) >= 3 else None
        if first is None or first.group(1) not in wanted:
            continue
        key = (first.group(1), "node scope" in first.group(2))
        spans = re.findall(r"`([^`]+)`", cells[2].replace("\\|", "|"))
        found[key] = {w for span in spans for w in span.split() if FIELD.match(w)}
    return found


def test_formats_md_names_exactly_the_fields_of_each_source(bin_dir: Path, repo_root: Path) -> None:
    code = code_fields(bin_dir)
    assert ("load", False) in code and ("mem", True) in code and ("gpu_job", False) in code
    docs = doc_fields(repo_root, {m for m, _ in code})
    assert set(docs) == set(code), f"rows missing from docs: {set(code) - set(docs)}"
    drift = {
        key: {
            "not in docs": sorted(code[key] - docs[key]),
            "not in code": sorted(docs[key] - code[key]),
        }
        for key in code
        if code[key] != docs[key]
    }
    assert drift == {}, drift
