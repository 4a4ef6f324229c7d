"""Finding 4: with the total batch fixed, the best n and B_problem against the step count M."""
from __future__ import annotations

import pandas as pd

from ...experiments.sweep import SweepSpec
from ._common import METRIC, Q2_BATCH, Finding, Results, Scale, base, evaluated, own_offsets


def sweeps(sc: Scale) -> dict:
    return {
        "q2-easy": SweepSpec(f"f-q2-easy-{sc.name}", "Q2", evaluated(base("easy"), False), n=sc.q2_n, total_batch=Q2_BATCH,
                             steps=sc.q2_steps, seeds=sc.seeds),
        "q2-easy-no-interference": SweepSpec(
            f"f-q2-easy-local-{sc.name}", "Q2", evaluated(base("easy", model={"shared": 0.0, "local": own_offsets()}), True),
            n=sc.q2_n,
            total_batch=Q2_BATCH, steps=sc.q2_steps, seeds=sc.seeds),
    }


def fixed_batch_trend(ev: pd.DataFrame) -> dict:
    from scipy.stats import spearmanr

    from ...analysis.fixed_batch import best_split

    t = best_split(ev, METRIC)
    rho_n = spearmanr(t["M"], t["n"]).statistic if t["n"].nunique() > 1 else 0.0
    rho_b = spearmanr(t["M"], t["B_problem"]).statistic if t["B_problem"].nunique() > 1 else 0.0
    return {"M": t["M"].astype(int).tolist(), "n_star": t["n"].astype(int).tolist(),
            "B_problem_star": t["B_problem"].astype(int).tolist(), "spearman_n": float(rho_n),
            "spearman_B_problem": float(rho_b),
            "rises": bool(rho_n > 0 and t["n"].iloc[-1] > t["n"].iloc[0])}


def check(r: Results) -> tuple[bool, dict]:
    main = fixed_batch_trend(r.evals("q2-easy"))
    abl = fixed_batch_trend(r.evals("q2-easy-no-interference", "train"))
    import math

    compared = {"spearman_n": main["spearman_n"], "log2_n_star_last_minus_first":
                math.log2(main["n_star"][-1]) - math.log2(main["n_star"][0])}
    return main["rises"], {**main, "compared": compared, "ablation_no_interference_train": abl}


def make(results, out):
    from .style import COLORS, figure, save

    t = fixed_batch_trend(results.evals("q2-easy"))
    fig, (a,) = figure(1)
    a.step(t["M"], t["n_star"], where="post", color=COLORS[0], label="n*(M)")
    a.step(t["M"], t["B_problem_star"], where="post", color=COLORS[1], label="B_problem*(M)")
    a.set_xscale("log")
    a.set_yscale("log", base=2)
    a.set_xlabel("update steps M")
    a.set_title(f"easy, B = {results.specs['q2-easy'].total_batch}")
    a.legend()
    return save(fig, out, "fig04_fixed_batch")


FINDING = Finding(
    4, "Q2 (fixed total batch): n*(M) rises, B_problem*(M) falls",
    study="easy, B = 8192: n*(M) L=7.10, k=0.01, M0=91.7, b=2.00; B_problem*(M) L=10.73, k=-0.01, M0=23.9",
    mechanism="early on, more problems per step give broad progress; later, larger groups give cleaner signal on "
              "each problem",
    ablation="interference off (training set): the trend is recomputed",
    sweeps_at=sweeps, check=check, figure=make)
