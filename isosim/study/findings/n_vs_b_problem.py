"""Finding 5: how far the validation reward moves over n (B_problem = 32) and over B_problem (n = 16).

The study's measure: the best validation avg@4 each run reaches by about 4M rollouts, averaged
over the seeds per cell; the spread (max - min) in absolute points over n = 8 ... 1024 at
B_problem = 32 (the study: 9.2 points) against the spread over B_problem = 32 ... 1024 at n = 16
(1.9 points)."""
from __future__ import annotations

import math

import pandas as pd

from ._common import METRIC, Finding, Results, Scale, base, easy, q1

#: where the study reads its levels: about 4M rollouts (2^22), or the sweep's budget when smaller
HORIZON = 2.0**22
#: the ranges the study's spreads are taken over
N_RANGE, B_PROBLEM_RANGE = (8, 1024), (32, 1024)
#: the study's spreads, in points of validation avg@4
STUDY_POINTS = {"over_n": 9.2, "over_B_problem": 1.9}


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "easy-b-problem": q1("easy-bp", base("easy"), sc, n=(16,), b_problem=sc.b_problems)}


def best_levels(ev: pd.DataFrame, horizon: float, by: str) -> pd.Series:
    """The best ``METRIC`` each run reaches up to ``horizon`` rollouts, averaged over the seeds, per ``by``."""
    d = ev[ev["compute"] <= horizon]
    return d.groupby(["run", by])[METRIC].max().groupby(by).mean()


def check(r: Results) -> tuple[bool, dict]:
    horizon = min(HORIZON, float(r.specs["easy"].budget), float(r.specs["easy-b-problem"].budget))
    over_n = best_levels(r.evals("easy"), horizon, "n").loc[N_RANGE[0]:N_RANGE[1]]
    over_bp = best_levels(r.evals("easy-b-problem"), horizon, "B_problem").loc[B_PROBLEM_RANGE[0]:B_PROBLEM_RANGE[1]]
    points = {"over_n": 100 * float(over_n.max() - over_n.min()),
              "over_B_problem": 100 * float(over_bp.max() - over_bp.min())}
    ratio = points["over_n"] / points["over_B_problem"] if points["over_B_problem"] > 0 else math.inf
    compared = {"over_n_points": points["over_n"], "over_B_problem_points": points["over_B_problem"],
                "over_n_minus_twice_over_B_problem_points": points["over_n"] - 2 * points["over_B_problem"],
                "ratio": ratio}
    return ratio >= 2, {"compared": compared, "over_n_points": points["over_n"],
                        "over_B_problem_points": points["over_B_problem"], "ratio": ratio,
                        "study_points": STUDY_POINTS, "horizon_rollouts": horizon,
                        "best_by_n": {str(int(k)): float(v) for k, v in over_n.items()},
                        "best_by_B_problem": {str(int(k)): float(v) for k, v in over_bp.items()},
                        "at_B_problem": 32, "at_n": 16}


def make(results, out):
    from .style import COLORS, figure, save

    horizon = min(HORIZON, float(results.specs["easy"].budget), float(results.specs["easy-b-problem"].budget))
    fig, (a, b) = figure(2, width=3.6)
    s = best_levels(results.evals("easy"), horizon, "n").loc[N_RANGE[0]:N_RANGE[1]]
    a.plot(s.index, s.values, "o-")
    a.set_xscale("log", base=2)
    a.set_xlabel("n (B_problem = 32)")
    a.set_ylabel(f"best validation avg@4 by {horizon:.2g} rollouts")
    s = best_levels(results.evals("easy-b-problem"), horizon, "B_problem").loc[B_PROBLEM_RANGE[0]:B_PROBLEM_RANGE[1]]
    b.plot(s.index, s.values, "o-", color=COLORS[1])
    b.set_xscale("log", base=2)
    b.set_xlabel("B_problem (n = 16)")
    b.set_ylim(a.get_ylim())
    return save(fig, out, "fig05_sensitivity")


FINDING = Finding(
    5, "n matters more than B_problem",
    study="easy, best validation avg@4 by about 4M rollouts: 9.2 points over n = 8 ... 1024 (B_problem = 32) vs "
          "1.9 points over B_problem = 32 ... 1024 (n = 16)",
    mechanism="B_problem only changes how many problems share a step's update; n changes which problems give "
              "signal and how clean it is",
    ablation="none separate: the contrast of the two axes is the comparison",
    sweeps_at=sweeps, check=check, figure=make)
