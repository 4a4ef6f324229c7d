"""Finding 6: the tabular model (no interference) keeps n* at the smallest n."""
from __future__ import annotations

import math

import numpy as np

from ._common import METRIC, Finding, Results, Scale, _final_se, base, q1

#: how far outside its fitted compute range a curve still competes, in decades (as in
#: :func:`isosim.analysis.frontier.compute_optimal`: half a step of its ten-per-decade grid)
SLACK_DECADES = 0.05


def sweeps(sc: Scale) -> dict:
    return {"easy-tabular": q1("easy-tabular", base("easy", model={"kind": "tabular"}), sc, n=(*sc.n_below, *sc.n),
                             train=True)}


def lead_over_smallest(law: dict, small) -> np.ndarray:
    """At each budget C of the fitted n*(C) table: how far the envelope R*(C) lies above the better
    of the ``small`` n's fitted curves, ``R*(C) - max_{n in small} R_n(C)`` (0 where one of them is
    n*; NaN where none of them competes). Where a curve competes is the envelope's own edge rule
    (:func:`isosim.analysis.n_star.n_star_envelope`), with the fit's slack."""
    from ...analysis.n_star import n_star_envelope

    table = law["n_star"]
    fits = {key: f for key, f in law["curves"].items() if key[0] in small}
    if not fits:
        return np.full(len(table), np.nan)
    best = n_star_envelope(fits, table["compute"], slack_decades=SLACK_DECADES).set_index("compute")["value"]
    return table["value"].to_numpy(float) - best.reindex(table["compute"]).to_numpy(float)


def check(r: Results) -> tuple[bool, dict]:
    """n* is one of the two smallest n wherever the n are told apart: at the top budget, and at
    every budget no larger n's curve lies above both smallest n's by more than twice the standard
    error of a difference of two per-n means (``2 sqrt(2) SE``, SE the pooled standard error of a
    per-n final value over the seeds, :func:`_final_se`). Below that the curves are tied within
    the seeds' noise, and which of them is the arg-max says nothing. The tolerance is measured on
    every seed the results hold; a bootstrap resample keeps it and redraws only the curves."""
    law = r.law("easy-tabular", "train")
    small = sorted(r.specs["easy-tabular"].n)[:2]
    lead = lead_over_smallest(law, small)
    if not np.isfinite(lead).any():
        return False, {"compared": {}, "n_star_top": law["n_star_top"], "smallest_n": small,
                       "error": "the smallest n's curves compete at no budget"}
    # the seeds' spread on all the replicates drawn from: a resample of one replicate drawn twice has none
    tolerance = 2.0 * math.sqrt(2.0) * _final_se(r.all_seeds().evals("easy-tabular", "train"))
    where = int(np.nanargmax(lead))
    largest = float(lead[where])
    # in tolerances: at most 1 holds (a lead of 0, where the smallest n is n*, is 0 even at a zero tolerance)
    ratio = largest / tolerance if tolerance > 0 else (math.inf if largest > 0 else 0.0)
    ok = law["n_star_top"] <= small[-1] and ratio <= 1.0
    compared = {"log2_n_star_top": math.log2(law["n_star_top"]), "log2_second_smallest_n": math.log2(small[-1]),
                "lead_over_tolerance": ratio}
    return bool(ok), {"compared": compared, "n_star_max": law["n_star_max"], "n_star_top": law["n_star_top"],
                      "smallest_n": small, "law_fitted": law["fitted"],
                      # millionths of the metric: the tabular curves differ by less than 1e-4 where they tie
                      "largest_lead_millionths": 1e6 * largest, "tie_tolerance_millionths": 1e6 * tolerance,
                      "largest_lead_at_rollouts": float(law["n_star"]["compute"].iloc[where]),
                      "n_star_there": int(law["n_star"]["n"].iloc[where])}


def make(results, out):
    from .style import curves_by_n, figure, n_star_steps, save

    ev = results.evals("easy-tabular", "train")
    fig, (a, b) = figure(2)
    curves_by_n(a, ev, METRIC)
    a.set_ylabel(f"training {METRIC}")
    a.legend(title="n", fontsize=6, ncols=2)
    n_star_steps(b, {"tabular": results.law("easy-tabular", "train")["n_star"]}, results.specs["easy-tabular"].n)
    b.set_title("tabular: n*(C)")
    return save(fig, out, "fig06_tabular")


FINDING = Finding(
    6, "Null: the tabular model keeps n* smallest",
    study="single-problem tabular softmax: O(A/(n t) + B/t), sequential steps at least as good as samples",
    mechanism="independent problems: no interference, so more steps always beat larger groups",
    ablation="this is the ablation of finding 1 (the strategies model with shared parameters)",
    sweeps_at=sweeps, check=check, figure=make)
