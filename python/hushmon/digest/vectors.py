"""WEKA-style vectors: one row per period, every sensor's min / avg / max
across nodes in fixed columns (seed 001: "in every vector the same position
holds the same sensor"), exported as CSV, Parquet and ARFF."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from hushmon.digest.jobdata import JobData

STATS = ("min", "avg", "max")


@dataclass
class Vectors:
    time_s: np.ndarray
    columns: list[str]  # '<sensor>:<stat>'
    values: np.ndarray  # periods x columns
    state: np.ndarray | None = None  # state per period, when clustered

    def table(self) -> pa.Table:
        cols: dict[str, pa.Array] = {"time_s": pa.array(self.time_s)}
        if self.state is not None:
            cols["state"] = pa.array([f"S{s}" for s in self.state])
        for i, name in enumerate(self.columns):
            cols[name] = pa.array(self.values[:, i], from_pandas=True)
        return pa.table(cols)


def build_vectors(job: JobData) -> Vectors:
    sensors = job.sensors
    columns = [f"{s}:{st}" for s in sensors for st in STATS]
    values = np.empty((len(job.times_ns), len(columns)))
    for i, s in enumerate(sensors):
        st = job.stats[s]
        values[:, 3 * i] = st.min
        values[:, 3 * i + 1] = st.avg
        values[:, 3 * i + 2] = st.max
    return Vectors(job.seconds, columns, values)


def write_csv(vec: Vectors, path: Path) -> Path:
    pacsv.write_csv(vec.table(), path)
    return path


def write_parquet(vec: Vectors, path: Path) -> Path:
    pq.write_table(vec.table(), path, compression="zstd")
    return path


def _arff_name(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_arff(vec: Vectors, path: Path, relation: str) -> Path:
    """ARFF for WEKA: numeric attributes, '?' for a value not measured."""
    with path.open("w", encoding="utf-8") as f:
        f.write("% hushmon job digest vectors: one instance per period\n")
        f.write(f"@RELATION {_arff_name(relation)}\n\n")
        f.write("@ATTRIBUTE time_s NUMERIC\n")
        if vec.state is not None:
            states = sorted({int(s) for s in vec.state})
            f.write(f"@ATTRIBUTE state {{{','.join(f'S{s}' for s in states)}}}\n")
        for name in vec.columns:
            f.write(f"@ATTRIBUTE {_arff_name(name)} NUMERIC\n")
        f.write("\n@DATA\n")
        # one % per row; NaN (not measured) prints as 'nan' and becomes ARFF's '?'
        fmt = ",".join(
            ["%.3f", *(["%s"] if vec.state is not None else []), *["%.6g"] * len(vec.columns)]
        )
        for r in range(len(vec.time_s)):
            cells: list[object] = [vec.time_s[r]]
            if vec.state is not None:
                cells.append(f"S{int(vec.state[r])}")
            cells.extend(vec.values[r].tolist())
            f.write((fmt % tuple(cells)).replace("nan", "?") + "\n")
    return path
