"""What a rule can read about a stored job: its facts, by dotted name.

From the job's digest.json (``hushmon digest``):

- ``job.duration_s``, ``job.nodes``, ``job.periods``, ``job.period_s``
- ``<sensor>.avg`` / ``.min`` / ``.max`` / ``.node_spread_cv`` for every
  job-wide sensor (``cpu.busy_pct.avg``, ``mem.usage_pct.max``,
  ``gpu.sm_pct.avg``); the per-device series (``cpu.idle_pct[cpu=cpu0]``)
  are left out, their names are not names in a rule
- ``finding.<factor>.severity`` (high/medium/low/info), ``.rank`` (3..0),
  ``.loss_pct`` (the middle of its estimated loss, when it has one) and each
  number or word of its evidence (``finding.imbalance.imbalance``)
- ``job.state`` from the job history's record, when there is one.

A rule names what it needs in ``requires``; a fact the job lacks makes the
rule not apply to it (the GPU rules on a CPU job), not a false tag."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hushmon.errors import HushmonError

SEVERITY_RANK = {"high": 3, "medium": 2, "low": 1, "info": 0}
_STATS = ("avg", "min", "max", "node_spread_cv")


def _plain_name(name: str) -> bool:
    return all(part.isidentifier() for part in name.split("."))


def facts_from_digest(digest: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key in ("duration_s", "periods", "period_s"):
        if isinstance(digest.get(key), int | float):
            facts[f"job.{key}"] = digest[key]
    if isinstance(digest.get("nodes"), list):
        facts["job.nodes"] = len(digest["nodes"])
    for sensor in digest.get("sensors", []):
        name = str(sensor.get("name", ""))
        if not _plain_name(name):
            continue
        for stat in _STATS:
            value = sensor.get(stat)
            if isinstance(value, int | float) and not isinstance(value, bool):
                facts[f"{name}.{stat}"] = value
    for finding in digest.get("findings", []):
        factor = str(finding.get("factor", ""))
        if not factor.isidentifier():
            continue
        severity = str(finding.get("severity", ""))
        prefix = f"finding.{factor}"
        # two findings of one factor: the worse one speaks
        if SEVERITY_RANK.get(severity, -1) < facts.get(f"{prefix}.rank", -1):
            continue
        facts[f"{prefix}.severity"] = severity
        facts[f"{prefix}.rank"] = SEVERITY_RANK.get(severity, 0)
        loss = finding.get("loss")
        if isinstance(loss, dict):
            low, high = loss.get("low_share"), loss.get("high_share", loss.get("low_share"))
            if isinstance(low, int | float) and isinstance(high, int | float):
                facts[f"{prefix}.loss_pct"] = 100 * (low + high) / 2
        for key, value in (finding.get("evidence") or {}).items():
            if str(key).isidentifier() and isinstance(value, int | float | str):
                facts[f"{prefix}.{key}"] = value
    return facts


def read_digest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise HushmonError(f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise HushmonError(f"{path} is not a digest (not a JSON object)")
    return data
