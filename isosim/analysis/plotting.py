"""Figures for the IsoCompute analysis: one seaborn style, PNG and PDF.

Figures are plain :class:`matplotlib.figure.Figure` objects drawn by the Agg (PNG) and PDF
canvases, so nothing here touches pyplot's global state or needs a display.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .fit import ScalingLawFit

PALETTE = "viridis"


def set_style() -> None:
    """The shared look: seaborn whitegrid, paper context, readable at paper size."""
    sns.set_theme(style="whitegrid", context="paper", font_scale=1.1, palette=PALETTE)


def new_figure(ncols: int = 1, width: float = 4.2, height: float = 3.2) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]


def _axes(ax: Axes | None) -> Axes:
    return new_figure()[1][0] if ax is None else ax


def plot_frontier(
    df: pd.DataFrame,
    frontier: pd.DataFrame,
    ax: Axes | None = None,
    value_col: str = "value",
    compute_col: str = "compute",
) -> Axes:
    """Evaluations coloured by n on a log-compute axis, with the frontier f(C) as a step line."""
    ax = _axes(ax)
    d = df[df[compute_col] > 0]
    hue = hue_order = palette = None
    if "n" in d.columns:
        hue = d["n"].map(str).rename("n")
        hue_order = [str(n) for n in sorted(d["n"].unique())]
        palette = sns.color_palette(PALETTE, len(hue_order))
    sns.scatterplot(
        data=d, x=compute_col, y=value_col, hue=hue, hue_order=hue_order, palette=palette,
        s=8, alpha=0.5, linewidth=0, ax=ax,
    )
    f = frontier[frontier[compute_col] > 0]
    if len(f):
        x = np.append(f[compute_col].to_numpy(), d[compute_col].max())
        y = np.append(f[value_col].to_numpy(), f[value_col].iloc[-1])
        ax.step(x, y, where="post", color="black", lw=1.2, label="frontier")
    ax.set_xscale("log")
    ax.set_xlabel("compute C (rollouts)")
    ax.set_ylabel(value_col)
    ax.legend(title="n", fontsize="small", markerscale=2, ncols=2)
    return ax


def plot_n_star(n_star_df: pd.DataFrame, fit: ScalingLawFit | None = None, ax: Axes | None = None) -> Axes:
    """log2 n*(C) against log10 C, with the fitted sigmoid L / (1 + exp(-k (x - x0))) + b."""
    ax = _axes(ax)
    x = np.log10(n_star_df["compute"].to_numpy(float))
    y = np.log2(n_star_df["n"].to_numpy(float))
    ax.plot(x, y, "o", ms=4, color=sns.color_palette(PALETTE)[1], label="n*(C) from the envelope")
    if fit is not None and x.size:
        xs = np.linspace(x.min(), x.max(), 200)
        ax.plot(xs, fit.predict(xs), color="black", lw=1.2, label=f"sigmoid fit, R² = {fit.r2:.2f}")
        ax.set_title(
            f"L={fit.L:.2f}, k={fit.k:.2f}, log10 C0={fit.log10_C0:.2f}, b={fit.b:.2f}",
            fontsize="small",
        )
    ax.set_xlabel("log10 C (rollouts)")
    ax.set_ylabel("log2 n*")
    ax.legend(fontsize="small", loc="upper left")
    return ax


def save_figure(fig: Figure, path: str | Path, formats: Sequence[str] = ("png", "pdf"), dpi: int = 200) -> list[Path]:
    """Write ``fig`` as path.<fmt> for each format (the suffix of ``path`` is replaced).

    No creation date goes into PDF or PNG metadata, so the same data give the same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for fmt in formats:
        target = path.with_suffix(f".{fmt}")
        meta = {"pdf": {"CreationDate": None}, "png": {"Software": None}}.get(fmt)
        fig.savefig(target, dpi=dpi, format=fmt, metadata=meta)
        out.append(target)
    return out
