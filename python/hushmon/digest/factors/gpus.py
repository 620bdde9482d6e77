"""Per-GPU matrices for the GPU factors (not a factor).

The agent's ``gpu_nvidia`` source writes one series per GPU and field
(``gpu.sm_pct[gpu=0]``, with ``scope=host`` in node scope); the factors
look at every GPU of every node of the job as one row.
"""

from __future__ import annotations

import re

import numpy as np

from hushmon.digest.jobdata import JobData

_GPU_TAG = re.compile(r"gpu=([^,\]]+)")


def per_gpu(job: JobData, field: str) -> tuple[list[str], np.ndarray] | None:
    """Labels ("node001/gpu0") and a (GPUs x periods) matrix of ``gpu.<field>``;
    rows that were never measured are dropped. None when no GPU has the field."""
    labels: list[str] = []
    rows: list[np.ndarray] = []
    for name in sorted(job.base_sensors(f"gpu.{field}")):
        m = job.matrix(name)
        if m is None:
            continue
        tag = _GPU_TAG.search(name)
        gpu = tag.group(1) if tag else "?"
        for h, host in enumerate(job.hosts):
            if np.isfinite(m[h]).any():
                labels.append(f"{host}/gpu{gpu}")
                rows.append(m[h])
    if not rows:
        return None
    return labels, np.vstack(rows)


def aligned(
    job: JobData, fields: tuple[str, ...]
) -> tuple[list[str], dict[str, np.ndarray]] | None:
    """Several fields' GPU x period matrices on the same GPU rows (NaN where a
    GPU lacks a field); the rows are the GPUs of the first field."""
    first = per_gpu(job, fields[0])
    if first is None:
        return None
    labels, m0 = first
    out = {fields[0]: m0}
    for f in fields[1:]:
        other = per_gpu(job, f)
        m = np.full_like(m0, np.nan)
        if other is not None:
            index = {lab: i for i, lab in enumerate(other[0])}
            for i, lab in enumerate(labels):
                if lab in index:
                    m[i] = other[1][index[lab]]
        out[f] = m
    return labels, out


def listing(labels: list[str], mask: np.ndarray, limit: int = 8) -> str:
    names = [lab for lab, on in zip(labels, mask, strict=True) if on]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more if names else "none"
