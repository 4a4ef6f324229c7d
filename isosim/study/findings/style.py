"""The shared style of the finding figures: one seaborn look (whitegrid, paper context, viridis
for n, colorblind colours otherwise), PNG + PDF, and the plot helpers several figures use."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import seaborn as sns

from ...analysis.plotting import PALETTE, new_figure, save_figure, set_style

__all__ = ["PALETTE", "COLORS", "figure", "save", "n_colors", "log2_axis", "mean_curve", "curves_by_n", "curves_by_step",
           "n_star_steps"]

#: distinct colours for a few named series (n is always coloured with the viridis PALETTE)
COLORS = sns.color_palette("colorblind")


def figure(ncols: int = 1, width: float = 4.2, height: float = 3.2):
    set_style()
    return new_figure(ncols, width, height)


def save(fig, out: Path, name: str) -> list[Path]:
    return save_figure(fig, Path(out) / name)


def n_colors(values) -> dict:
    values = sorted(set(int(v) for v in values))
    return dict(zip(values, sns.color_palette(PALETTE, len(values))))


def log2_axis(ax, values) -> None:
    ax.set_yscale("log", base=2)
    ticks = sorted(set(int(v) for v in values))
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()


def mean_curve(ev, metric, by=("n",)):
    """Mean over replicates of ``metric`` against compute, per ``by``."""
    d = ev[ev["compute"] > 0]
    return d.groupby([*by, "compute"], as_index=False)[metric].mean()


def finite(x) -> bool:
    return x is not None and np.isfinite(x)


def curves_by_n(ax, ev, metric, title=None) -> None:
    """Mean ``metric`` against compute, one viridis line per n."""
    curves = mean_curve(ev, metric)
    colors = n_colors(curves["n"])
    for n, g in curves.groupby("n"):
        ax.plot(g["compute"], g[metric], color=colors[n], label=str(n))
    ax.set_xscale("log")
    ax.set_xlabel("compute C (rollouts)")
    if title:
        ax.set_title(title)


def curves_by_step(ax, runs: dict, metric, title=None) -> None:
    """Mean ``metric`` against update steps for a few named runs (``{label: evaluations}``)."""
    for i, (label, ev) in enumerate(runs.items()):
        c = ev[ev["step"] > 0].groupby("step")[metric].mean()
        ax.plot(c.index, c.values, color=COLORS[i], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("update steps M")
    ax.set_ylabel(f"validation {metric}")
    if title:
        ax.set_title(title)


def n_star_steps(ax, tables: dict, ticks, ylabel="n*(C)") -> None:
    """n*(C) step lines (``{label: compute_optimal table}``) on a log-log grid of powers of two."""
    for i, (label, ns) in enumerate(tables.items()):
        ax.step(ns["compute"], ns["n"], where="post", color=COLORS[i], label=label)
    ax.set_xscale("log")
    log2_axis(ax, ticks)
    ax.set_xlabel("compute C (rollouts)")
    ax.set_ylabel(ylabel)
    ax.legend()
