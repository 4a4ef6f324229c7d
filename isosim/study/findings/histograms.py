"""Finding 11: pass@1 histograms of hard training problems at matched compute, by n."""
from __future__ import annotations

import pandas as pd

from ._common import Finding, Results, Scale, _series, base, last_evaluations, own_offsets, q1

HIST_BINS = 10
#: the n compared: the smallest of the study's grid (8), a middle one and a large one
HIST_N = (8, 32, 256)


def sweeps(sc: Scale) -> dict:
    return {
        "hist-hard": q1("hist-hard", base("hard", eval={"hist_bins": HIST_BINS}), sc, n=HIST_N,
                        seeds=sc.seeds_many, train=True),
        "hist-hard-no-interference": q1(
            "hist-hard-local", base("hard", model={"shared": 0.0, "local": own_offsets()}, eval={"hist_bins": HIST_BINS}),
            sc, n=HIST_N, seeds=sc.seeds_many, train=True),
    }


def histogram_at(ev: pd.DataFrame, compute: float) -> pd.DataFrame:
    """Mean pass@1 histogram per n at the evaluation closest below ``compute``."""
    cols = [c for c in ev.columns if str(c).startswith("hist:")]
    return last_evaluations(ev, compute).groupby("n")[cols].mean()


def _hist_summary(h: pd.DataFrame) -> dict:
    return {"zero_mass": _series(h.iloc[:, 0]), "top_mass": _series(h.iloc[:, -1])}


def check(r: Results) -> tuple[bool, dict]:
    top = float(r.specs["hist-hard"].budget)
    h = histogram_at(r.evals("hist-hard", "train"), top)
    ns = sorted(h.index)
    zero, one = h.iloc[:, 0], h.iloc[:, -1]
    ok = zero[ns[0]] > zero[ns[-1]] and one[ns[0]] >= one[ns[-1]]
    compared = {"zero_mass_smallest_minus_largest_n": zero[ns[0]] - zero[ns[-1]],
                "top_mass_smallest_minus_largest_n": one[ns[0]] - one[ns[-1]]}
    abl = histogram_at(r.evals("hist-hard-no-interference", "train"), top)
    mid = histogram_at(r.evals("hist-hard", "train"), top / 64)  # descriptive: earlier in training
    return ok, {"compared": compared, "compute": top, **_hist_summary(h), "ablation_no_interference": _hist_summary(abl),
                "at_compute_over_64": _hist_summary(mid)}


def make(results, out):
    import numpy as np

    from .style import figure, n_colors, save

    fig, axes = figure(3, width=3.8)
    top = float(results.specs["hist-hard"].budget)
    panels = ((axes[0], "hist-hard", top / 64, "hard"), (axes[1], "hist-hard", top, "hard"),
              (axes[2], "hist-hard-no-interference", top, "hard, interference off"))
    for ax, name, compute, title in panels:
        h = histogram_at(results.evals(name, "train"), compute)
        title = f"{title}, C = {compute:.2g}"
        bins = h.shape[1]
        colors = n_colors(h.index)
        width = 0.8 / bins / len(h)
        for j, (n, row) in enumerate(h.iterrows()):
            x = (np.arange(bins) + 0.1) / bins + j * width
            ax.bar(x, row.values, width=width, align="edge", color=colors[n], label=f"n = {n}")
        ax.set_xlabel("pass@1 of a training problem")
        ax.set_title(title)
    axes[0].set_ylabel("share of problems")
    axes[0].legend()
    return save(fig, out, "fig11_histograms")


FINDING = Finding(
    11, "Pass@1 histograms on hard at matched compute",
    study="small n piles mass at 0 and near 1; larger n leaves less mass at 0 (the study's Figure 12)",
    mechanism="rich get richer: small n reinforces the problems it already solves and rarely sees a success on "
              "the others",
    ablation="interference off (shared = 0): histograms recomputed",
    sweeps_at=sweeps, check=check, figure=make)
