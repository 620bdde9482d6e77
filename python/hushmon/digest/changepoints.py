"""Change points of a job's per-period sensor averages: where its behaviour
shifts (binary segmentation of a multivariate mean-shift model).

k-means states (states.py) group periods that look alike wherever they lie
in time, so a benchmark of five phases whose phases share a look comes out
as two states. Here the time order counts: the series is cut where the
mean of the scaled sensors shifts, each cut chosen where it lowers the
within-segment sum of squares most, and kept only when that drop beats a
BIC-like penalty, so noise makes no phases.

Each column is scaled by its noise (its robust spread around a running
median: an estimate that a step between phases hardly moves),
so one sensor's scale does not outvote the others and the penalty is in
units of that noise.
"""

from __future__ import annotations

import numpy as np

# The smallest segment a cut may leave (periods): shorter ones are the
# job's start or end, or a burst, not a phase a factor can read.
MIN_SEGMENT_PERIODS = 4
MAX_SEGMENTS = 8
# A cut must lower the sum of squares by this many x (columns + 1) x ln(periods):
# BIC counts 1; 3 is stricter, for the autocorrelated noise of 1-s sensors.
PENALTY_FACTOR = 3.0
# Noise units one period of one sensor counts at most.
CLIP_NOISE = 3.0
# The running median the noise is measured around (periods, odd).
NOISE_WINDOW = 2 * MIN_SEGMENT_PERIODS + 1
# MAD -> standard deviation of a normal variable
_MAD_TO_SD = 1.4826


def noise_scaled(x: np.ndarray, window: int = NOISE_WINDOW) -> np.ndarray:
    """Each column divided by its noise: the robust spread of the column around
    its running median over ``window`` periods. A step between phases moves
    the running median with it and hardly adds to that spread; a pattern
    that repeats faster than the window (a message period, a compute period,
    again) is noise here, not a string of phases."""
    n = len(x)
    if n < 3:
        return x.copy()
    half = window // 2
    padded = np.pad(x, ((half, half), (0, 0)), mode="edge")
    runs = np.lib.stride_tricks.sliding_window_view(padded, window, axis=0)[:n]
    resid = x - np.median(runs, axis=-1)
    mad = np.median(np.abs(resid - np.median(resid, axis=0)), axis=0) * _MAD_TO_SD
    # floors: a series of rare spikes (swap, a disk flush) has a MAD of 0 and its
    # spikes would each be a phase, so half the plain spread counts too; a step
    # series without jitter has neither: 2 % of its range then
    scale = np.maximum(np.maximum(mad, 0.5 * resid.std(axis=0)), 0.02 * np.ptp(x, axis=0))
    scale[scale <= 0] = 1.0
    return x / scale


def _best_cut(cum: np.ndarray, cum2: np.ndarray, a: int, b: int, min_len: int) -> tuple[int, float]:
    """The cut c in (a, b) that lowers the segment's sum of squares most, and by how much.

    ``cum`` / ``cum2``: running sums of the rows and of their squares (a leading zero row)."""
    cuts = np.arange(a + min_len, b - min_len + 1)
    if len(cuts) == 0:
        return -1, 0.0

    def sse(lo: np.ndarray | int, hi: np.ndarray | int) -> np.ndarray:
        n = np.asarray(hi - lo, dtype=float)
        s = cum[hi] - cum[lo]
        s2 = cum2[hi] - cum2[lo]
        return np.asarray((s2 - s * s / np.maximum(n, 1)[..., None]).sum(axis=-1))

    whole = float(sse(np.array([a]), np.array([b]))[0])
    parts = sse(np.full(len(cuts), a), cuts) + sse(cuts, np.full(len(cuts), b))
    i = int(np.argmin(parts))
    return int(cuts[i]), whole - float(parts[i])


def segments(
    x: np.ndarray,
    min_len: int = MIN_SEGMENT_PERIODS,
    max_segments: int = MAX_SEGMENTS,
    penalty_factor: float = PENALTY_FACTOR,
) -> list[tuple[int, int]]:
    """[start, end) of each segment of the rows of ``x`` (periods x scaled sensors),
    in time order; one segment when no cut pays its penalty."""
    n = len(x)
    if n < 2 * min_len or x.shape[1] == 0:
        return [(0, n)]
    # clipped: a burst in one sensor (another program's disk flush) counts at most
    # CLIP_NOISE noise units a period, so it cannot pay a cut's penalty alone
    z = noise_scaled(x)
    z = np.clip(z - np.median(z, axis=0), -CLIP_NOISE, CLIP_NOISE)
    cum = np.vstack([np.zeros(z.shape[1]), np.cumsum(z, axis=0)])
    cum2 = np.vstack([np.zeros(z.shape[1]), np.cumsum(z * z, axis=0)])
    penalty = penalty_factor * (z.shape[1] + 1) * np.log(n)
    found = [(0, n)]
    while len(found) < max_segments:
        # the segment whose best cut gains most, if any gains enough
        best: tuple[float, int, int] | None = None
        for i, (a, b) in enumerate(found):
            cut, gain = _best_cut(cum, cum2, a, b, min_len)
            if cut > 0 and gain > penalty and (best is None or gain > best[0]):
                best = (gain, i, cut)
        if best is None:
            break
        _, i, cut = best
        a, b = found[i]
        found[i : i + 1] = [(a, cut), (cut, b)]
    return found
