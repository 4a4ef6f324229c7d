"""Finding 6: the tabular model (no interference) keeps n* at the smallest n."""
from __future__ import annotations

from ._common import METRIC, Finding, Results, Scale, base, q1


def sweeps(sc: Scale) -> dict:
    return {"easy-tabular": q1("easy-tabular", base("easy", model={"kind": "tabular"}), sc, n=(*sc.n_below, *sc.n),
                             train=True)}


def check(r: Results) -> tuple[bool, dict]:
    law = r.law("easy-tabular", "train")
    small = sorted(r.specs["easy-tabular"].n)[:2]
    ok = law["n_star_max"] <= small[-1]
    import math

    compared = {"log2_n_star_max": math.log2(law["n_star_max"]), "log2_second_smallest_n": math.log2(small[-1])}
    return ok, {"compared": compared, "n_star_max": law["n_star_max"], "n_star_top": law["n_star_top"], "smallest_n": small,
                "law_fitted": law["fitted"]}


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
