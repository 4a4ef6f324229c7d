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
# # 05 · Reading the LM validation results
#
# `isosim lm validate` checks the surrogate against a real language model: a small GPT,
# trained from scratch on a chained modular-arithmetic task, then trained by real GRPO on
# an easy and a hard subset (picked by the base model's measured avg@16) over a grid of `n`
# at fixed `B_problem` (Q1) and over a fixed-batch grid (`n * B_problem` fixed). The
# measured compute-optimal `n*(C)` is compared with the one isosim's surrogate predicts from
# the measured pass rates alone. ([docs/lm.md](../docs/lm.md) has the protocol.)
#
# The results read here are committed in
# [`paper_figures/lm/quick/`](../paper_figures/lm/quick/), from the CPU configuration:
#
# ```console
# $ isosim lm validate --quick --out paper_figures/lm/quick
# ```
#
# (about 2 minutes on 2 CPU cores, needs the `lm` extra; this notebook only reads the files,
# so it needs neither PyTorch nor the time). Everything is in `results.jsonl`, one JSON
# record per event, appended as the validation runs; `report.md` and `lm_validation.png`
# are drawn from it.

# %%
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from isosim.analysis.plotting import set_style

set_style()
root = Path("../paper_figures/lm/quick")
records = [json.loads(line) for line in (root / "results.jsonl").read_text().splitlines() if line.strip()]
result = [r for r in records if r["kind"] == "result"][-1]  # the final summary, as `--json` prints it
plan = result["plan"]
pd.Series({k: sum(r["kind"] == k for r in records) for k in dict.fromkeys(r["kind"] for r in records)},
          name="records")

# %% [markdown]
# The grid that ran: the validation times a few GRPO steps first and fits its grid to its
# time budget, so on a slow or busy machine the largest budget `C_max` shrinks.

# %%
fb = plan["fixed_batch"]
print(f"Q1 grid: n in {plan['n_grid']}, C_max = {plan['budget']} rollouts"
      f"{' (shrunk to fit the time budget)' if plan['shrunk'] else ''}")
print(f"fixed-batch grid: B = n * B_problem = {fb['B']}, (n, B_problem) in {[tuple(s) for s in fb['splits']]}, "
      f"M_max = {fb['m_max']}")
print(f"wall time {result['seconds']:.0f} s on {result['device']}")

# %% [markdown]
# ## Learning curves: the LM (measured) and the surrogate (predicted)
#
# Validation avg@1 against compute, one line per `n`. The LM's evaluations are the `eval`
# records of finished runs; the surrogate's curves are in the `prediction` records (its one
# free constant, the learning rate, was fitted to the LM's curve at the reference `n` only).

# %%
c_max = plan["budget"]
done = {(r["subset"], r["n"]): r["attempt"] for r in records if r["kind"] == "run_done" and r["budget"] == c_max}
ev = pd.DataFrame([r for r in records if r["kind"] == "eval" and r["budget"] == c_max
                   and r["n"] > 0 and done.get((r["subset"], r["n"])) == r["attempt"]])
surrogate = {r["subset"]: r["surrogate_curves"] for r in records if r["kind"] == "prediction"}
colors = dict(zip(plan["n_grid"], sns.color_palette("viridis", len(plan["n_grid"]))))

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, (subset, g) in zip(axes, ev.groupby("subset")):
    for n, gn in g[g["compute"] > 0].groupby("n"):
        ax.plot(gn["compute"], gn["value"], "o-", color=colors[n], label=f"n = {n}")
        pts = sorted((int(c), v) for c, v in surrogate[subset][str(n)].items())
        ax.plot(*zip(*pts), "--", color=colors[n])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("compute C (rollouts)")
    ax.set_ylabel("validation avg@1")
    ax.set_title(f"{subset}: LM (solid), surrogate (dashed)")
axes[0].legend(fontsize="small")
fig.tight_layout()

# %% [markdown]
# ## n\*(C): measured against predicted
#
# At each budget the measured `n*` is the `n` with the best validation avg@1 so far (ties to
# the smaller `n`); the predicted one applies the same rule to the surrogate's curves. The
# agreement is the mean `|log2 n*_measured - log2 n*_predicted|` over budgets, beside two
# trivial predictors that always answer the smallest or the largest `n` of the grid.

# %%
rows = []
for subset in result["measured"]:
    for m, p in zip(result["measured"][subset], result["predicted"][subset]):
        rows.append({"subset": subset, "C": m["compute"], "n* measured": m["n"], "n* predicted": p["n"]})
display_table = pd.DataFrame(rows).set_index(["subset", "C"])
display_table

# %%
summary = pd.DataFrame({
    subset: {"surrogate": result["agreement"][subset]["mean_abs_log2_error"], **result["baselines"][subset]}
    for subset in result["agreement"]
}).T
summary.columns = [f"mean |log2 error|: {c}" for c in summary.columns]
summary.round(2)

# %% [markdown]
# ## The fixed-batch grid: n\*(M)
#
# With the total batch `n * B_problem` fixed, the split is swept and `n*(M)` read at a few
# step counts `M`, measured and predicted (the same fitted learning rate).

# %%
fbr = result["fixed_batch"]
rows = []
for subset in fbr["measured"]:
    for m, p in zip(fbr["measured"][subset], fbr["predicted"][subset]):
        rows.append({"subset": subset, "M": m["M"], "n* measured": m["n"], "B_problem* measured": m["B_problem"],
                     "n* predicted": p["n"], "B_problem* predicted": p["B_problem"]})
pd.DataFrame(rows).set_index(["subset", "M"])

# %% [markdown]
# At this scale (a few thousand rollouts, one run per `n`) the measured `n*` is noisy: the
# runner-up is often within one standard error (see the report's tables, `report.md`), so
# single-budget disagreements say little; the mean error against the trivial predictors is
# the number to read. The report and the figure, as committed:
# [`report.md`](../paper_figures/lm/quick/report.md),
# [`lm_validation.png`](../paper_figures/lm/quick/lm_validation.png).
