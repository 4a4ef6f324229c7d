"""The share of zero-signal groups (all n rewards equal, so the group's advantages are all zero)
that a calibrated surrogate predicts at the pilots' allocations, beside the share the pilots'
trainer logged (TRL's ``frac_reward_zero_std``).

The surrogate's share is measured, not approximated: the best fit's config is simulated (one
seed, the calibration's population and data seed) at each pilot allocation (n, B_problem, M
steps), and its trace's ``zero_var_frac`` is averaged over the steps, weighted by the steps each
value covers. The pass-rate file alone gives the share at the start,
``mean_i p_i^n + (1 - p_i)^n`` over the training problems' base pass rates.

It is reported, not fitted: the logged share is a proportion over B_problem groups per step (its
noise is binomial, not the validation metric's), it comes from the training reward, which in a
trainer may sum several reward functions (a format reward makes groups differ where the 0/1
correctness the surrogate models would not), and the surrogate's own share is a sampled quantity
(a simulated seed), which the mean-field fit cannot differentiate. A share far from the logged
one says the calibrated surrogate learns the training problems at another speed than the model
did, or that the reward is not the 0/1 reward the surrogate assumes.
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def base_share(pass_rates, n: int) -> float:
    """``mean_i p_i^n + (1 - p_i)^n``: the share of groups of n that agree, at the base policy."""
    p = np.asarray(pass_rates, float)
    return float(np.mean(p**n + (1.0 - p) ** n))


def surrogate_shares(cal, allocations, seed: int = 0) -> pd.DataFrame:
    """``n, B_problem, steps, base, surrogate`` per allocation ``(n, B_problem, steps)``."""
    from ..sim.run import simulate
    from .surrogate import base_config, population_for

    cfg = base_config(cal.config(), cal.train, cal.val, cal.metric)
    pop = population_for(cfg, cal.train, cal.val, cal.seed)
    rows = []
    for n, bp, steps in allocations:
        run = cfg.replace(allocation={"n": int(n), "b_problem": int(bp), "steps": int(steps), "budget": 0.0})
        t = simulate(run, seed=seed, population=pop).table
        z = t[(t["split"] == "train") & (t["metric"] == "zero_var_frac")].sort_values("step")
        s = z["step"].to_numpy(float)
        w = np.diff(np.concatenate([[0.0], s]))
        share = float(np.sum(w * z["value"].to_numpy(float)) / np.sum(w)) if len(z) and np.sum(w) > 0 else float("nan")
        rows.append({"n": int(n), "B_problem": int(bp), "steps": int(steps),
                     "base": base_share(cal.train, int(n)), "surrogate": share})
    return pd.DataFrame(rows)
