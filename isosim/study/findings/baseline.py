"""Finding 9: n = 256 against (update on 64, baseline from 256) against n = 64, over steps."""
from __future__ import annotations

from ._common import METRIC, Finding, Results, Scale, _final_se, base, final_by, q1


def sweeps(sc: Scale) -> dict:
    bb = sc.baseline_b_problem
    m_base = int(sc.budget // (256 * 32))  # steps of the n = 256 baseline run at B_problem = 32
    return {
        "baseline-n64": q1("baseline-n64", base("easy"), sc, n=(64,), b_problem=(bb,), budget=m_base * 64 * bb,
                           seeds=sc.seeds_many),
        "baseline-n256": q1("baseline-n256", base("easy"), sc, n=(256,), b_problem=(bb,), budget=m_base * 256 * bb,
                            seeds=sc.seeds_many),
        "baseline-decoupled": q1("baseline-dec", base("easy", algo={"baseline_n": 256}), sc, n=(64,),
                                 b_problem=(bb,), budget=m_base * 256 * bb, seeds=sc.seeds_many),
    }


def check(r: Results) -> tuple[bool, dict]:
    v = {name: float(final_by(r.evals(f"baseline-{name}")).iloc[0]) for name in ("n256", "decoupled", "n64")}
    se = {name: _final_se(r.evals(f"baseline-{name}")) for name in v}
    ok = v["n256"] > v["decoupled"] > v["n64"]
    compared = {"n256_minus_decoupled": v["n256"] - v["decoupled"], "decoupled_minus_n64": v["decoupled"] - v["n64"]}
    return ok, {"compared": compared, "final_avg@4": v, "se": se, "B_problem": r.specs["baseline-n64"].b_problem[0],
                "steps": int(r.evals("baseline-n64")["step"].max())}


def make(results, out):
    from .style import curves_by_step, figure, save

    fig, (a,) = figure(1)
    labels = {"n256": "n = 256", "decoupled": "update 64, baseline 256", "n64": "n = 64"}
    curves_by_step(a, {label: results.evals(f"baseline-{name}") for name, label in labels.items()}, METRIC,
                   f"easy, B_problem = {results.specs['baseline-n64'].b_problem[0]}")
    a.legend()
    return save(fig, out, "fig09_baseline")


FINDING = Finding(
    9, "Baseline ablation: n=256 > (update 64, baseline 256) > n=64",
    study="B_problem = 128: a better baseline helps, most of the gain from n is exploration",
    mechanism="a larger group both lowers the baseline's noise and samples more of the policy",
    ablation="the decoupled run is the ablation (baseline kept, exploration removed)",
    sweeps_at=sweeps, check=check, figure=make)
