# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · The IsoCompute workflow on a small sweep: frontier, n\*(C) and the fitted law
#
# The study's question Q1: with `B_problem` fixed, how should a budget of `C` rollouts be
# split between the group size `n` and the number of steps `M = C / (n B_problem)`? The
# workflow, as in the paper and in `isosim reproduce`:
#
# 1. a **sweep**: one run per `n` (and seed) up to the largest budget; smaller budgets are
#    read off each run's log-spaced evaluations;
# 2. the **frontier** `f(C)`: the best validation reward reached by any run within `C`;
# 3. per `n`, a monotone sigmoid of reward against compute (ScaleRL's form); the upper
#    envelope of these curves gives the **compute-optimal** `n*(C)`;
# 4. the **law** `log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b`.
#
# This notebook runs a small version (easy preset, 2000 training problems, 5 values of `n` on
# the study's grid, 8 to 2048, 2 seeds, 2^22 rollouts: about 10 s on 2 cores) into a result
# store in a temporary folder.

# %%
import tempfile

import matplotlib.pyplot as plt

from isosim import SimConfig
from isosim.analysis.fit import analyse_runs
from isosim.analysis.plotting import plot_frontier, plot_n_star, set_style
from isosim.experiments.sweep import SweepSpec, evaluations, run_sweep

set_style()

spec = SweepSpec(
    id="notebook-q1-easy",
    question="Q1",
    base=SimConfig().replace(population={"preset": "easy", "train_size": 2000, "val_size": 200}),
    n=(8, 32, 128, 512, 2048),
    b_problem=(32,),
    budget=2.0**22,
    seeds=(0, 1),
)
print(f"{len(list(spec.runs(0)))} runs: n in {spec.n}, B_problem = {spec.b_problem[0]}, "
      f"budget {spec.budget:,.0f} rollouts, seeds {spec.seeds}")

# %% [markdown]
# Run it. The runs go to two worker processes, each finished run is written to the store at
# once (an interrupted sweep resumes), and a progress bar shows on stderr (in a notebook it
# renders here; on the command line, `isosim sweep SPEC --out DIR` does the same).

# %%
workdir = tempfile.TemporaryDirectory(prefix="isosim-sweep-")  # removed when the kernel stops
store = run_sweep(spec, workdir.name, workers=2)
ev = evaluations(store.read())  # one row per evaluation: run, n, B_problem, compute, metrics
ev[["run", "n", "B_problem", "step", "compute", "avg@4", "best@4", "worst@4"]].head()

# %% [markdown]
# ## Frontier, per-n curves, n\*(C) and the law
#
# `analyse_runs` does steps 2 to 4: record-breaking points, one ScaleRL sigmoid per `n`, the
# envelope, `n*(C)` on a log grid of compute, and the law with bootstrap confidence
# intervals (50 resamples of runs here; `isosim fit` uses 200).

# %%
res = analyse_runs(ev, metric="avg@4", n_boot=50, seed=0)
data = res.runs.assign(value=res.runs["avg@4"])

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
plot_frontier(data, res.frontier, ax=ax1)
ax1.set_ylabel("validation avg@4")
plot_n_star(res.n_star, res.law, ax=ax2)
fig.tight_layout()

# %% [markdown]
# The compute-optimal `n` rises with the budget and saturates. The fitted law beside the
# study's fit on its easy set (Q1, `B_problem = 32`; Qwen2.5-7B-Instruct):

# %%
import pandas as pd

study = {"L": 6.09, "k": 4.75, "log10_C0": 5.84, "b": 2.73}
pd.DataFrame({
    "this sweep": res.law.params(),
    "95% CI": {p: f"[{lo:.2f}, {hi:.2f}]" for p, (lo, hi) in res.law.ci.items()},
    "study (easy)": study,
}).round(2)

# %% [markdown]
# `n*(C)` at a few budgets, and the saturation `2^(L + b)`:

# %%
p = res.law.params()
print(res.n_star.iloc[::6][["compute", "n"]].to_string(index=False))
print(f"saturation: n* -> 2^{p['L'] + p['b']:.1f} = {2 ** (p['L'] + p['b']):.0f}; R^2 = {res.law.r2:.3f}")

# %% [markdown]
# A small sweep like this is noisy: the intervals are wide and the saturation sits where the
# grid of `n` stops changing the winner. The full study in simulation is `isosim reproduce`
# (28 sweeps, the twelve findings, about 13 minutes on 2 cores, 2 with `--quick`); your own
# logs go through the same pipeline with `isosim fit FILE` ([docs/analysis.md](../docs/analysis.md)).
# Next:
# [04 plan your own run](04_plan_your_run.ipynb).
