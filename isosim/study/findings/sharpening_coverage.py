"""Finding 3: which n is best for worst@4 (sharpening) and best@4 (coverage), per difficulty.

The study reads the split across B_problem = 64, 128 and 256 (at B_problem = 32 both metrics
pick the same n on easy): on easy the n best for worst@4 is the larger at each of them, on hard
the n best for best@4. The check reads it the same way, on Q1 sweeps at those B_problem (n from
8, as the study's grid; n * B_problem <= the study's B_max: 65,536 easy, 16,384 hard)."""
from __future__ import annotations

import math

import pandas as pd

from ._common import STUDY_B_MAX, Finding, Results, Scale, _argmax, _final_se, _series, base, easy, final_by, hard, q1

#: the B_problem at which the study reads sharpening against coverage
SPLIT_B_PROBLEMS = (64, 128, 256)


def split_sweep(preset: str, sc: Scale):
    """Q1 on ``preset`` at B_problem = 64, 128, 256, n >= 8 (the study's grid) under its B_max, to the
    scale's ``split_budget``."""
    return q1(f"{preset}-split", base(preset), sc, n=tuple(n for n in sc.n if n >= 8), b_problem=SPLIT_B_PROBLEMS,
              budget=sc.split_budget, b_max=STUDY_B_MAX[preset])


def sweeps(sc: Scale) -> dict:
    return {"easy": easy(sc), "hard": hard(sc), "extremely-hard": q1("xhard", base("extremely-hard"), sc),
            "easy-split": split_sweep("easy", sc), "hard-split": split_sweep("hard", sc),
            "easy-drgrpo": q1("easy-drgrpo", base("easy", algo={"advantage": "drgrpo"}), sc),
            "hard-drgrpo": q1("hard-drgrpo", base("hard", algo={"advantage": "drgrpo"}), sc)}


def _mechanism(ev: pd.DataFrame) -> dict:
    worst, best = final_by(ev, "worst@4"), final_by(ev, "best@4")
    return {"n_best_worst@4": _argmax(worst), "n_best_best@4": _argmax(best),
            "worst@4": _series(worst), "best@4": _series(best), "se_worst@4": _final_se(ev, "worst@4"),
            "se_best@4": _final_se(ev, "best@4")}


def by_b_problem(ev: pd.DataFrame) -> dict[int, dict]:
    """:func:`_mechanism` at each B_problem of a sweep."""
    return {int(bp): _mechanism(g) for bp, g in ev.groupby("B_problem")}


def split_reads(per_bp: dict[int, dict], larger: str) -> dict:
    """At how many B_problem the metric ``larger`` (``worst@4`` for sharpening, ``best@4`` for
    coverage) picks the strictly larger n, and at how many the other metric does."""
    other = "best@4" if larger == "worst@4" else "worst@4"
    diff = {str(bp): math.log2(m[f"n_best_{larger}"]) - math.log2(m[f"n_best_{other}"]) for bp, m in per_bp.items()}
    return {"log2_n_larger_minus_other": diff, "agrees": sum(d > 0 for d in diff.values()),
            "reversed": sum(d < 0 for d in diff.values()), "of": len(diff)}


def _split_holds(reads: dict) -> bool:
    """The study's order at most of the B_problem and the reverse at none."""
    return reads["agrees"] > reads["of"] / 2 and reads["reversed"] == 0


def check(r: Results) -> tuple[bool, dict]:
    easy_m, hard_m, xh = (_mechanism(r.evals(p)) for p in ("easy", "hard", "extremely-hard"))
    easy_bp, hard_bp = by_b_problem(r.evals("easy-split")), by_b_problem(r.evals("hard-split"))
    easy_reads, hard_reads = split_reads(easy_bp, "worst@4"), split_reads(hard_bp, "best@4")
    sharpening, coverage = _split_holds(easy_reads), _split_holds(hard_reads)
    ns = sorted(r.specs["extremely-hard"].n)
    xw = pd.Series(xh["worst@4"]).rename(index=int)
    x_ok = (xh["n_best_best@4"] >= ns[-3] and ns[0] < xh["n_best_worst@4"] < ns[-1]
            and xw[ns[-1]] < xw.max())
    compared = {f"{p}_B_problem_{bp}_log2_n_best_{larger}_over_other": d
                for p, reads, larger in (("easy", easy_reads, "worst@4"), ("hard", hard_reads, "best@4"))
                for bp, d in reads["log2_n_larger_minus_other"].items()} | {
        f"extremely_hard_log2_n_best_{m}": math.log2(xh[f"n_best_{m}"]) for m in ("worst@4", "best@4")} | {
        "extremely_hard_worst@4_max_minus_largest_n": xw.max() - xw[ns[-1]]}
    abl = {p: _mechanism(r.evals(f"{p}-drgrpo")) for p in ("easy", "hard")}
    abl_summary = {p: {"n_best_worst@4": a["n_best_worst@4"], "n_best_best@4": a["n_best_best@4"]}
                   for p, a in abl.items()}
    return sharpening and coverage and x_ok, {
        "compared": compared, "easy_by_B_problem": {str(bp): m for bp, m in easy_bp.items()},
        "hard_by_B_problem": {str(bp): m for bp, m in hard_bp.items()}, "easy_split": easy_reads,
        "hard_split": hard_reads, "easy_sharpening": sharpening, "hard_coverage": coverage,
        "easy": easy_m, "hard": hard_m, "extremely_hard": xh, "extremely_hard_pattern": x_ok, "ablation_no_std_scaling": abl_summary}


def make(results, out):
    from .style import COLORS, figure, save

    panels = (("easy", "easy, B_problem = 32"), ("hard", "hard, B_problem = 32"),
              ("extremely-hard", "extremely hard, B_problem = 32"))
    fig, axes = figure(4, width=3.6)
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
    ax = axes[3]  # the split as the study reads it: the best n per metric at each B_problem
    for i, preset in enumerate(("easy", "hard")):
        per_bp = by_b_problem(results.evals(f"{preset}-split"))
        bps = sorted(per_bp)
        for metric, marker, ls in (("worst@4", "o", "-"), ("best@4", "s", "--")):
            ax.plot(bps, [per_bp[bp][f"n_best_{metric}"] * (1 + 0.05 * i) for bp in bps], marker=marker, ls=ls,
                    color=COLORS[i], label=f"{preset}, {metric}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("B_problem")
    ax.set_ylabel("n with the best final value")
    ax.set_title("the split across B_problem")
    ax.legend(fontsize=6)
    return save(fig, out, "fig03_mechanisms")


FINDING = Finding(
    3, "Sharpening on easy, coverage on hard",
    study="read across B_problem = 64 / 128 / 256: easy: the n best for worst@4 (256 / 128 / 64) is larger than "
          "the n best for best@4 (128 / 8 / 16); hard: the reverse; extremely hard: best@4 favours larger n, "
          "worst@4 peaks at n=64",
    mechanism="std-scaled GRPO weights a group by 1/sqrt(p(1-p)): large n sees the rare successes (coverage) and "
              "the rare failures (sharpening) that small n misses",
    ablation="std scaling off (Dr. GRPO advantages, B_problem = 32): the best n per metric recomputed",
    sweeps_at=sweeps, check=check, figure=make)
