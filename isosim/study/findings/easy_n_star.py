"""Finding 1: on easy, the compute-optimal n*(C) rises with C and saturates."""
from __future__ import annotations

import math

import numpy as np

from ._common import (
    METRIC,
    Finding,
    Results,
    Scale,
    _final_se,
    _series,
    base,
    dose,
    easy,
    final_by,
    law_compared,
    q1,
    rise,
)


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "dose-0": dose(sc, 0.0),
            "easy-lr-constant": q1("easy-lrconst", base("easy", algo={"lr_rule": "constant"}), sc)}


def _summary(law: dict) -> dict:
    return {k: law[k] for k in ("fitted", "n_star_min", "n_star_max", "n_star_top")} | (
        {"k": law["k"], "L": law["L"], "saturation_log2": law["saturation_log2"]} if law["fitted"] else {})


def raw_saturation(ev, largest: int) -> dict:
    """Saturation on the raw frontier (no fits): the per-n curves of ``METRIC`` (mean over the
    seeds), and at each evaluation of the largest n, how far the frontier of the smaller n (the
    best any of them reached by that compute) lies above the largest n's own best so far. The
    largest n never extends the frontier when the smallest of these margins is positive; the
    n holding the raw frontier at the top budget is reported too."""
    from ...analysis.frontier import frontier, frontier_at

    d = ev[ev["compute"] > 0]
    curves = d.groupby(["n", "compute"], as_index=False)[METRIC].mean().rename(columns={METRIC: "value"})
    top = curves[curves["n"] == largest].sort_values("compute")
    others = frontier(curves[curves["n"] < largest])
    record = np.maximum.accumulate(top["value"].to_numpy())
    margins = frontier_at(others, top["compute"].to_numpy()) - record
    front = frontier(curves)
    return {"raw_margin_over_largest_n": float(np.nanmin(margins)) if np.isfinite(margins).any() else math.nan,
            "raw_margin_over_largest_n_at_top": float(margins[-1]),
            "raw_n_star_top": int(front["n"].iloc[-1]), "raw_n_star_max": int(front["n"].max())}


def check(r: Results) -> tuple[bool, dict]:
    ev = r.evals("easy")
    law = r.law("easy")
    rs = rise(law, r.specs["easy"].n)
    abl = r.law("dose-0", "train")
    const = r.law("easy-lr-constant")
    largest = max(r.specs["easy"].n)
    raw = raw_saturation(ev, largest)
    raw_saturates = raw["raw_margin_over_largest_n"] > 0
    compared = law_compared(law) | {"log2_largest_n": math.log2(largest),
                                    "raw_margin_over_largest_n": raw["raw_margin_over_largest_n"],
                                    "constant_lr_log2_n_star_top": math.log2(const["n_star_top"])}
    return rs["rises"] and rs["saturates_below_max_n"] and raw_saturates, {
        **law, **rs, **raw, "saturates_on_raw_frontier": raw_saturates, "final_by_n": _series(final_by(ev)),
        "final_se": _final_se(ev), "compared": compared,
        "ablation_no_interference_train": _summary(abl), "ablation_constant_lr": _summary(const)}


def make(results, out):
    from ...analysis.frontier import frontier
    from ...analysis.plotting import plot_frontier, plot_n_star
    from .style import figure, save

    ev = results.evals("easy")
    law = results.law("easy")
    d = ev.assign(value=ev[METRIC])
    d = d[d["compute"] > 0]
    fig, (a, b, c) = figure(3, width=4.0)
    plot_frontier(d, frontier(d), ax=a)
    a.set_title(f"easy: validation {METRIC}")
    plot_n_star(law["n_star"], law["fit"], ax=b)
    const = results.law("easy-lr-constant")["n_star"]
    b.step(np.log10(const["compute"]), np.log2(const["n"]), where="post", color="0.5", ls="--",
           label="n*(C), constant LR")
    b.legend(fontsize=7)
    b.set_title("n*(C)" + (f", L={law['L']:.1f}, R²={law['r2']:.2f}" if law["fitted"] else ""))
    abl = results.law("dose-0", "train")
    plot_n_star(abl["n_star"], None, ax=c)
    c.set_ylim(b.get_ylim())
    c.set_title("ablation: interference off (train)")
    return save(fig, out, "fig01_easy_n_star")


FINDING = Finding(
    1, "Easy, Q1: n*(C) rises with C and saturates",
    study="easy, B_problem = 32: L=6.09, k=4.75, log10 C0=5.84, b=2.73; saturates near n=512, n=2048 never on "
          "the frontier (the check asks both: the fitted n*(C) stays below the largest n, and the largest n never "
          "extends the raw frontier of the per-n curves)",
    mechanism="small n takes many noisy steps that move shared parameters for all problems at once; it learns the "
              "transferable skills fast, then its noise keeps it below the plateau larger n reaches",
    ablation="interference off (shared = 0, per-problem offsets only, read on the training set): n* stays small; "
             "constant LR instead of the sqrt(B) rule: n*(C) recomputed",
    sweeps_at=sweeps, check=check, figure=make)
