"""Finding 10: LR scaling rules at B = 8192: sqrt(B), constant and linear."""
from __future__ import annotations

from ._common import METRIC, Finding, Results, Scale, _final_se, base, final_by, q1

RULES = ("sqrt", "constant", "linear")


def sweeps(sc: Scale) -> dict:
    return {f"lr-{rule}": q1(f"lr-{rule}", base("easy", algo={"lr_rule": rule}), sc, n=(256,), seeds=sc.seeds_many)
            for rule in RULES}


def check(r: Results) -> tuple[bool, dict]:
    v = {}
    for rule in RULES:
        v[rule] = float(final_by(r.evals(f"lr-{rule}")).iloc[0])
    ok = v["sqrt"] > v["constant"] and v["sqrt"] > v["linear"]
    compared = {"sqrt_minus_constant": v["sqrt"] - v["constant"], "sqrt_minus_linear": v["sqrt"] - v["linear"]}
    return ok, {"compared": compared, "batch": 256 * 32, "final_avg@4": v, "se": _final_se(r.evals("lr-constant"))}


def make(results, out):
    from .style import curves_by_step, figure, save

    fig, (a,) = figure(1)
    curves_by_step(a, {rule: results.evals(f"lr-{rule}") for rule in RULES}, METRIC,
                   "easy, n = 256, B_problem = 32")
    a.legend(title="LR rule")
    return save(fig, out, "fig10_lr_rule")


FINDING = Finding(
    10, "LR rule: sqrt(B) beats constant and linear at a larger batch",
    study="B = 8192: sqrt(B) beat constant (slower) and linear (unstable)",
    mechanism="Adam's step is LR-sized: constant LR under-uses a cleaner large batch, linear over-steps",
    ablation="at B = 1024 the three rules are the same run",
    sweeps_at=sweeps, check=check, figure=make)
