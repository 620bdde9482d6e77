"""The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0.0.

Both are written from the same families; what differs: OpenMetrics names a
counter family without its ``_total`` suffix (the sample keeps it), also
escapes ``"`` in HELP text, and ends with ``# EOF``. Prometheus asks for
OpenMetrics in its Accept header; anything else gets 0.0.4, which every
scraper reads.

Label values are escaped (``\\`` ``"`` and line feeds), never dropped, so a
job id or an application's metric name that came over NATS cannot end a
line or a label early. Values that are not finite are left out: a sensor
that was not measured is absent (docs/formats.md), never 0 or NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TEXT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    """One metric family: its samples share a name, a type and a help text."""

    name: str  # for a counter, without _total
    kind: str  # "gauge" or "counter"
    help: str
    samples: list[tuple[Labels, float]] = field(default_factory=list)

    def add(self, labels: Labels, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            self.samples.append((labels, float(value)))


def wants_openmetrics(accept: str) -> bool:
    """Whether an Accept header asks for OpenMetrics (Prometheus sends
    ``application/openmetrics-text;version=1.0.0,...;q=0.5,text/plain;...``)."""
    for part in accept.split(","):
        kind, _, params = part.strip().partition(";")
        if kind.strip().lower() != "application/openmetrics-text":
            continue
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.strip() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if q > 0:
            return True
    return False


def _label_value(value: str) -> str:
    # a lone surrogate (JSON may carry "\\ud800") is not UTF-8: it becomes '?'
    value = value.encode("utf-8", "replace").decode("utf-8")
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _help(text: str, openmetrics: bool) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n")
    return out.replace('"', '\\"') if openmetrics else out


def _number(value: float) -> str:
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def render(families: list[Family], openmetrics: bool) -> bytes:
    """The exposition of ``families`` (those without samples are left out)."""
    out: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        sample_name = fam.name + "_total" if fam.kind == "counter" else fam.name
        family_name = fam.name if openmetrics else sample_name
        out.append(f"# HELP {family_name} {_help(fam.help, openmetrics)}\n")
        out.append(f"# TYPE {family_name} {fam.kind}\n")
        for labels, value in fam.samples:
            if labels:
                inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels)
                out.append(f"{sample_name}{{{inner}}} {_number(value)}\n")
            else:
                out.append(f"{sample_name} {_number(value)}\n")
    if openmetrics:
        out.append("# EOF\n")
    return "".join(out).encode("utf-8")
