"""A job's data restricted to some of its periods (one phase), for the factors.

The slice keeps the job's nodes, racks and resolution, and recomputes the
per-period statistics and the derived sensors from the sliced cube, so each
factor reads a phase as it reads a whole job. A phase that lies in one
stretch of periods is a view of the job's cube (no copy); one spread over
several stretches is copied.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hushmon.digest import resolution as res
from hushmon.digest.jobdata import JobData, _nanmean_rows, across_nodes
from hushmon.digest.sensors import add_derived


def period_index(spans: list[tuple[int, int]]) -> np.ndarray | slice:
    """The periods of ``spans`` ([start, end) each): a slice when they are one stretch."""
    if len(spans) == 1:
        return slice(spans[0][0], spans[0][1])
    return np.concatenate([np.arange(a, b) for a, b in spans])


def slice_job(job: JobData, spans: list[tuple[int, int]]) -> JobData:
    """``job`` over the periods of ``spans`` only."""
    idx = period_index(spans)
    times = job.times_ns[idx]
    cube = job.cube[:, :, idx]
    part = JobData(
        info=job.info,
        times_ns=times,
        hosts=job.hosts,
        base_names=job.base_names,
        cube=cube,
        fabric_info=job.fabric_info,
    )
    # what build_digest attached beside the fields (the roofline's ceilings, the
    # machine's; hushmon's own CPU time is the job's, and the energy factor's
    # finding is left out of a phase's); not the factors' caches of the whole job
    fields = {f.name for f in dataclasses.fields(JobData)}
    periods_n = len(job.times_ns)
    for key, value in job.__dict__.items():
        if key not in fields and not key.endswith("_cache"):
            # a hosts x periods array (the agents' CPU time per period) is the
            # phase's periods only, or a factor pairs it with sliced sensors
            per_period = (
                isinstance(value, np.ndarray) and value.ndim == 2 and value.shape[1] == periods_n
            )
            part.__dict__[key] = value[:, idx] if per_period else value
    base = job.resolution
    if base is not None:
        # a binned job's phase: its share of the job's periods
        periods = round(base.periods * len(times) / base.steps) if base.binned else len(times)
        part.resolution = dataclasses.replace(base, steps=len(times), periods=periods)
    else:
        period_s = job.period_s
        part.resolution = res.Resolution(res.RAW, len(times), period_s, period_s, len(times))
    for i, name in enumerate(job.base_names):
        m = cube[i]
        part.stats[name] = across_nodes(m)
        with np.errstate(all="ignore"):
            part.node_means[name] = _nanmean_rows(m)
    add_derived(part)
    return part
