"""Finding 3: which n is best for worst@4 (sharpening) and best@4 (coverage), per difficulty."""
from __future__ import annotations

import math

import pandas as pd

from ._common import Finding, Results, Scale, _argmax, _final_se, _series, base, easy, final_by, hard, q1


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "hard": hard(sc), "extremely-hard": q1("xhard", base("extremely-hard"), sc),
            "easy-drgrpo": q1("easy-drgrpo", base("easy", algo={"advantage": "drgrpo"}), sc),
            "hard-drgrpo": q1("hard-drgrpo", base("hard", algo={"advantage": "drgrpo"}), sc)}


def _mechanism(ev: pd.DataFrame) -> dict:
    worst, best = final_by(ev, "worst@4"), final_by(ev, "best@4")
    return {"n_best_worst@4": _argmax(worst), "n_best_best@4": _argmax(best),
            "worst@4": _series(worst), "best@4": _series(best), "se_worst@4": _final_se(ev, "worst@4"),
            "se_best@4": _final_se(ev, "best@4")}


def check(r: Results) -> tuple[bool, dict]:
    easy_m, hard_m, xh = (_mechanism(r.evals(p)) for p in ("easy", "hard", "extremely-hard"))
    sharpening = easy_m["n_best_worst@4"] > easy_m["n_best_best@4"]
    coverage = hard_m["n_best_best@4"] > hard_m["n_best_worst@4"]
    ns = sorted(r.specs["extremely-hard"].n)
    xw = pd.Series(xh["worst@4"]).rename(index=int)
    x_ok = (xh["n_best_best@4"] >= ns[-3] and ns[0] < xh["n_best_worst@4"] < ns[-1]
            and xw[ns[-1]] < xw.max())
    compared = {f"{p}_log2_n_best_{m}": math.log2(d[f"n_best_{m}"]) for p, d in (("easy", easy_m), ("hard", hard_m),
                                                                                   ("extremely_hard", xh))
                for m in ("worst@4", "best@4")} | {"extremely_hard_worst@4_max_minus_largest_n": xw.max() - xw[ns[-1]]}
    abl = {p: _mechanism(r.evals(f"{p}-drgrpo")) for p in ("easy", "hard")}
    abl_summary = {p: {"n_best_worst@4": a["n_best_worst@4"], "n_best_best@4": a["n_best_best@4"]}
                   for p, a in abl.items()}
    return sharpening and coverage and x_ok, {
        "compared": compared, "easy": easy_m, "hard": hard_m, "extremely_hard": xh, "easy_sharpening": sharpening,
        "hard_coverage": coverage, "extremely_hard_pattern": x_ok, "ablation_no_std_scaling": abl_summary}


def make(results, out):
    from .style import COLORS, figure, save

    panels = (("easy", "easy"), ("hard", "hard"), ("extremely-hard", "extremely hard"))
    fig, axes = figure(3, width=3.6)
    for ax, (name, title) in zip(axes, panels):
        ev = results.evals(name)
        for metric, color in (("worst@4", COLORS[0]), ("best@4", COLORS[1])):
            s = final_by(ev, metric)
            ax.plot(s.index, s.values, "o-", color=color, label=metric)
            ax.axvline(s.idxmax(), color=color, ls=":", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("n")
        ax.set_title(title)
    axes[0].set_ylabel("final validation metric")
    axes[0].legend()
    return save(fig, out, "fig03_mechanisms")


FINDING = Finding(
    3, "Sharpening on easy, coverage on hard",
    study="easy: n best for worst@4 > n best for best@4; hard: the reverse; extremely hard: best@4 favours "
          "larger n, worst@4 peaks at n=64",
    mechanism="std-scaled GRPO weights a group by 1/sqrt(p(1-p)): large n sees the rare successes (coverage) and "
              "the rare failures (sharpening) that small n misses",
    ablation="std scaling off (Dr. GRPO advantages): the split is recomputed",
    sweeps_at=sweeps, check=check, figure=make)
