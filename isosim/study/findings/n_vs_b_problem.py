"""Finding 5: final validation reward over n (B_problem = 32) and over B_problem (n = 16)."""
from __future__ import annotations

import math

import pandas as pd

from ._common import METRIC, Finding, Results, Scale, base, easy, final_by, last_evaluations, q1


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "easy-b-problem": q1("easy-bp", base("easy"), sc, n=(16,), b_problem=sc.b_problems)}


def check(r: Results) -> tuple[bool, dict]:
    from ...analysis.frontier import sensitivity

    top = float(r.specs["easy"].budget)
    rows = []
    for name in ("easy", "easy-b-problem"):
        last = last_evaluations(r.evals(name), top)
        rows.append(last.assign(value=last[METRIC])[["n", "B_problem", "value"]])
    cells = pd.concat(rows)
    s = sensitivity(cells, at_B_problem=32, at_n=16)
    ratio = s.over_n / s.over_B_problem if s.over_B_problem > 0 else math.inf
    compared = {"over_n_percent": s.over_n, "over_B_problem_percent": s.over_B_problem, "ratio": ratio}
    return ratio >= 2, {"compared": compared, "over_n_percent": s.over_n, "over_B_problem_percent": s.over_B_problem,
                        "ratio": ratio, "at_B_problem": s.at_B_problem, "at_n": s.at_n}


def make(results, out):
    from .style import COLORS, figure, save

    fig, (a, b) = figure(2, width=3.6)
    s = final_by(results.evals("easy"))
    a.plot(s.index, s.values, "o-")
    a.set_xscale("log", base=2)
    a.set_xlabel("n (B_problem = 32)")
    a.set_ylabel("final validation avg@4")
    s = final_by(results.evals("easy-b-problem"), by=("B_problem",))
    b.plot(s.index, s.values, "o-", color=COLORS[1])
    b.set_xscale("log", base=2)
    b.set_xlabel("B_problem (n = 16)")
    b.set_ylim(a.get_ylim())
    return save(fig, out, "fig05_sensitivity")


FINDING = Finding(
    5, "n matters more than B_problem",
    study="easy: 9.2% variation over n (B_problem = 32) vs 1.9% over B_problem (n = 16)",
    mechanism="B_problem only changes how many problems share a step's update; n changes which problems give "
              "signal and how clean it is",
    ablation="none separate: the contrast of the two axes is the comparison",
    sweeps_at=sweeps, check=check, figure=make)
