"""A job's duration in the digest when its period changed midway
(hushmon ctl set period=100ms --job N): the periods' span, not
periods x the median period."""

from __future__ import annotations

import numpy as np
import pytest

from hushmon.digest.jobdata import JobData
from hushmon.store.query import JobInfo


def job(times_s: list[float]) -> JobData:
    times = np.array([round(t * 1e9) for t in times_s], dtype=np.int64)
    info = JobInfo("7", ["n1"], int(times[0]), int(times[-1]), len(times))
    return JobData(info, times, ["n1"], [], np.zeros((0, 1, len(times)), dtype=np.float32))


def test_span_of_a_job_whose_period_changed() -> None:
    # 5 periods of 1 s, then 20 of 100 ms: 6.1 s covered, not 25 x 0.1 s
    times = [float(i) for i in range(5)] + [4.1 + 0.1 * i for i in range(20)]
    data = job(times)
    assert data.period_s == pytest.approx(0.1)
    assert data.span_s == pytest.approx(6.0 + 0.1)


def test_span_of_a_steady_job_and_of_one_period() -> None:
    assert job([10.0, 11.0, 12.0]).span_s == pytest.approx(3.0)
    assert job([10.0]).span_s == pytest.approx(1.0)
