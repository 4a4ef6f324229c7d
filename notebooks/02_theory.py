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
# # 02 · Theory: the closed forms, each beside a Monte Carlo or simulator check
#
# `isosim.theory` holds the closed forms that explain the simulations, each as a sympy
# expression, its LaTeX and a numeric function. This notebook shows the formulas and the
# seven theory figures. In each figure the **line is the closed form** and the **points with
# error bars (±2 standard errors) are a check**: sampled groups, sampled batches, a simulated
# recursion, a sampled population, or the simulator itself. Here the figures are drawn with
# `quick=True` (smaller samples, a few seconds each); `isosim theory --figures DIR` draws the
# full versions, committed in [`paper_figures/theory/`](../paper_figures/theory/).
# Derivations: [docs/theory.md](../docs/theory.md).

# %%
from IPython.display import Math, display

import isosim.theory as th
from isosim.theory import figures


def formula(name: str) -> None:
    """Show a registered closed form in LaTeX."""
    display(Math(th.closed_form(name).display_latex()))


print(len(th.closed_forms()), "closed forms:", ", ".join(th.closed_forms()))

# %% [markdown]
# ## 1. When does a GRPO group carry signal?
#
# A group of `n` rollouts on a problem with pass rate `p` has `c ~ Binomial(n, p)` successes.
# With a group-mean baseline every advantage is zero when the group is all-correct or
# all-wrong, so the probability of a non-zero update is

# %%
formula("nonzero_signal_prob")
{(p, n): round(float(th.nonzero_signal_prob(p, n)), 3) for p in (0.01, 0.05) for n in (8, 64)}

# %% [markdown]
# At the study's hard-set pass rates, `n = 8` gives signal on 8 % (p = 0.01) or 34 %
# (p = 0.05) of groups; `n = 64` on 47 % and 96 %. Points: the share of sampled groups with
# `0 < c < n`. Right: the same over `(n, p)`.

# %%
figures.show("signal", quick=True)

# %% [markdown]
# ## 2. Informative problems and summed signal at fixed compute per step
#
# With `n * B_problem = 1024` rollouts per step, a batch of `B_problem = 1024 / n` problems
# carries `sum_i 1 - p_i^n - (1 - p_i)^n` informative problems in expectation, and a summed
# signal `sum_i E[S_i]` (std scaling: `S = sqrt(c (n - c))`; mean baseline: `S = c (n - c)/n`).
# The pass rates are those of the easy and hard presets' training problems.

# %%
formula("expected_informative")
figures.show("informative", quick=True)

# %% [markdown]
# On easy problems nearly every group carries signal already at small `n`, so a larger `n`
# only shrinks the batch; on hard problems a larger `n` buys signal on problems that rarely
# give any, and the summed std-scaled signal keeps growing with `n`.
#
# ## 3. Mean and variance of the GRPO update
#
# For two outcomes the summed logit signal `S = sum_j A_j (r_j - p)` depends only on `c`.
# Its mean and variance, for the mean baseline (Dr. GRPO), RLOO, std scaling (GRPO), and a
# baseline decoupled from the update (baseline from `n_est` rollouts, update on `n_train`):

# %%
for name in ("grpo_signal_mean_expectation", "grpo_signal_mean_variance", "grpo_signal_rloo_expectation",
             "grpo_signal_std_expectation", "decoupled_signal_expectation", "decoupled_signal_variance"):
    formula(name)

# %%
figures.show("update", quick=True)

# %% [markdown]
# ## 4. One problem, tabular policy gradient: the `A/(n t) + B/t` bound
#
# One problem, logit `z`, step `z <- z + eta c (n - c)/n^2`. The mean-field ODE integrates in
# closed form and gives `E[1 - p_t] ~ A/(n t) + B/t` with

# %%
formula("tabular_bound")
formula("tabular_fixed_compute")
A, B = th.tabular_bound_constants(8, 1.0)
print(f"n = 8, eta = 1: A = {A:.4f}, B = {B:.4f}; compute-optimal n at C = 1e6: {th.tabular_compute_optimal_n(1e6, 1.0)}")

# %% [markdown]
# Left: against steps, the simulated recursion (points) follows the ODE (lines) and the
# bound (dashed). Right: against compute `C = n t`, the smallest group wins at every budget:
# without shared parameters, sequential steps are worth at least as much as parallel samples.

# %%
figures.show("tabular", quick=True)

# %% [markdown]
# ## 5. The pass@k law of a Beta population
#
# For pass rates `p ~ Beta(a, b)`, `1 - pass@k = B(a, b + k)/B(a, b)`, which decays as the
# power law `Gamma(a + b)/Gamma(b) k^(-a)`: the exponent is the Beta's `a`, the density of
# problems near `p = 0`.

# %%
formula("beta_fail_at_k")
formula("beta_fail_at_k_tail")
figures.show("passk", quick=True)

# %% [markdown]
# ## 6. Success amplification: iterated KL-regularised GRPO
#
# Solving the KL-regularised objective exactly with the std-normalised advantages of the
# current policy gives the map `p_{t+1} = h(p_t)`; its fixed point lies above the
# KL-regularised optimum `p*_KL` (std normalisation amplifies success). Below a critical KL
# coefficient there is no fixed point and `p_t -> 1`.

# %%
formula("kl_regularised_optimum")
formula("grpo_amplification_map")
print({beta: round(th.grpo_amplification_fixed_point(0.1, beta), 4) for beta in (1.0, 2.0, 5.0)})

# %%
figures.show("amplification", quick=True)

# %% [markdown]
# ## 7. The mean field against the simulator
#
# The planner (`isosim plan`) predicts whole reward curves with a mean-field recursion: the
# exact expected GRPO update of every problem. Lines: mean field; points: the simulator
# (mean of seeds, ±2 SE), on the easy and hard presets. (Quick version: 1000 training
# problems and a smaller budget.)

# %%
figures.show("meanfield", quick=True)

# %% [markdown]
# The whole set as PNG and PDF: `isosim theory --figures DIR` (add `--quick` for the small
# version, `--only 1,4` for some). Next: [03 the IsoCompute workflow](03_isocompute_workflow.ipynb).
