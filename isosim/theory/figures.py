"""The theory figures: each closed form as a line, beside a Monte Carlo or simulator check.

Seven figures (``isosim theory --figures DIR``; committed in ``paper_figures/theory/``), each
drawn by one function ``quick -> Figure`` in the shared style of
:mod:`isosim.analysis.plotting`, saved as PNG and PDF without timestamps. Checks use fixed
seeds, so the same code gives the same bytes; error bars are +-2 standard errors.

1. ``signal``: P(non-zero signal) = 1 - p^n - (1-p)^n against n for several p, and as a
   heat map over (n, p); points: the share of sampled groups with 0 < c < n.
2. ``informative``: expected informative problems per batch and expected summed signal
   sum_i E[S_i] for the easy and hard pass-rate populations, against n at a fixed
   n * B_problem; points: sampled batches.
3. ``update``: mean and variance of the group-averaged logit update S/n (mean baseline, std
   scaling, RLOO, decoupled baseline) against n; points: literal groups of rewards.
4. ``tabular``: single-problem tabular policy gradient, 1 - p_t against steps and against
   compute for several n at equal compute, the ODE and A/(n t) + B/t beside the simulated
   recursion.
5. ``passk``: 1 - pass@k = B(a, b+k)/B(a, b) with its k^(-a) asymptote on log-log axes,
   beside sampled populations (unbiased pass@k from m sampled rollouts per problem).
6. ``amplification``: the fixed point of KL-regularised iterated GRPO against the KL
   coefficient, with the KL-regularised optimum; points: the iteration with advantages
   estimated from sampled rollouts.
7. ``meanfield``: mean-field (:func:`isosim.plan.meanfield.mean_field`) against simulated
   (:func:`isosim.simulate`) validation avg@4 curves for several n, easy and hard presets.

This module draws, so it is the one part of :mod:`isosim.theory` that imports from above the
theory layer (the plotting style, and the simulator and mean field for figure 7); the
package ``isosim.theory`` does not import it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import scipy.special as sps
import seaborn as sns
from matplotlib.figure import Figure

from ..analysis.plotting import PALETTE, new_figure, save_figure, set_style
from ..errors import IsosimInputError
from .amplification import grpo_amplification_fixed_points, kl_regularised_optimum
from .grpo import decoupled_signal_expectation, decoupled_signal_variance, grpo_signal_expectation, grpo_signal_variance
from .passk import beta_fail_at_k, beta_fail_at_k_tail, pass_at_k_unbiased
from .signal import nonzero_signal_prob
from .tabular import tabular_bound_constants, tabular_ode_suboptimality, tabular_suboptimality_bound

#: distinct colours for named series (as in the finding figures); n is coloured with PALETTE
COLORS = sns.color_palette("colorblind")
#: +- this many standard errors on every Monte Carlo point
K_SE = 2.0
_ERR = dict(fmt="o", ms=3.5, capsize=2, elinewidth=1, lw=0, zorder=3)


def _figure(ncols: int = 1, width: float = 4.2, height: float = 3.2):
    set_style()
    return new_figure(ncols, width, height)


def _se(x: np.ndarray, axis: int = 0) -> np.ndarray:
    return np.std(x, axis=axis, ddof=1) / math.sqrt(x.shape[axis])


def _var_se(x: np.ndarray) -> float:
    """Standard error of the sample variance: sqrt((m4 - s^4) / N)."""
    d = x - x.mean()
    return float(math.sqrt(max(np.mean(d**4) - np.mean(d**2) ** 2, 0.0) / x.size))


def _int_grid(lo: int, hi: int, num: int = 120) -> np.ndarray:
    return np.unique(np.round(np.geomspace(lo, hi, num)).astype(int))


def _log2_xaxis(ax, ticks: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ticks), [str(t) for t in ticks])
    ax.minorticks_off()


# --------------------------------------------------------------------------- 1. signal
#: the study's reference values: P(non-zero signal) at p = 0.01 and 0.05, n = 8 and 64
STUDY_POINTS = ((0.01, 8), (0.01, 64), (0.05, 8), (0.05, 64))


def fig_signal(quick: bool = False) -> Figure:
    """1 - p^n - (1-p)^n against n (lines) and the share of sampled groups with 0 < c < n."""
    rng = np.random.default_rng(1)
    groups = 2_000 if quick else 20_000
    fig, (ax, hm) = _figure(2, width=4.4, height=3.4)
    ps = (0.005, 0.01, 0.05, 0.2, 0.5)
    n_line = np.geomspace(1, 1024, 300)
    n_pts = 2 ** np.arange(0, 11)
    for j, p in enumerate(ps):
        col = COLORS[j]
        ax.plot(n_line, nonzero_signal_prob(p, n_line), color=col, lw=1.4, label=f"p = {p:g}")
        c = rng.binomial(n_pts[:, None], p, size=(n_pts.size, groups))
        hit = ((c > 0) & (c < n_pts[:, None])).astype(float)
        ax.errorbar(n_pts, hit.mean(1), yerr=K_SE * _se(hit, 1), color=col, **_ERR)
    for p, n in STUDY_POINTS:
        v = float(nonzero_signal_prob(p, n))
        ax.annotate(f"{v:.3f}", (n, v), textcoords="offset points", xytext=(4, -10 if v > 0.5 else 4),
                    fontsize="x-small")
    _log2_xaxis(ax, [1, 4, 16, 64, 256, 1024])
    ax.set_xlabel("group size n (rollouts per problem)")
    ax.set_ylabel("P(group carries signal)")
    ax.set_title(r"$1 - p^n - (1-p)^n$: lines; sampled groups: points", fontsize="small")
    ax.legend(fontsize="x-small", loc="upper left")

    n_edges = 2 ** np.arange(-0.5, 12.0, 0.25)
    p_edges = np.geomspace(1e-4, 0.5, 120)
    n_mid = np.sqrt(n_edges[:-1] * n_edges[1:])
    p_mid = np.sqrt(p_edges[:-1] * p_edges[1:])
    z = nonzero_signal_prob(p_mid[:, None], n_mid[None, :])
    mesh = hm.pcolormesh(n_edges, p_edges, z, cmap=PALETTE, vmin=0, vmax=1, shading="flat", rasterized=True)
    cs = hm.contour(n_mid, p_mid, z, levels=[0.1, 0.5, 0.9], colors="white", linewidths=0.8)
    for p, n in STUDY_POINTS:
        hm.plot(n, p, "o", ms=4, mfc="white", mec="black", mew=0.6)
    hm.set_xscale("log", base=2)
    hm.set_yscale("log")
    ticks = [1, 4, 16, 64, 256, 1024, 4096]
    hm.set_xticks(ticks, [str(t) for t in ticks])
    hm.set_xlim(n_edges[0], n_edges[-1])
    hm.set_xlabel("group size n")
    hm.set_ylabel("pass rate p (the same for 1 - p)")
    hm.set_title("P(signal) over (n, p); dots: p = 0.01, 0.05 at n = 8, 64", fontsize="small")
    hm.grid(False)
    bar = fig.colorbar(mesh, ax=hm, label="P(0 < c < n); lines at 0.1, 0.5, 0.9")
    bar.add_lines(cs)
    return fig


# --------------------------------------------------------------------------- 2. informative
#: rollouts per step (n * B_problem) in figure 2
ROLLOUTS_PER_STEP = 1024


def _preset_pass_rates(preset: str, quick: bool) -> np.ndarray:
    from ..sim.config import SimConfig
    from ..sim.population import build_population

    pop = {"population": {"preset": preset}} if not quick else {
        "population": {"preset": preset, "train_size": 1000, "val_size": 100}}
    cfg = SimConfig().replace(**pop)
    return build_population(cfg.population, cfg.model).train.base_pass


def fig_informative(quick: bool = False) -> Figure:
    """Expected informative problems and summed signal per batch at a fixed n * B_problem."""
    rng = np.random.default_rng(2)
    batches = 100 if quick else 1000
    B = ROLLOUTS_PER_STEP
    ns = 2 ** np.arange(1, 11)
    fig, (ax_i, ax_s) = _figure(2, width=4.3)
    for j, preset in enumerate(("easy", "hard")):
        pr = _preset_pass_rates(preset, quick)
        col = COLORS[j]
        bp = B // ns
        # closed forms on every integer n of a log grid, with B_problem = B / n read as a rate
        n_line = _int_grid(2, 1024, 40)
        informative = [B / n * nonzero_signal_prob(pr, n).mean() for n in n_line]
        signal = {adv: [B / n * grpo_signal_expectation(int(n), pr, adv).mean() for n in n_line]
                  for adv in ("std", "mean")}
        ax_i.plot(n_line, informative, color=col, lw=1.4, label=f"{preset} (mean p = {pr.mean():.3f})")
        ax_s.plot(n_line, signal["std"], color=col, lw=1.4)
        ax_s.plot(n_line, signal["mean"], color=col, lw=1.2, ls="--")
        mc_i, se_i, mc = [], [], {"std": ([], []), "mean": ([], [])}
        for n, bp_ in zip(ns, bp):
            idx = rng.integers(0, pr.size, size=(batches, bp_))
            c = rng.binomial(n, pr[idx])
            inf = ((c > 0) & (c < n)).sum(1).astype(float)
            mc_i.append(inf.mean())
            se_i.append(_se(inf))
            prod = c * (n - c)
            for adv, s in (("std", np.sqrt(prod).sum(1)), ("mean", (prod / n).sum(1))):
                mc[adv][0].append(s.mean())
                mc[adv][1].append(_se(s))
        ax_i.errorbar(ns, mc_i, yerr=K_SE * np.array(se_i), color=col, **_ERR)
        for adv, mk in (("std", "o"), ("mean", "s")):
            ax_s.errorbar(ns, mc[adv][0], yerr=K_SE * np.array(mc[adv][1]), color=col, **{**_ERR, "fmt": mk})
    ax_s.plot([], [], color="gray", lw=1.4, label=r"std scaling (GRPO): $S = \sqrt{c(n-c)}$")
    ax_s.plot([], [], color="gray", lw=1.2, ls="--", label=r"mean baseline (Dr. GRPO): $S = c(n-c)/n$")
    for ax in (ax_i, ax_s):
        _log2_xaxis(ax, [2, 8, 32, 128, 512])
        ax.set_xlabel(f"n (B_problem = {B} / n)")
        ax.legend(fontsize="x-small", loc="lower right" if ax is ax_s else "upper right")
    ax_s.set_ylim(bottom=2**2.5)
    ax_i.set_yscale("log", base=2)
    ax_i.set_ylabel("E[informative problems per batch]")
    ax_i.set_title(r"$\sum_i 1 - p_i^n - (1-p_i)^n$ over a batch", fontsize="small")
    ax_s.set_yscale("log", base=2)
    ax_s.set_ylabel(r"E[summed signal $\sum_i S_i$] per batch")
    ax_s.set_title(f"{B} rollouts per step; points: sampled batches", fontsize="small")
    return fig


# --------------------------------------------------------------------------- 3. update
#: pass rate of figure 3, and the decoupled baseline's group (n_est = DECOUPLED * n)
UPDATE_P = 0.2
DECOUPLED = 4


def _update_samples(rng, n: int, p: float, groups: int) -> dict[str, np.ndarray]:
    """S/n for each estimator from literal groups of rewards (decoupled: baseline from
    DECOUPLED * n rollouts, update on the first n of them, a uniformly random subset)."""
    out: dict[str, list] = {k: [] for k in ("mean", "std", "rloo", "decoupled")}
    chunk = max(1, 2_000_000 // (DECOUPLED * n))
    for start in range(0, groups, chunk):
        g = min(chunk, groups - start)
        r_all = (rng.random((g, DECOUPLED * n)) < p).astype(float)
        r = r_all[:, :n]
        rbar = r.mean(1, keepdims=True)
        sd = r.std(1, keepdims=True)
        adv = {
            "mean": r - rbar,
            "std": np.divide(r - rbar, sd, out=np.zeros_like(r), where=sd > 0),
            "rloo": r - (r.sum(1, keepdims=True) - r) / (n - 1),
            "decoupled": r - r_all.mean(1, keepdims=True),
        }
        for k, a in adv.items():
            out[k].append((a * (r - p)).sum(1) / n)
    return {k: np.concatenate(v) for k, v in out.items()}


def fig_update(quick: bool = False) -> Figure:
    """E[S/n] and Var[S/n] of the group-averaged logit update against n, four estimators."""
    rng = np.random.default_rng(3)
    groups = 2_000 if quick else 20_000
    p = UPDATE_P
    fig, (ax_m, ax_v) = _figure(2, width=4.3)
    n_line = _int_grid(2, 1024)
    n_pts = 2 ** np.arange(1, 10)
    names = {"mean": "mean baseline (Dr. GRPO)", "std": "std scaling (GRPO)", "rloo": "RLOO",
             "decoupled": f"decoupled: baseline from {DECOUPLED}n"}

    def closed(adv: str, n: int) -> tuple[float, float]:
        if adv == "decoupled":
            return (float(decoupled_signal_expectation(DECOUPLED * n, n, p)) / n,
                    float(decoupled_signal_variance(DECOUPLED * n, n, p)) / n**2)
        return float(grpo_signal_expectation(n, p, adv)) / n, float(grpo_signal_variance(n, p, adv)) / n**2

    samples = {int(n): _update_samples(rng, int(n), p, groups) for n in n_pts}
    for j, (adv, label) in enumerate(names.items()):
        col = COLORS[j]
        mv = np.array([closed(adv, int(n)) for n in n_line])
        ax_m.plot(n_line, mv[:, 0], color=col, lw=1.4, label=label)
        ax_v.plot(n_line, mv[:, 1], color=col, lw=1.4, label=label)
        s = [samples[int(n)][adv] for n in n_pts]
        ax_m.errorbar(n_pts, [x.mean() for x in s], yerr=[K_SE * _se(x) for x in s], color=col, **_ERR)
        ax_v.errorbar(n_pts, [x.var(ddof=1) for x in s], yerr=[K_SE * _var_se(x) for x in s], color=col, **_ERR)
    for ax in (ax_m, ax_v):
        _log2_xaxis(ax, [2, 8, 32, 128, 512])
        ax.set_xlabel("group size n")
    ax_m.set_ylabel("E[S / n] (expected logit update)")
    ax_m.set_ylim(bottom=0)
    ax_m.set_title(f"p = {p:g}: closed forms (lines), sampled groups (points)", fontsize="small")
    ax_m.legend(fontsize="x-small")
    ax_v.set_yscale("log")
    ax_v.set_ylabel("Var[S / n]")
    ax_v.set_title(r"$S = \sum_j A_j (r_j - p)$, per-rollout average", fontsize="small")
    return fig


# --------------------------------------------------------------------------- 4. tabular
#: step size and start of figure 4 (p_0 = sigmoid(z_0) = 0.5)
TABULAR_ETA, TABULAR_Z0 = 1.0, 0.0


def _tabular_runs(n: int, steps: int, runs: int, rng, marks: np.ndarray) -> np.ndarray:
    """1 - p_t at the steps ``marks`` of ``runs`` independent recursions
    z <- z + eta c (n - c)/n^2, c ~ Binomial(n, sigmoid(z)): shape (len(marks), runs)."""
    z = np.full(runs, TABULAR_Z0)
    out = np.empty((marks.size, runs))
    j = 0
    for t in range(1, steps + 1):
        c = rng.binomial(n, sps.expit(z))
        z += TABULAR_ETA * c * (n - c) / n**2
        while j < marks.size and marks[j] == t:
            out[j] = sps.expit(-z)
            j += 1
    return out


def fig_tabular(quick: bool = False) -> Figure:
    """1 - p_t of one problem against steps and against compute C = n t, equal budgets."""
    rng = np.random.default_rng(4)
    budget = 2**12 if quick else 2**16
    runs = 200 if quick else 1000
    eta = TABULAR_ETA
    fig, (ax_t, ax_c) = _figure(2, width=4.3)
    ns = (2, 8, 32, 128)
    colors = dict(zip(ns, sns.color_palette(PALETTE, len(ns))))
    for n in ns:
        steps = budget // n
        marks = np.unique(np.round(np.geomspace(1, steps, 12)).astype(int))
        u = _tabular_runs(n, steps, runs, rng, marks)
        t_line = np.geomspace(1, steps, 80)
        ode = tabular_ode_suboptimality(t_line, n, eta, TABULAR_Z0)
        bound = tabular_suboptimality_bound(t_line, n, eta)
        bound = np.where(bound < 1, bound, np.nan)
        for ax, scale in ((ax_t, 1), (ax_c, n)):
            ax.plot(t_line * scale, ode, color=colors[n], lw=1.4, label=f"n = {n}" if ax is ax_t else None)
            ax.plot(t_line * scale, bound, color=colors[n], lw=1.0, ls="--")
            ax.errorbar(marks * scale, u.mean(1), yerr=K_SE * _se(u, 1), color=colors[n], **_ERR)
    A, B = tabular_bound_constants(2, eta)
    ax_t.plot([], [], color="gray", lw=1.4, label="mean-field ODE")
    ax_t.plot([], [], color="gray", lw=1.0, ls="--", label=r"$A/(n t) + B/t$")
    ax_t.errorbar([], [], yerr=[], color="gray", label="simulated (points)", **_ERR)
    for ax in (ax_t, ax_c):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylabel(r"$E[1 - p_t]$")
    ax_t.set_xlabel("update steps t")
    ax_t.set_title(rf"one problem, $\eta$ = {eta:g}, $p_0$ = 0.5; $A = n/((n-1)\eta)$, $B = 1/\eta$",
                   fontsize="small")
    ax_t.legend(fontsize="x-small")
    ax_c.set_xlabel("compute C = n t (rollouts)")
    ax_c.set_title(f"equal compute ({budget:,} rollouts): the smallest n wins", fontsize="small")
    ax_c.set_ylim(ax_t.get_ylim())
    return fig


# --------------------------------------------------------------------------- 5. pass@k
#: Beta populations of figure 5
BETA_POPULATIONS = ((0.3, 1.0), (0.5, 2.0), (1.0, 3.0))


def fig_passk(quick: bool = False) -> Figure:
    """1 - pass@k of a Beta(a, b) population and its k^(-a) tail, beside sampled populations."""
    rng = np.random.default_rng(5)
    problems = 300 if quick else 2000
    m = 2**12 if quick else 2**14
    fig, (ax,) = _figure(1, width=5.0, height=3.6)
    k_line = np.geomspace(1, 1e5, 200)
    k_pts = 2 ** np.arange(0, int(math.log2(m // 4)) + 1, 2)
    for j, (a, b) in enumerate(BETA_POPULATIONS):
        col = COLORS[j]
        ax.plot(k_line, beta_fail_at_k(a, b, k_line), color=col, lw=1.4, label=f"p ~ Beta({a:g}, {b:g})")
        tail = beta_fail_at_k_tail(a, b, k_line)
        ax.plot(k_line, np.where(tail < 1, tail, np.nan), color=col, lw=1.0, ls="--")
        p = rng.beta(a, b, problems)
        c = rng.binomial(m, p)
        fails = np.array([1.0 - pass_at_k_unbiased(c, m, int(k)) for k in k_pts])
        ax.errorbar(k_pts, fails.mean(1), yerr=K_SE * _se(fails, 1), color=col, **_ERR)
    ax.plot([], [], color="gray", lw=1.4, label=r"$B(a, b+k)/B(a, b)$")
    ax.plot([], [], color="gray", lw=1.0, ls="--", label=r"tail $\Gamma(a+b)/\Gamma(b)\, k^{-a}$")
    ax.errorbar([], [], yerr=[], color="gray", label="sampled population", **_ERR)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("1 - pass@k")
    ax.set_title(f"points: {problems} sampled problems, unbiased pass@k from m = {m:,} rollouts each",
                 fontsize="small")
    ax.legend(fontsize="x-small", ncols=1, loc="lower left")
    return fig


# --------------------------------------------------------------------------- 6. amplification
#: reference pass rates of figure 6, and the rollouts per iteration of its sampled iteration
AMPLIFICATION_P0 = (0.05, 0.1, 0.3)
AMPLIFICATION_GROUP = 4096


def _sampled_iteration(p0: float, beta: float, rng, runs: int, iters: int, group: int) -> np.ndarray:
    """Iterated GRPO with advantages estimated from ``group`` sampled rollouts of p_t:
    p_{t+1} = sigmoid(logit p0 + (A+ - A-)/beta), A+ - A- = 1/sqrt(p^ (1 - p^)); the mean
    of the last half of the iterations, per run."""
    p = np.full(runs, p0)
    tail = []
    for it in range(iters):
        ph = rng.binomial(group, p) / group
        sd = np.sqrt(ph * (1 - ph))
        gap = np.divide(1.0, sd, out=np.zeros_like(sd), where=sd > 0)  # all-equal group: no signal
        p = sps.expit(sps.logit(p0) + gap / beta)
        if it >= iters // 2:
            tail.append(p)
    return np.mean(tail, axis=0)


def fig_amplification(quick: bool = False) -> Figure:
    """Fixed points of iterated KL-regularised GRPO against beta, with the KL optimum."""
    rng = np.random.default_rng(6)
    runs, iters = (8, 60) if quick else (16, 200)
    fig, (ax,) = _figure(1, width=7.2, height=3.6)
    betas = np.geomspace(0.3, 30, 160)
    b_pts = np.geomspace(0.3, 30, 11)
    for j, p0 in enumerate(AMPLIFICATION_P0):
        col = COLORS[j]
        stable, unstable = [], []
        for bt in betas:
            fps = grpo_amplification_fixed_points(p0, float(bt))
            stable.append(next((q for q, s in fps if s), 1.0))
            unstable.append(next((q for q, s in fps if not s), np.nan))
        ax.plot(betas, stable, color=col, lw=1.4, label=f"$p_0$ = {p0:g}")
        ax.plot(betas, unstable, color=col, lw=0.8, ls=":")
        ax.plot(betas, kl_regularised_optimum(p0, betas), color=col, lw=1.0, ls="--")
        ax.axhline(p0, color=col, lw=0.6, alpha=0.5)
        pts = []
        for bt in b_pts:
            fps = grpo_amplification_fixed_points(p0, float(bt))
            q = next((q for q, s in fps if s), 1.0)
            if q < 0.95:  # near p = 1 a finite group is often all-correct: no sampled check there
                v = _sampled_iteration(p0, float(bt), rng, runs, iters, AMPLIFICATION_GROUP)
                pts.append((bt, v.mean(), _se(v)))
        if pts:
            x, y, e = map(np.array, zip(*pts))
            ax.errorbar(x, y, yerr=K_SE * e, color=col, **_ERR)
    ax.plot([], [], color="gray", lw=1.4, label=r"GRPO fixed point $p^*$ (1: none, $p_t \to 1$)")
    ax.plot([], [], color="gray", lw=0.8, ls=":", label="unstable fixed point")
    ax.plot([], [], color="gray", lw=1.0, ls="--", label=r"KL-regularised optimum $p^*_{KL}$")
    ax.plot([], [], color="gray", lw=0.6, alpha=0.5, label="$p_0$ (thin)")
    ax.errorbar([], [], yerr=[], color="gray", label="sampled iteration", **_ERR)
    ax.set_xscale("log")
    ax.set_xlabel(r"KL coefficient $\beta$")
    ax.set_ylabel("success probability")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"iterated KL-regularised GRPO; points: advantages from {AMPLIFICATION_GROUP} sampled "
                 "rollouts", fontsize="small")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return fig


# --------------------------------------------------------------------------- 7. mean field
#: group sizes, B_problem, budget (rollouts) and seeds of figure 7 (full; quick: smaller)
MEANFIELD_N = (4, 32, 256)
MEANFIELD_B_PROBLEM = 32


def fig_meanfield(quick: bool = False) -> Figure:
    """Mean-field (lines) against simulated (points, mean of seeds) validation avg@4."""
    from ..plan.meanfield import mean_field
    from ..sim.config import SimConfig
    from ..sim.population import build_population
    from ..sim.run import simulate

    budget = 2**18 if quick else 2**22
    seeds = (0, 1) if quick else (0, 1, 2, 3)
    fig, axes = _figure(2, width=4.3)
    colors = dict(zip(MEANFIELD_N, sns.color_palette(PALETTE, len(MEANFIELD_N))))
    for ax, preset in zip(axes, ("easy", "hard")):
        pop_cfg = {"preset": preset} if not quick else {"preset": preset, "train_size": 1000, "val_size": 100}
        base = SimConfig().replace(population=pop_cfg)
        pop = build_population(base.population, base.model)
        for n in MEANFIELD_N:
            cfg = base.replace(allocation={"n": n, "b_problem": MEANFIELD_B_PROBLEM, "budget": float(budget)})
            mf = mean_field(cfg, pop).curve("avg@4", "val")
            mf = mf[mf["compute_rollouts"] > 0]
            ax.plot(mf["compute_rollouts"], mf["value"], color=colors[n], lw=1.4, label=f"n = {n}")
            curves = [simulate(cfg, seed, population=pop).curve("avg@4", "val") for seed in seeds]
            x = curves[0]["compute_rollouts"].to_numpy(float)
            vals = np.stack([c["value"].to_numpy(float) for c in curves])
            keep = x > 0
            ax.errorbar(x[keep], vals.mean(0)[keep], yerr=K_SE * _se(vals, 0)[keep], color=colors[n], **_ERR)
        ax.set_xscale("log")
        ax.set_xlabel("compute C (rollouts)")
        ax.set_ylabel("validation avg@4")
        ax.set_title(f"{preset}: mean field (lines), simulator ({len(seeds)} seeds, points)", fontsize="small")
        ax.legend(title=f"B_problem = {MEANFIELD_B_PROBLEM}", fontsize="x-small", title_fontsize="x-small")
    return fig


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class TheoryFigure:
    """One theory figure: its number, file stem, what it shows and its drawing function."""

    number: int
    name: str
    title: str
    draw: Callable[[bool], Figure]

    @property
    def stem(self) -> str:
        return f"fig{self.number}_{self.name}"


FIGURES: tuple[TheoryFigure, ...] = (
    TheoryFigure(1, "signal", "P(group carries signal) = 1 - p^n - (1-p)^n, over n and as a heat map", fig_signal),
    TheoryFigure(2, "informative", "informative problems and summed signal per batch, easy and hard, fixed n B_problem",
                 fig_informative),
    TheoryFigure(3, "update", "mean and variance of the GRPO update: std scaling, mean baseline, RLOO, decoupled",
                 fig_update),
    TheoryFigure(4, "tabular", "single-problem tabular policy gradient: the ODE and A/(n t) + B/t", fig_tabular),
    TheoryFigure(5, "passk", "Beta-population pass@k law and its k^(-a) tail", fig_passk),
    TheoryFigure(6, "amplification", "fixed point of KL-regularised iterated GRPO against beta", fig_amplification),
    TheoryFigure(7, "meanfield", "mean field against the simulator, easy and hard", fig_meanfield),
)


def select(only: Iterable[int | str] | None = None) -> list[TheoryFigure]:
    """The figures named by number or name (all of them for ``None``)."""
    if only is None:
        return list(FIGURES)
    by_key = {**{f.number: f for f in FIGURES}, **{f.name: f for f in FIGURES}}
    out = []
    for key in only:
        k = int(key) if isinstance(key, str) and key.strip().isdigit() else key
        if k not in by_key:
            choices = ", ".join(f"{f.number} ({f.name})" for f in FIGURES)
            raise IsosimInputError(f"no theory figure {key!r}: choose from {choices}")
        if by_key[k] not in out:
            out.append(by_key[k])
    return out


def draw(key: int | str, quick: bool = False) -> Figure:
    """Draw one figure (by number or name) and return it, unsaved."""
    return select([key])[0].draw(quick)


def show(key: int | str, quick: bool = False, dpi: int = 90) -> Figure | None:
    """Draw one figure and show it inline in a Jupyter notebook (as a PNG, whatever the
    matplotlib backend); outside IPython, return the Figure instead."""
    fig = draw(key, quick)
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
    except ImportError:
        return fig
    if get_ipython() is None:
        return fig
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    display(Image(buf.getvalue()))
    return None


def write_figure(fig: TheoryFigure, out: str | Path, quick: bool = False) -> list[Path]:
    """Draw ``fig`` and save it as ``out/fig<k>_<name>.png`` and ``.pdf``."""
    return save_figure(fig.draw(quick), Path(out) / fig.stem)


def write_figures(out: str | Path, quick: bool = False, only: Iterable[int | str] | None = None) -> list[Path]:
    """Draw the chosen figures (all by default) into ``out``; return the written paths."""
    paths: list[Path] = []
    for f in select(only):
        paths += write_figure(f, out, quick)
    return paths
