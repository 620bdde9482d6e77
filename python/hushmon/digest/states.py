"""States of a job: k-means clustering of the per-period vectors (seed 001,
Fig. 11: "67 % of the time low performance with swapping, 21 % medium
performance with disk exchange, 9 % highest performance without").

Columns are the across-node averages of the sensors that vary, scaled to
zero mean and unit variance. k runs from 2 to 8 and the best mean
silhouette wins; below ``MIN_SILHOUETTE`` the job has one state. Each
state is described by the sensors whose mean departs most from the job's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.cluster.vq import kmeans2
from scipy.spatial.distance import cdist

from hushmon.digest.jobdata import JobData
from hushmon.digest.scope import in_node_scope, is_host_wide

K_MAX = 8
MIN_PERIODS = 8  # fewer: one state ("too few periods")
PERIODS_PER_STATE = 3
MIN_STATE_PERIODS = 2
CLIP_Z = 3.0  # scaled features are clipped to +-this many standard deviations
MIN_SILHOUETTE = 0.25
SILHOUETTE_SAMPLE = 1500
SEED = 12345

# Sensors that describe a state in words (the first that vary are used).
_WORDS = {
    "cpu.user_pct": ("user CPU", "%"),
    "cpu.iowait_pct": ("I/O wait", "%"),
    "cpu.idle_pct": ("idle CPU", "%"),
    "pmu.flops_per_s": ("FLOPS", "/s"),
    "network.tx_bytes_per_s": ("network send", "B/s"),
    "network.rx_bytes_per_s": ("network receive", "B/s"),
    "swap.pages_per_s": ("swapping", "pages/s"),
    "disk.bytes_per_s": ("disk traffic", "B/s"),
    "mem.used_pct": ("memory used", "%"),
}


@dataclass
class State:
    id: int
    share: float
    periods: int
    description: str
    means: dict[str, float]  # sensor avg in this state

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "share": round(self.share, 4),
            "periods": self.periods,
            "description": self.description,
            "means": {k: float(f"{v:.6g}") for k, v in self.means.items()},
        }


@dataclass
class States:
    labels: np.ndarray  # state per period
    states: list[State]
    k_tried: dict[int, float]  # k -> silhouette
    sensors: list[str]


def silhouette(x: np.ndarray, labels: np.ndarray, d: np.ndarray | None = None) -> float:
    """Mean silhouette coefficient (Rousseeuw 1987); ``d`` = precomputed distances."""
    ks = np.unique(labels)
    if len(ks) < 2:
        return -1.0
    if d is None:
        d = cdist(x, x)
    a = np.zeros(len(x))
    b = np.full(len(x), np.inf)
    for k in ks:
        in_k = labels == k
        n_k = in_k.sum()
        mean_d = d[:, in_k].sum(axis=1)
        a = np.where(in_k, mean_d / np.maximum(n_k - 1, 1), a)
        b = np.where(in_k, b, np.minimum(b, mean_d / n_k))
    s = (b - a) / np.maximum(np.maximum(a, b), 1e-12)
    # singletons have silhouette 0 by convention
    counts = {k: (labels == k).sum() for k in ks}
    s[np.array([counts[k] == 1 for k in labels])] = 0.0
    return float(s.mean())


def _features(job: JobData) -> tuple[list[str], np.ndarray]:
    """Scaled per-period averages of the derived sensors (the analyzers' CPU, network,
    disk, swap, memory: each measured once, whatever the node calls its devices) that
    vary; all varying sensors when fewer than two derived ones do."""
    from hushmon.digest.sensors import DERIVED

    derived = _scaled(job, [s for s in job.sensors if s in DERIVED])
    if len(derived[0]) >= 2:
        return derived
    node_scope = in_node_scope(job)
    return _scaled(job, [s for s in job.sensors if not (node_scope and is_host_wide(s))])


def _inner(n: int) -> np.ndarray:
    """The periods states are fitted on: without the first and the last, which are
    partial (the job started and ended inside them) and carry its start and end."""
    return np.arange(1, n - 1) if n >= MIN_PERIODS + 2 else np.arange(n)


def _scaled(job: JobData, sensors: list[str]) -> tuple[list[str], np.ndarray]:
    names, cols = [], []
    inner = _inner(len(job.times_ns))
    for s in sensors:
        v = job.stats[s].avg
        if np.isfinite(v).sum() < len(v) * 0.5:
            continue
        v = np.where(np.isfinite(v), v, np.nanmean(v))
        mean, sd = float(np.mean(v[inner])), float(np.std(v[inner]))
        if sd <= 1e-9 * max(1.0, abs(mean)):
            continue  # varies only at the job's start or end
        names.append(s)
        # clipped: one odd period must not make a state alone
        cols.append(np.clip((v - mean) / sd, -CLIP_Z, CLIP_Z))
    return names, (np.column_stack(cols) if cols else np.empty((len(job.times_ns), 0)))


def _describe(job: JobData, in_state: np.ndarray, names: list[str]) -> tuple[str, dict[str, float]]:
    parts, means = [], {}
    for s, (word, unit) in _WORDS.items():
        if not job.has(s):
            continue
        v = job.stats[s].avg
        m_state, m_all = float(np.nanmean(v[in_state])), float(np.nanmean(v))
        means[s] = m_state
        sd = float(np.nanstd(v))
        if sd <= 0 or not np.isfinite(m_state):
            continue
        z = (m_state - m_all) / sd
        level = "high" if z > 0.5 else "low" if z < -0.5 else None
        if level:
            parts.append((abs(z), f"{level} {word} ({_fmt(m_state, unit)} vs {_fmt(m_all, unit)})"))
    parts.sort(reverse=True)
    text = ", ".join(p for _, p in parts[:6]) or "close to the job's average on every sensor"
    return text, means


def _fmt(v: float, unit: str) -> str:
    if unit == "B/s":
        return f"{v / 1e6:.3g} MB/s"
    if unit == "/s":
        return f"{v:.3g}/s"
    return f"{v:.3g}{'' if unit == '%' else ' '}{unit}"


def period_features(job: JobData) -> tuple[list[str], np.ndarray]:
    """The scaled per-period sensor averages states are fitted on (also the
    change points' input, phases.py)."""
    return _features(job)


def describe_periods(job: JobData, mask: np.ndarray) -> tuple[str, dict[str, float]]:
    """Periods of ``mask`` in words: the sensors whose mean departs most from the job's."""
    return _describe(job, mask, [])


def find_states(job: JobData) -> States:
    names, x = _features(job)
    n = len(x)
    rng = np.random.default_rng(SEED)
    k_tried: dict[int, float] = {}
    best_labels = np.zeros(n, dtype=int)
    if x.shape[1] > 0 and n >= MIN_PERIODS:
        sample = np.sort(rng.choice(n, size=min(n, SILHOUETTE_SAMPLE), replace=False))
        dist = cdist(x[sample], x[sample])  # once for every k
        best = MIN_SILHOUETTE
        # at least PERIODS_PER_STATE periods per state on average (a 13 s job of two
        # message and two compute phases at 1 Hz: k up to 3)
        # fitted without the first and last periods (_inner); they join the nearest state
        inner = _inner(n)
        for k in range(2, min(K_MAX, len(inner) // PERIODS_PER_STATE) + 1):
            centroids, fitted = kmeans2(x[inner], k, minit="++", seed=SEED + k)
            sizes = np.bincount(fitted, minlength=k)
            if sizes.min() == 0 or (sizes >= MIN_STATE_PERIODS).sum() < 2:
                continue  # one period standing out alone against all the others
            labels = np.argmin(cdist(x, centroids), axis=1)
            score = silhouette(x[sample], labels[sample], dist)
            k_tried[k] = round(score, 4)
            if score > best:
                best, best_labels = score, labels
    # order states by share, largest first
    ids, counts = np.unique(best_labels, return_counts=True)
    order = ids[np.argsort(-counts)]
    relabel = {int(old): new for new, old in enumerate(order)}
    labels = np.array([relabel[int(v)] for v in best_labels], dtype=int)
    states = []
    for sid in range(len(order)):
        in_state = labels == sid
        desc, means = _describe(job, in_state, names)
        if len(order) == 1:
            desc = (
                "one state: no distinct phases"
                if n >= MIN_PERIODS
                else f"one state: {n} periods are too few to tell phases apart"
            )
        states.append(State(sid, float(in_state.mean()), int(in_state.sum()), desc, means))
    return States(labels, states, k_tried, names)
