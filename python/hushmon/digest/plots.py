"""The digest's figures (matplotlib; the page inlines them as SVG)."""

from __future__ import annotations

import warnings
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from hushmon.digest.jobdata import JobData
from hushmon.digest.states import States

STATE_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
]


def _scale(sensor: str) -> tuple[float, str]:
    if "bytes" in sensor:
        return 1e-6, "MB" + ("/s" if sensor.endswith("per_s") else "")
    if "flops" in sensor:
        return 1e-6, "MFLOPS"
    if sensor.endswith("_pct"):
        return 1.0, "%"
    if sensor.endswith("_per_s"):
        return 1.0, "/s"
    return 1.0, ""


MAX_POINTS = 900  # per time series plot: enough for the eye, small SVG


def _buckets(n: int) -> np.ndarray | None:
    """Start indices of equal buckets when a series has more than MAX_POINTS periods."""
    if n <= MAX_POINTS:
        return None
    return np.linspace(0, n, MAX_POINTS + 1).astype(int)[:-1]


def _reduce(v: np.ndarray, starts: np.ndarray | None, how: str) -> np.ndarray:
    """Bucketed series keeping the envelope (min of mins, max of maxes, mean of means)."""
    if starts is None:
        return v
    ufunc = {"min": np.fmin, "max": np.fmax, "avg": np.add}[how]
    with np.errstate(all="ignore"):
        out = ufunc.reduceat(np.nan_to_num(v, nan=np.nan), starts)
        if how == "avg":
            out = out / np.diff(np.append(starts, len(v)))
    return out


def band(job: JobData, sensors: list[str]) -> Figure:
    """min / avg / max across nodes over time, one panel per sensor."""
    fig, axes = plt.subplots(
        len(sensors), 1, figsize=(10, 1.7 * len(sensors)), sharex=True, squeeze=False
    )
    t = job.seconds
    for ax, s in zip(axes[:, 0], sensors, strict=True):
        st = job.stats[s]
        k, unit = _scale(s)
        ax.fill_between(
            t,
            st.min * k,
            st.max * k,
            color="#9ecae1",
            alpha=0.7,
            lw=0,
            label="min–max across nodes",
        )
        ax.plot(t, st.avg * k, color="#08519c", lw=0.9, label="average")
        ax.set_ylabel(f"{s}\n{unit}", fontsize=8, rotation=0, ha="right", va="center")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=2)
    axes[-1, 0].set_xlabel("seconds from job start")
    # fixed margins: tight_layout over many panels costs seconds of text layout
    fig.subplots_adjust(left=0.2, right=0.98, top=0.98, bottom=0.5 / len(sensors), hspace=0.15)
    return fig


# A heat map's rows at most: about the pixels a report's figure has in height.
MAX_HEAT_ROWS = 256


def node_rows(m: np.ndarray) -> tuple[np.ndarray, int]:
    """At most MAX_HEAT_ROWS rows: consecutive nodes averaged in groups of k."""
    k = -(-m.shape[0] // MAX_HEAT_ROWS)
    if k == 1:
        return m, 1
    pad = (-m.shape[0]) % k
    padded = np.vstack([m, np.full((pad, m.shape[1]), np.nan)]) if pad else m
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN group stays NaN
        return np.nanmean(padded.reshape(-1, k, m.shape[1]), axis=1), k


def per_node(job: JobData, sensor: str) -> Figure:
    """Node x time heat map of one sensor (one row per node; groups of nodes
    averaged when there are more than a figure has rows of pixels)."""
    m = job.matrix(sensor)
    assert m is not None
    k, unit = _scale(sensor)
    rows, group = node_rows(m)
    fig, ax = plt.subplots(figsize=(10, min(0.16 * len(job.hosts) + 1.2, 4.5)))
    im = ax.imshow(
        rows * k,
        aspect="auto",
        interpolation="nearest",
        cmap="viridis",
        extent=(0, float(job.seconds[-1] + job.period_s), len(job.hosts), 0),
    )
    if len(job.hosts) <= 24:
        ax.set_yticks(np.arange(len(job.hosts)) + 0.5, job.hosts, fontsize=7)
    elif group > 1:
        ax.set_ylabel(f"{len(job.hosts)} nodes\n(rows: means of {group})")
    else:
        ax.set_ylabel(f"{len(job.hosts)} nodes")
    ax.set_xlabel("seconds from job start")
    fig.colorbar(im, ax=ax, label=f"{sensor} {unit}")
    fig.tight_layout()
    return fig


def states_timeline(job: JobData, states: States) -> Figure:
    fig, ax = plt.subplots(figsize=(10, 0.9))
    n = len(states.states)
    cmap = ListedColormap(STATE_COLORS[: max(n, 1)])
    ax.imshow(
        states.labels[np.newaxis, :],
        aspect="auto",
        cmap=cmap,
        vmin=-0.5,
        vmax=max(n, 1) - 0.5,
        interpolation="nearest",
        extent=(0, float(job.seconds[-1] + job.period_s), 0, 1),
    )
    ax.set_yticks([])
    ax.set_xlabel("seconds from job start")
    for s in states.states:
        ax.plot([], [], color=STATE_COLORS[s.id % 8], lw=6, label=f"S{s.id} ({s.share:.0%})")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def scatter_grid(job: JobData, x: str, y: str, states: States, stats: tuple[str, ...]) -> Figure:
    """y against x per period, one panel per across-node statistic, colored by state."""
    fig, axes = plt.subplots(1, len(stats), figsize=(3.6 * len(stats), 3.2), squeeze=False)
    kx, ux = _scale(x)
    ky, uy = _scale(y)
    colors = np.array(STATE_COLORS)[states.labels % 8]
    for ax, stat in zip(axes[0], stats, strict=True):
        vx = getattr(job.stats[x], stat) * kx
        vy = getattr(job.stats[y], stat) * ky
        # rasterized: thousands of points stay a small image inside the SVG
        ax.scatter(vx, vy, s=5, c=colors, alpha=0.6, linewidths=0, rasterized=True)
        ax.set_xlabel(f"{stat} {x} {ux}", fontsize=8)
        ax.set_ylabel(f"{stat} {y} {uy}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def correlation(names: list[str], corr: np.ndarray) -> Figure:
    fig, ax = plt.subplots(figsize=(0.42 * len(names) + 3, 0.42 * len(names) + 2))
    im = ax.imshow(corr, cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    for i in range(len(names) if len(names) <= 10 else 0):
        for j in range(len(names)):
            if np.isfinite(corr[i, j]):
                ax.text(
                    j,
                    i,
                    f"{corr[i, j]:.1f}",
                    ha="center",
                    va="center",
                    fontsize=5.5,
                    color="white" if abs(corr[i, j]) > 0.6 else "black",
                )
    fig.colorbar(im, ax=ax, shrink=0.7, label="Pearson r of across-node averages")
    fig.tight_layout()
    return fig


def link_load(links: list[Any], job: JobData) -> Figure:
    """Each link's transmit and receive over time against its capacity (links.Link)."""
    from hushmon.digest.factors.links import link_params

    near = float(link_params()["near_capacity"])
    fig, axes = plt.subplots(
        len(links), 1, figsize=(10, 1.9 * len(links)), sharex=True, squeeze=False
    )
    t = job.seconds
    for ax, link in zip(axes[:, 0], links, strict=True):
        ax.step(t, link.tx / 1e6, where="post", color="#d62728", lw=1.1, label="transmit")
        ax.step(t, link.rx / 1e6, where="post", color="#1f77b4", lw=0.9, label="receive")
        if link.capacity:
            cap = link.capacity / 1e6
            ax.axhline(cap, color="black", ls="--", lw=0.9, label="capacity")
            ax.axhline(near * cap, color="grey", ls=":", lw=0.9, label=f"{near:.0%} of capacity")
        ax.set_ylabel(f"{link.rack or link.nodes[0]}\nMB/s", fontsize=8, rotation=0, ha="right")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 1.02), ncol=4)
    axes[-1, 0].set_xlabel("seconds from job start")
    fig.tight_layout()
    return fig


def app_timeline(job: JobData, series: dict[str, np.ndarray], sensors: list[str]) -> Figure:
    """The application's own series (libhushmon, slowest rank per period)
    above the system sensors that move with them (job average over nodes)."""
    n = len(series) + len(sensors)
    fig, axes = plt.subplots(n, 1, figsize=(10, 1.7 * n), sharex=True, squeeze=False)
    t = job.seconds
    for ax, (name, y) in zip(axes[: len(series), 0], sorted(series.items()), strict=True):
        ok = np.isfinite(y)
        ax.plot(t[ok], y[ok], color="#a63603", lw=0.9, marker="o", ms=2.5)
        ax.set_ylabel(f"app: {name}\n(slowest rank)", fontsize=8, rotation=0, ha="right")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax, s in zip(axes[len(series) :, 0], sensors, strict=True):
        m = job.matrix(s)
        if m is None:
            continue
        with np.errstate(all="ignore"):
            avg = np.nanmean(m, axis=0)
        k, unit = _scale(s)
        ax.plot(t, avg * k, color="#08519c", lw=0.9)
        ax.set_ylabel(f"{s}\n{unit}", fontsize=8, rotation=0, ha="right", va="center")
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds from job start")
    fig.subplots_adjust(left=0.22, right=0.98, top=0.98, bottom=0.5 / n, hspace=0.15)
    return fig
