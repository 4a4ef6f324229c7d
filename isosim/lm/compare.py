"""The surrogate side of ``isosim lm validate`` and the comparison (protocol steps 5 to 7 in
:mod:`isosim.lm.validate`): the measured curves read from the evaluation records, the
surrogate's curves at the same (n, B_problem, M) (:func:`surrogate_curves`,
:func:`surrogate_fb_curves`) with its learning rate fitted at the reference n
(:func:`calibrate`), n*(C) and n*(M) of either (:func:`n_star`, :func:`fb_n_star`: the raw
arg-max of :mod:`isosim.analysis.n_star`) and their agreement (:func:`agreement`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..analysis.n_star import n_star_raw
from .protocol import ValidateConfig, eval_steps, fb_marks


def fb_curves(evals: list[dict], subset: str) -> dict[int, dict[int, float]]:
    """``curves[n][M]``: the fixed-batch run n's validation avg@1 after M steps."""
    curves: dict[int, dict[int, float]] = {}
    for r in evals:
        if r["subset"] == subset:
            curves.setdefault(int(r["n"]), {})[int(r["step"])] = float(r["value"])
    return curves


def fb_n_star(curves: dict[int, dict[int, float]], steps: list[int], big_b: int) -> list[dict]:
    """n*(M) and B_problem*(M) = B / n*: the n_star rule over splits at each M."""
    out = []
    for p in n_star(curves, steps):
        rec = {"M": p.pop("compute"), "n": p["n"], "B_problem": big_b // p["n"]}
        rec.update((k, v) for k, v in p.items() if k != "n")
        out.append(rec)
    return out


def n_star(curves: dict[int, dict[int, float]], budget_list: list[int]) -> list[dict]:
    """n*(C) per budget: the raw arg-max (:func:`isosim.analysis.n_star.n_star_raw`) over n of
    the best-so-far value max_{C' <= C} curves[n][C'] (ties: the smaller n).

    ``curves[n][C]`` is run n's value at compute C. Run n competes at C only if it was
    evaluated at C; budgets at which none was are left out. Each point also names the
    runner-up (``runner_up``, ``runner_up_value``) when another n competed."""
    ns = sorted(curves)
    table = pd.DataFrame(
        [[max(v for cc, v in curves[n].items() if cc <= c) if c in curves[n] else np.nan for c in budget_list]
         for n in ns],
        index=pd.Index(ns, name="n"), columns=list(budget_list))
    out = []
    for p in n_star_raw(table, runner_up=True).itertuples(index=False):
        rec = {"compute": int(p.compute), "n": int(p.n), "value": float(p.value)}
        if not math.isnan(p.runner_up_value):
            rec.update(runner_up=int(p.runner_up_n), runner_up_value=float(p.runner_up_value))
        out.append(rec)
    return out


def measured_curves(evals: list[dict], subset: str) -> dict[int, dict[int, float]]:
    """{n: {C: validation avg@1}} of the subset's Q1 runs, the mean over the seeds evaluated at C
    (with several seeds a budget's value is their mean, not the last one stored)."""
    vals: dict[int, dict[int, list[float]]] = {}
    for r in evals:
        if r["subset"] == subset and r["n"] > 0:
            vals.setdefault(int(r["n"]), {}).setdefault(int(r["compute"]), []).append(float(r["value"]))
    return {n: {c: float(np.mean(v)) for c, v in sorted(cs.items())} for n, cs in vals.items()}


def surrogate_rates(counts: np.ndarray, m: int, how: str) -> np.ndarray:
    return (counts + 0.5) / (m + 1.0) if how == "jeffreys" else counts / m


def _surrogate_population(cfg: ValidateConfig, train_counts, val_counts):
    from isosim.sim.population import population_from_pass_rates

    m = cfg.measure_samples
    return population_from_pass_rates(surrogate_rates(train_counts, m, cfg.pass_rate_estimate),
                                      surrogate_rates(val_counts, m, cfg.pass_rate_estimate),
                                      model=cfg.surrogate, seed=cfg.seed)


def surrogate_curves(cfg: ValidateConfig, plan: dict, train_counts, val_counts, lr: float) -> dict[int, dict[int, float]]:
    """The surrogate's validation avg@1 at the plan's budgets for every n, mean over seeds."""
    pop = _surrogate_population(cfg, train_counts, val_counts)
    return {n: _surrogate_run(cfg, pop, len(train_counts), len(val_counts), n, cfg.b_problem,
                              eval_steps(plan["budget"], cfg.n_budgets, n, cfg.b_problem), lr)
            for n in plan["n_grid"]}


def surrogate_fb_curves(cfg: ValidateConfig, plan: dict, train_counts, val_counts, lr: float) -> dict[int, dict[int, float]]:
    """The surrogate's validation avg@1 at the fixed-batch evaluation steps M for every split
    (n, B_problem = B / n), keyed by n."""
    pop = _surrogate_population(cfg, train_counts, val_counts)
    fb = plan["fixed_batch"]
    marks = {s: s for s in fb_marks(fb["m_max"], cfg.fb_n_budgets)}
    return {n: _surrogate_run(cfg, pop, len(train_counts), len(val_counts), n, bp, marks, lr) for n, bp in fb["splits"]}


def surrogate_algo(cfg: ValidateConfig, lr: float):
    """The surrogate's training settings that mirror the LM's GRPO: the same advantage and std
    epsilon, AdamW with the same betas, no warm-up, and the LM's learning-rate rule over the
    batch (constant, or sqrt(B) from the surrogate's own reference batch; the fitted ``lr``
    absorbs the difference of reference)."""
    from isosim import AlgoConfig
    from isosim.sim.advantages import from_trl

    return AlgoConfig(advantage=from_trl(cfg.grpo.scale_rewards).name,  # batch std ~ a constant under Adam
                      std_eps=cfg.grpo.std_eps, optimizer="adamw", lr=lr, lr_rule=cfg.lr_rule, warmup=0,
                      beta1=cfg.grpo.betas[0], beta2=cfg.grpo.betas[1])


def _surrogate_run(cfg: ValidateConfig, pop, n_train: int, n_val: int, n: int, b_problem: int, marks: dict,
                   lr: float) -> dict[int, float]:
    """{marks[M]: mean over seeds of the surrogate's validation avg@1 after M steps}."""
    from isosim import Allocation, EvalConfig, SimConfig, simulate

    sim = SimConfig(
        population=_population_cfg(n_train, n_val),
        model=cfg.surrogate,
        algo=surrogate_algo(cfg, lr),
        allocation=Allocation(n=n, b_problem=b_problem, steps=max(marks)),
        eval=EvalConfig(ks=(1,), n_evals=1, at_steps=tuple(sorted(marks))),
    )
    acc: dict[int, list[float]] = {}
    for seed in range(cfg.surrogate_seeds):
        tr = simulate(sim, seed=seed, population=pop).curve("avg@1", "val")
        for step, v in zip(tr["step"], tr["value"]):
            if int(step) in marks:
                acc.setdefault(marks[int(step)], []).append(float(v))
    return {c: float(np.mean(v)) for c, v in acc.items()}


def _population_cfg(train: int, val: int):
    from isosim import PopulationConfig

    return PopulationConfig(preset="easy", train_size=train, val_size=val, measure="exact")


def calibrate(cfg: ValidateConfig, plan: dict, train_counts, val_counts, measured: dict, base_value: float) -> tuple[float, dict]:
    """The surrogate learning rate whose avg@1 gain curve at the reference n (the grid's
    middle) is closest (least squares over budgets) to the LM's measured gain curve."""
    grid = plan["n_grid"]
    n_ref = grid[len(grid) // 2]
    sub = dict(plan, n_grid=[n_ref])
    target = measured[n_ref]
    base_sim = float(np.mean(surrogate_rates(val_counts, cfg.measure_samples, cfg.pass_rate_estimate)))
    errs = {}
    for lr in cfg.surrogate_lrs:
        sim = surrogate_curves(cfg, sub, train_counts, val_counts, lr)[n_ref]
        errs[lr] = float(np.mean([((sim[c] - base_sim) - (v - base_value)) ** 2 for c, v in target.items() if c in sim]))
    lr = min(errs, key=errs.get)
    return lr, {"n_ref": n_ref, "lr": lr, "rmse": math.sqrt(errs[lr]), "errors": errs}


def agreement(measured: list[dict], predicted: list[dict], key: str = "compute") -> dict:
    """Mean |log2 n*_measured - log2 n*_predicted| over the points (budgets C, or steps M with key="M")."""
    pm = {p[key]: p["n"] for p in predicted}
    diffs = [abs(math.log2(m["n"]) - math.log2(pm[m[key]])) for m in measured if m[key] in pm]
    return {"mean_abs_log2_error": float(np.mean(diffs)) if diffs else float("nan"), "budgets": len(diffs)}
