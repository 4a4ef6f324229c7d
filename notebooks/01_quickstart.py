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
# # 01 · Quick start: simulate GRPO on a surrogate and look at the curves
#
# isosim trains **bandit surrogate models** of an LLM with GRPO: a population of problems,
# each with a pass rate, and a policy whose parameters are shared between problems. This
# notebook runs the default surrogate (the `strategies` model) on the *easy* preset at two
# group sizes `n` with the **same compute** (rollouts), and plots the validation metrics
# against compute:
#
# * `avg@4`: the mean pass rate;
# * `best@4` (pass@4): the share of problems solved at least once in 4 samples (coverage);
# * `worst@4`: the share solved in all 4 samples (sharpening).
#
# Compute is `C = n * B_problem * M` rollouts: `n` rollouts per problem, `B_problem` problems
# per batch, `M` update steps. A smaller training set than the default keeps this notebook
# fast (a few seconds).

# %%
import matplotlib.pyplot as plt
import pandas as pd

from isosim import SimConfig, simulate
from isosim.analysis.plotting import set_style

set_style()  # the look of isosim's figures (seaborn whitegrid)

base = SimConfig().replace(population={"preset": "easy", "train_size": 1000, "val_size": 200})
budget = 2**20  # rollouts
traces = {
    n: simulate(base.replace(allocation={"n": n, "b_problem": 32, "budget": budget}), seed=0)
    for n in (4, 16, 128)
}
pd.DataFrame({f"n = {n}": tr.final("val") for n, tr in traces.items()}).T[["avg@4", "best@4", "worst@4"]]

# %% [markdown]
# Each trace is tidy: one row per step, split and metric, with the compute spent so far.

# %%
traces[16].table.head()

# %% [markdown]
# The curves, on a log compute axis. Small `n` takes many more steps for the same compute and
# gains early; large `n` starts slowly and catches up, or overtakes, later.

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharex=True)
for ax, metric in zip(axes, ("avg@4", "best@4", "worst@4")):
    for n, tr in traces.items():
        c = tr.curve(metric, "val")
        c = c[c["compute_rollouts"] > 0]
        ax.plot(c["compute_rollouts"], c["value"], marker="o", ms=3, label=f"n = {n}")
    ax.set_xscale("log")
    ax.set_title(f"validation {metric}")
    ax.set_xlabel("compute (rollouts)")
axes[0].legend()
fig.tight_layout()

# %% [markdown]
# ## Per-problem pass rates over training
#
# Ask for snapshots of every problem's pass rate at chosen steps (`eval.snapshot_steps`). On
# the *hard* preset, the histogram of pass@1 over training problems is the study's diagnostic
# of how updates concentrate: a small `n` piles problems at 0 and at 1.

# %%
hard = base.replace(population={"preset": "hard"},
                    allocation={"n": 8, "b_problem": 32, "budget": 2**19},
                    eval={"snapshot_steps": (0, 200, 2000)})
tr = simulate(hard, seed=0)
snap = tr.snapshots[tr.snapshots["split"] == "train"]

fig, ax = plt.subplots(figsize=(6, 3.4))
for step, g in snap.groupby("step"):
    ax.hist(g["pass_rate"], bins=20, range=(0, 1), histtype="step", lw=1.5, label=f"step {step}")
ax.set_yscale("log")
ax.set_xlabel("pass@1 of a training problem")
ax.set_ylabel("problems")
ax.legend()
fig.tight_layout()

# %% [markdown]
# Every configuration field is also a command-line flag: `isosim simulate --help`. Next:
# [02 theory](02_theory.ipynb), the closed forms behind these curves.
