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
# # 06 · Your own runs: trainers' logs in, frontier, n*(C) and a plan out
#
# `isosim fit` and `isosim calibrate` read the logs your trainer already wrote: TRL
# `GRPOTrainer` output directories, verl's JSON-lines file log with its config, TensorBoard
# event directories and W&B or MLflow CSV exports. n, B_problem and the rollouts spent at
# each step come from the trainer's own config (for TRL, `training_args.bin`).
#
# Here we make three small, real TRL runs first (a one-layer Qwen2 of width 32, randomly
# initialised, on CPU, offline: `docs/make_trl_runs.py`), at n = 2, 4 and 8 with 4 prompts
# per step and 40 steps each. With your own runs you start at the next cell but one.

# %%
import importlib.util
import tempfile
from pathlib import Path

spec = importlib.util.spec_from_file_location("make_trl_runs", "../docs/make_trl_runs.py")
mk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mk)
mk.offline()
workdir = tempfile.TemporaryDirectory(prefix="isosim-runs-")  # removed when the kernel stops
out = Path(workdir.name)
runs = [mk.make_run(out / f"n{n}", n, seed=0, steps=40, b_problem=4) for n in (2, 4, 8)]
rates = mk.base_pass_rates(out / "pass_rates.csv", seed=0, problems=64)
print(*runs, rates, sep="\n")

# %% [markdown]
# ## The runs table
#
# `read_logs` gives the one table every trainer's log becomes: run, n, B_problem, step,
# compute (training rollouts so far), tokens, the validation metric (TRL's `eval_reward`),
# the training reward and the share of zero-signal groups (`frac_reward_zero_std`).

# %%
import matplotlib.pyplot as plt

from isosim.analysis.logs import read_logs
from isosim.analysis.plotting import set_style

set_style()
logs = read_logs(runs, metric="avg@1")
print(logs.table.dropna(subset=["avg@1"]).head(8).to_string(index=False))

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
for run, g in logs.table.groupby("run"):
    e = g.dropna(subset=["avg@1"])
    left.plot(e["compute"], e["avg@1"], marker="o", ms=3, label=f"n = {g['n'].iloc[0]}")
    right.plot(g["step"], g["zero_std_share"].rolling(5, min_periods=1).mean(), label=f"n = {g['n'].iloc[0]}")
left.set(xscale="log", xlabel="training rollouts", ylabel="eval_reward (avg@1)")
right.set(xlabel="step", ylabel="zero-signal share (5-step mean)")
left.legend()
fig.tight_layout()

# %% [markdown]
# ## Frontier and n*(C): `isosim fit`
#
# In a terminal: `isosim fit out/n2 out/n4 out/n8`. Runs this short and this noisy give a
# frontier and a step in n*, not a law to trust: the point is the path from the logs.

# %%
from isosim.cli import main

main(["fit", *map(str, runs), "--n-boot", "0", "--bucket", "0"])

# %% [markdown]
# ## Calibrate the surrogate and plan: `isosim calibrate`, `isosim plan`
#
# The pilots are the same three runs; the base model's pass rates on 64 training prompts
# were measured with 16 samples each. `calibrate` also reports the share of zero-signal
# groups that the calibrated surrogate predicts beside the logged one.

# %%
calib = out / "calib.toml"
main(["calibrate", *map(str, runs), "--pass-rates", str(rates), "--n", "2,4,8,16", "--out", str(calib)])

# %%
main(["plan", "--pass-rates", str(rates), "--budget", "2e4", "--b-max", "64", "--metric", "avg@1",
      "--model-config", str(calib)])
