"""Measured n*(C) with a bootstrap interval, and the held-out score of n*(C) predictors.

**Interval of the measured n*(C).** Every (subset, n) is trained with S seeds, and each
evaluation stores, per validation problem i, its count of right answers among m samples. The
point estimate is the arg-max over n of the best-so-far seed-mean validation avg@1
(:func:`isosim.lm.compare.n_star`). A bootstrap replicate resamples the P validation problems
with replacement (one draw shared by every run, so the comparison between n stays paired) and,
independently for each n, S of its seeds with replacement; it recomputes
``v_b(n, C) = mean over drawn seeds s of (1 / P) sum over drawn problems i of c[n, s, C, i] / m``
and the same arg-max rule (best-so-far over the budgets at which n was evaluated, ties to the
smaller n). ``n_low`` and ``n_high`` are the (1 - level) / 2 and (1 + level) / 2 quantiles of
log2 n*_b over the replicates (lower and upper order statistics, so both are grid values).

**Held-out protocol.** Pilots are the runs (all seeds) at the smallest and the middle n of the
grid, cut at C_max / 16: a predictor sees their evaluations at C <= C_max / 16 and the base
model's pass-rate counts, nothing else. It predicts n*(C) at every evaluated budget from
C_max / 8 to C_max. Per subset the score is

- ``mean_abs_log2_error`` = mean over those budgets of |log2 n*_measured(C) - log2 n*_predicted(C)|;
- ``share_within_one_doubling`` = share of those budgets with |log2 n*_measured - log2 n*_predicted| <= 1
  or n_low(C) <= n*_predicted(C) <= n_high(C) (a prediction inside the measured interval counts).

:func:`score_held_out` scores any dict of named predictors; each is a callable from a
:class:`Pilots` to {budget C: predicted n}, or a :class:`Predictor` that also says which
pilots it needs (``"all"``: every n of the grid, cut at the same C_max / 16, a costlier
protocol whose pilot rollouts are reported beside its score).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import IsosimInputError
from ..study.paper import STUDY_Q1
from .compare import n_star

#: the study's fitted n*(C) law, log2 n* = L / (1 + exp(-k (log10 C - log10 C0))) + b, at B_problem 32
#: (:data:`isosim.study.paper.STUDY_Q1`)
STUDY_LAW = STUDY_Q1


# --- the measured curves, per seed, and the interval of n*(C) ----------------------------------

@dataclass
class SubsetRuns:
    """The Q1 evaluations of one subset: ``counts[n][seed][C]`` the per-problem right answers
    (length P) of run (n, seed) at budget C, out of ``samples``; ``base`` the base model's."""

    subset: str
    grid: list[int]
    budgets: list[int]
    samples: int
    counts: dict[int, dict[int, dict[int, np.ndarray]]]
    base: np.ndarray
    #: ``train[n][seed]``: the run's training reward per block of steps, ``(first, last, reward)``
    #: with ``first`` and ``last`` the block's compute before and after it (empty where not logged)
    train: dict = field(default_factory=dict)

    @classmethod
    def from_evals(cls, evals: list[dict], subset: str, grid: list[int], budgets: list[int], samples: int,
                   done: list[dict] = ()) -> "SubsetRuns":
        """The runs of ``subset`` from their ``eval`` records; ``done`` (optional): their
        ``run_done`` records, whose ``train_curve`` (the training reward averaged over blocks of
        ``train_curve_block`` steps) gives :attr:`train` (the last record of each run counts)."""
        train: dict = {}
        for r in done:
            if r["subset"] == subset and r.get("train_curve") and r.get("steps"):
                per = r["rollouts"] / r["steps"] * r["train_curve_block"]
                train.setdefault(int(r["n"]), {})[int(r.get("seed", 0))] = [
                    (i * per, (i + 1) * per, float(v)) for i, v in enumerate(r["train_curve"])]
        counts: dict = {}
        base = None
        for r in evals:
            if r["subset"] != subset:
                continue
            c = np.asarray(r["counts"], dtype=np.float64)
            if r["n"] == 0:
                base = c
            else:
                counts.setdefault(int(r["n"]), {}).setdefault(int(r.get("seed", 0)), {})[int(r["compute"])] = c
        return cls(subset, [n for n in grid if n in counts], list(budgets), samples, counts, base, train)

    @property
    def base_value(self) -> float:
        return float(self.base.mean() / self.samples)

    def curves(self, ns=None, max_compute: float = math.inf) -> dict[int, dict[int, float]]:
        """{n: {C: seed-mean validation avg@1}} for the given n (default all), C <= ``max_compute``;
        a budget counts only if every seed of n was evaluated there."""
        out = {}
        for n in (ns if ns is not None else self.grid):
            seeds = self.counts.get(n, {})
            cs = set.intersection(*(set(v) for v in seeds.values())) if seeds else set()
            out[n] = {c: float(np.mean([seeds[s][c].mean() for s in seeds]) / self.samples)
                      for c in sorted(cs) if c <= max_compute}
        return out

    def seed_curves(self, ns=None, max_compute: float = math.inf) -> dict[int, dict[int, dict[int, float]]]:
        """{n: {seed: {C: validation avg@1}}} for the given n (default all), C <= ``max_compute``."""
        return {n: {s: {c: float(x.mean() / self.samples) for c, x in sorted(by_c.items()) if c <= max_compute}
                    for s, by_c in sorted(self.counts.get(n, {}).items())}
                for n in (ns if ns is not None else self.grid)}

    def train_curves(self, ns=None, max_compute: float = math.inf) -> dict[int, dict[int, dict[float, float]]]:
        """{n: {seed: {C: training reward}}} of the blocks that end at or before ``max_compute``,
        each at the middle of its compute (a block's mean reward is that of a curve rising
        through it); n without a logged training reward are left out."""
        return {n: {s: {(a + b) / 2: v for a, b, v in blocks if b <= max_compute}
                    for s, blocks in sorted(self.train[n].items())}
                for n in (ns if ns is not None else self.grid) if n in self.train}

    def n_star(self) -> list[dict]:
        return n_star(self.curves(), self.budgets)

    def tensor(self) -> tuple[np.ndarray, np.ndarray]:
        """X[n, s, C, i] right answers (NaN where run (n, s) was not evaluated at C), and the
        number of seeds of each n."""
        seeds = max(len(v) for v in self.counts.values())
        P = len(self.base)
        X = np.full((len(self.grid), seeds, len(self.budgets), P), np.nan)
        n_seeds = np.zeros(len(self.grid), dtype=int)
        for a, n in enumerate(self.grid):
            for b, s in enumerate(sorted(self.counts[n])):
                for c, C in enumerate(self.budgets):
                    if C in self.counts[n][s]:
                        X[a, b, c] = self.counts[n][s][C]
            n_seeds[a] = len(self.counts[n])
        return X, n_seeds


def _bootstrap_argmax(runs: SubsetRuns, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The arg-max over n (index into ``runs.grid``) of every bootstrap replicate at every budget,
    shape (reps, budgets), and whether any n was evaluated at each budget, shape (budgets,)."""
    X, n_seeds = runs.tensor()
    A, S, K, P = X.shape
    rng = np.random.default_rng([seed, 0xB007])
    # problem weights: how often each problem is drawn in each replicate, (reps, P)
    W = np.stack([np.bincount(rng.integers(0, P, P), minlength=P) for _ in range(reps)]).astype(np.float64)
    with np.errstate(invalid="ignore"):
        V = np.einsum("askp,rp->rask", np.nan_to_num(X), W) / (P * runs.samples)  # (reps, n, seed, C)
    missing = np.isnan(X[..., 0])  # (n, seed, C)
    V[:, missing] = np.nan
    vals = np.empty((reps, A, K))
    for a in range(A):
        pick = rng.integers(0, n_seeds[a], (reps, n_seeds[a]))  # seeds drawn with replacement
        vals[:, a] = np.take_along_axis(V[:, a], pick[:, :, None], axis=1).mean(axis=1)
    evaluated = ~np.isnan(vals)
    best = np.fmax.accumulate(np.where(evaluated, vals, -np.inf), axis=2)  # best-so-far over budgets
    best = np.where(evaluated, best, -np.inf)  # n competes at C only if evaluated there
    return np.argmax(best, axis=1), evaluated[0].any(axis=0)  # first maximum: ties to the smaller n


def bootstrap_n_star(runs: SubsetRuns, reps: int = 1000, level: float = 0.9, seed: int = 0) -> dict[int, dict]:
    """{C: {"n_low", "n_high", "share": {n: share of replicates with n* = n}}} by the bootstrap of
    the module docstring (problems resampled jointly, seeds per n)."""
    arg, evaluated = _bootstrap_argmax(runs, reps, seed)
    grid = np.asarray(runs.grid)
    lo_q, hi_q = (1 - level) / 2, (1 + level) / 2
    out = {}
    for c, C in enumerate(runs.budgets):
        if not evaluated[c]:
            continue
        logs = np.log2(grid[arg[:, c]])
        ns, cnt = np.unique(grid[arg[:, c]], return_counts=True)
        out[C] = {"n_low": int(2 ** np.quantile(logs, lo_q, method="lower")),
                  "n_high": int(2 ** np.quantile(logs, hi_q, method="higher")),
                  "share": {int(n): float(k / reps) for n, k in zip(ns, cnt)}}
    return out


def n_star_shift(runs: SubsetRuns, reps: int = 1000, level: float = 0.9, seed: int = 0, doublings: float = 2.0,
                 start: int | None = None) -> dict:
    """How far n*(C) moves from the first evaluated budget (or from ``start``, an evaluated budget
    registered before the runs) to the last, with the paired bootstrap
    of the module docstring (the same replicates give n* at both budgets, so the two are compared
    within each replicate, not through their separate intervals).

    ``log2_shift`` = log2 n*(C_last) - log2 n*(C_first) of the point estimates; ``low`` and
    ``high`` its ``level`` interval over the replicates; ``p_rises`` and ``p_moves`` the shares
    of replicates with a shift > 0 and >= ``doublings``; ``verdict`` ``"moves"`` when ``low`` >=
    ``doublings``, ``"does not move"`` when ``high`` < ``doublings``, else ``"inconclusive"``;
    ``registered_start`` whether ``start`` was given."""
    arg, evaluated = _bootstrap_argmax(runs, reps, seed)
    cols = np.flatnonzero(evaluated)
    first, last = int(cols[0]), int(cols[-1])
    if start is not None:
        budgets = [int(b) for b in runs.budgets]
        if int(start) not in budgets or not evaluated[budgets.index(int(start))] or budgets.index(int(start)) >= last:
            raise IsosimInputError(f"the shift's first budget {start} is not an evaluated budget before the last")
        first = budgets.index(int(start))
    grid = np.asarray(runs.grid)
    shift = np.log2(grid[arg[:, last]]) - np.log2(grid[arg[:, first]])
    point = {p["compute"]: p["n"] for p in runs.n_star()}
    c0, c1 = runs.budgets[first], runs.budgets[last]
    low = float(np.quantile(shift, (1 - level) / 2, method="lower"))
    high = float(np.quantile(shift, (1 + level) / 2, method="higher"))
    verdict = "moves" if low >= doublings else "does not move" if high < doublings else "inconclusive"
    return {"from": int(c0), "to": int(c1), "registered_start": start is not None, "log2_shift": float(math.log2(point[c1]) - math.log2(point[c0])),
            "low": low, "high": high, "level": level, "doublings": doublings,
            "p_rises": float(np.mean(shift > 0)), "p_moves": float(np.mean(shift >= doublings)), "verdict": verdict}


def measured_with_interval(runs: SubsetRuns, reps: int = 1000, level: float = 0.9, seed: int = 0) -> list[dict]:
    """The measured n*(C) (point estimate, runner-up) with ``n_low``, ``n_high`` and the
    bootstrap share of the point estimate, per budget."""
    boot = bootstrap_n_star(runs, reps, level, seed) if reps > 0 else {}
    out = []
    for p in runs.n_star():
        b = boot.get(p["compute"])
        if b is not None:
            p = dict(p, n_low=min(b["n_low"], p["n"]), n_high=max(b["n_high"], p["n"]),
                     boot_share=b["share"].get(p["n"], 0.0))
        out.append(p)
    return out


# --- scoring ----------------------------------------------------------------------------------

def score_prediction(measured: list[dict], predicted: dict[int, int]) -> dict:
    """``mean_abs_log2_error``, ``share_within_one_doubling`` and ``budgets`` over the measured
    points (each {"compute", "n"} and optionally "n_low", "n_high") that have a prediction."""
    errs, within = [], []
    for p in measured:
        if p["compute"] not in predicted:
            continue
        q = int(predicted[p["compute"]])
        e = abs(math.log2(p["n"]) - math.log2(q))
        errs.append(e)
        within.append(e <= 1.0 or p.get("n_low", p["n"]) <= q <= p.get("n_high", p["n"]))
    if not errs:  # nothing to score (e.g. a predictor that could not predict): null in JSON
        return {"mean_abs_log2_error": None, "share_within_one_doubling": None, "budgets": 0}
    return {"mean_abs_log2_error": float(np.mean(errs)), "share_within_one_doubling": float(np.mean(within)),
            "budgets": len(errs)}


@dataclass
class Pilots:
    """What a predictor sees: the pilot runs' seed-mean curves ``curves[n][C]`` (C <= ``cut``),
    the budgets to predict, the grid, B_problem, the base model's measured pass-rate counts on the
    training and validation problems (out of ``measure_samples``) and its validation avg@1;
    ``seed_curves[n][seed][C]``, each seed's curve (empty where only the means are known), and
    ``train_curves[n][seed][C]`` its training reward (empty where it was not logged)."""

    subset: str
    curves: dict[int, dict[int, float]]
    cut: int
    targets: list[int]
    grid: list[int]
    b_problem: int
    base_value: float
    train_counts: np.ndarray
    val_counts: np.ndarray
    measure_samples: int
    seeds: int
    extra: dict = field(default_factory=dict)
    seed_curves: dict = field(default_factory=dict)
    #: ``train_curves[n][seed][C]``: each pilot run's training reward up to the cut (empty where not logged)
    train_curves: dict = field(default_factory=dict)

    @property
    def rollouts(self) -> int:
        """Rollouts spent on the pilots: every pilot n trained to ``cut``, ``seeds`` times."""
        return int(len(self.curves) * self.seeds * self.cut)


@dataclass(frozen=True)
class Predictor:
    """A predictor and the pilots it needs: ``"two"`` (the smallest and the middle n) or ``"all"``."""

    fn: Callable[[Pilots], dict[int, int]]
    pilots: str = "two"

    def __call__(self, pilots: Pilots) -> dict[int, int]:
        return self.fn(pilots)


def pilot_ns(grid: list[int], which: str) -> list[int]:
    """The pilots' n: the smallest and the middle of the grid (``"two"``), or all of it."""
    return list(grid) if which == "all" else sorted({grid[0], grid[len(grid) // 2]})


def held_out_budgets(budgets: list[int], c_max: int) -> list[int]:
    """The budgets scored: those from C_max / 8 to C_max."""
    return [c for c in budgets if c_max / 8 <= c <= c_max]


def make_pilots(runs: SubsetRuns, which: str, c_max: int, b_problem: int, train_counts, val_counts,
                measure_samples: int) -> Pilots:
    cut = c_max // 16
    ns = pilot_ns(runs.grid, which)
    seeds = min(len(runs.counts[n]) for n in ns)
    return Pilots(runs.subset, runs.curves(ns, cut), cut, held_out_budgets(runs.budgets, c_max), list(runs.grid),
                  b_problem, runs.base_value, np.asarray(train_counts), np.asarray(val_counts), measure_samples, seeds,
                  seed_curves=runs.seed_curves(ns, cut), train_curves=runs.train_curves(ns, cut))


def score_held_out(runs: dict[str, SubsetRuns], measured: dict[str, list[dict]], predictors: dict, *, c_max: int,
                   b_problem: int, counts: dict[str, tuple], measure_samples: int) -> dict:
    """{name: {subset: score, ..., "pilot_rollouts": x, "predicted": {subset: [{"compute", "n"}]}}}
    (and ``"details": {subset: {...}}``, what a predictor noted about its fit, where it noted any)
    for every predictor (a callable or a :class:`Predictor`), each scored against ``measured``
    (n*(C) with intervals) on the held-out budgets. ``counts[subset]`` = (train counts, val counts)."""
    out = {}
    for name, pred in predictors.items():
        which = getattr(pred, "pilots", "two")
        entry, cost, preds = {}, 0, {}
        for subset, r in runs.items():
            pil = make_pilots(r, which, c_max, b_problem, *counts[subset], measure_samples)
            got = {int(c): int(n) for c, n in pred(pil).items() if c in pil.targets}
            entry[subset] = score_prediction([p for p in measured[subset] if p["compute"] in pil.targets], got)
            preds[subset] = [{"compute": c, "n": got[c]} for c in sorted(got)]
            if pil.extra:
                entry.setdefault("details", {})[subset] = pil.extra
            cost += pil.rollouts
        entry["pilot_rollouts"] = cost
        entry["predicted"] = preds
        out[name] = entry
    return out


# --- the alternatives --------------------------------------------------------------------------

def constant(which: str) -> Predictor:
    """Always the smallest (``"smallest"``) or the largest (``"largest"``) n of the grid."""
    def fn(p: Pilots) -> dict[int, int]:
        n = p.grid[0] if which == "smallest" else p.grid[-1]
        return {c: n for c in p.targets}
    return Predictor(fn)


def nearest_grid(grid: list[int], log2n: float) -> int:
    """The grid value nearest to 2^log2n in log2 (ties to the smaller)."""
    return min(grid, key=lambda n: (abs(math.log2(n) - log2n), n))


def study_law_n(subset: str, compute: float) -> float:
    """log2 n* of the study's fitted law for the subset (``STUDY_LAW``) at compute C (rollouts)."""
    q = STUDY_LAW[subset]
    return q["L"] / (1 + math.exp(-q["k"] * (math.log10(compute) - q["log10_C0"]))) + q["b"]


def study_law() -> Predictor:
    """The study's n*(C) law used as is (its easy fit for the easy subset, its hard fit for the
    hard one), rounded to the nearest n of the grid; the pilots are not used."""
    return Predictor(lambda p: {c: nearest_grid(p.grid, study_law_n(p.subset, c)) for c in p.targets})


def scalerl_curve(c, r0, a, c_mid, b):
    """ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)."""
    return r0 + (a - r0) / (1.0 + (c_mid / np.asarray(c, dtype=np.float64)) ** b)


def fit_scalerl(points: dict[int, float], r0: float) -> tuple[float, float, float] | None:
    """Least-squares (scipy.optimize.curve_fit, bounded) fit of A, C_mid, B of the ScaleRL curve
    with R0 fixed at the base value, to the points {C: value}; ``None`` with fewer than 2 points
    or when the fit fails. Bounds: A in [R0, 1], C_mid in [1, 1e12], B in [0.05, 5]. Only the
    estimates are used, so SciPy's warning that their covariance cannot be estimated (two or
    three points for three parameters) is not shown."""
    import warnings

    from scipy.optimize import OptimizeWarning, curve_fit

    if len(points) < 2:
        return None
    c = np.array(sorted(points), dtype=np.float64)
    v = np.array([points[k] for k in sorted(points)])
    lo_a = min(r0, 1.0 - 1e-9)
    a0 = float(np.clip(max(v.max(), r0) + 0.05, lo_a + 1e-9, 1.0))
    cmid0 = float(np.exp(np.mean(np.log(c))))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", OptimizeWarning)
            popt, _ = curve_fit(lambda x, a, lc, b: scalerl_curve(x, r0, a, 10.0 ** lc, b), c, v,
                                p0=[a0, math.log10(cmid0), 1.0],
                                bounds=([lo_a, 0.0, 0.05], [1.0, 12.0, 5.0]), maxfev=20000)
    except (RuntimeError, ValueError):
        return None
    return float(popt[0]), float(10.0 ** popt[1]), float(popt[2])


def scalerl_per_n() -> Predictor:
    """Per-n ScaleRL curves fitted to pilots at every n of the grid (cut at C_max / 16) and
    extrapolated; n*(C) is the n whose fitted curve is highest at C (ties to the smaller n). An n
    whose fit fails (fewer than 2 pilot points) does not compete."""
    def fn(p: Pilots) -> dict[int, int]:
        fits = {n: fit_scalerl(pts, p.base_value) for n, pts in p.curves.items()}
        fits = {n: f for n, f in fits.items() if f is not None}
        p.extra["scalerl_fits"] = {int(n): {"A": f[0], "C_mid": f[1], "B": f[2]} for n, f in fits.items()}
        out = {}
        for c in p.targets:
            vals = {n: float(scalerl_curve(c, p.base_value, *f)) for n, f in fits.items()}
            if vals:
                top = max(vals.values())
                out[c] = min(n for n, v in vals.items() if v >= top - 1e-12)
        return out
    return Predictor(fn, pilots="all")


def default_surrogate(cfg, lrs=None) -> Predictor:
    """isosim's surrogate with its default knobs (``cfg.surrogate``), built on the base model's
    measured pass rates; only its learning rate is fitted, by least squares on the avg@1 gain
    curve of the pilot at the middle n (C <= C_max / 16), as the validation fits it (no other
    knob is calibrated). It then runs every n of the grid to the largest target budget and
    n*(C) is the arg-max of its best-so-far curves."""
    from .compare import _surrogate_population, _surrogate_run, surrogate_rates

    def fn(p: Pilots) -> dict[int, int]:
        pop = _surrogate_population(cfg, p.train_counts, p.val_counts)
        n_ref = p.grid[len(p.grid) // 2]
        target = p.curves[n_ref]
        base_sim = float(np.mean(surrogate_rates(p.val_counts, cfg.measure_samples, cfg.pass_rate_estimate)))
        errs = {}
        for lr in (lrs or cfg.surrogate_lrs):
            marks = {c // (n_ref * p.b_problem): c for c in target}
            sim = _surrogate_run(cfg, pop, len(p.train_counts), len(p.val_counts), n_ref, p.b_problem, marks, lr)
            errs[lr] = float(np.mean([((sim[c] - base_sim) - (v - p.base_value)) ** 2 for c, v in target.items()]))
        lr = min(errs, key=errs.get)
        p.extra["surrogate_lr"] = lr
        budgets = sorted(set(p.targets) | set(target))
        curves = {}
        for n in p.grid:
            marks = {c // (n * p.b_problem): c for c in budgets if c >= n * p.b_problem}
            curves[n] = _surrogate_run(cfg, pop, len(p.train_counts), len(p.val_counts), n, p.b_problem, marks, lr)
        return {q["compute"]: q["n"] for q in n_star(curves, budgets) if q["compute"] in p.targets}
    return Predictor(fn)


def calibrated_surrogate(cfg, knobs=None, training: bool = True, training_mode: str = "auto") -> Predictor:
    """isosim's surrogate (``cfg.surrogate``) calibrated on the two pilots by :func:`isosim.calibrate.calibrate`
    (the knobs ``knobs``, default its default set: learning rate, base-policy concentration,
    skill link, and with a training reward the memorisation speed), on the base model's measured
    pass rates; n*(C) at every target budget is the best fit's compute-optimal n over the grid
    (:meth:`~isosim.calibrate.Calibration.predict_n_star`), rounded to the nearest n of the grid.
    Its runs are the pilots' seeds, one run per (n, seed) (the seed-mean curves where the pilots
    carry no per-seed curves), each anchored at compute 0 on the measured base value, so with
    several seeds the pilots' noise is measured between them (with one, calibrate needs three
    evaluations after compute 0 in a run); the ensemble's interval goes to ``extra``.

    ``training`` (the default) fits the pilots' training reward beside their validation curves
    where every pilot run logged one (:attr:`Pilots.train_curves`, per-seed runs only), in
    calibrate's ``auto`` mode: kept only when the best fit reproduces it within its noise
    threshold, else set aside for the validation curves alone (``training_mode="always"``: kept
    whatever its misfit, calibrate's ``--training-mode always``). ``extra["calibrated_training"]``
    says which: ``"kept"``, ``"set aside"`` or ``"none"`` (no training reward to fit)."""
    import pandas as pd

    from ..calibrate import calibrate
    from ..sim.config import SimConfig
    from .compare import surrogate_algo, surrogate_rates

    def run_name(n: int, seed: int) -> str:
        return f"pilot-n{n}-seed{seed}"

    def fn(p: Pilots) -> dict[int, int]:
        runs = ({run_name(n, s): (n, curve) for n, by_seed in p.seed_curves.items()
                 for s, curve in by_seed.items()} if p.seed_curves
                else {f"pilot-n{n}": (n, curve) for n, curve in p.curves.items()})
        rows = [{"run": run, "n": n, "B_problem": p.b_problem, "compute": 0, "avg@1": p.base_value}
                for run, (n, _) in runs.items()]
        rows += [{"run": run, "n": n, "B_problem": p.b_problem, "compute": c, "avg@1": v}
                 for run, (n, curve) in runs.items() for c, v in curve.items() if c > 0]
        train_rows = None
        if training and p.seed_curves and all(len(p.train_curves.get(n, {}).get(s, {})) >= 3
                                               for n, by_seed in p.seed_curves.items() for s in by_seed):
            train_rows = pd.DataFrame([{"run": run_name(n, s), "n": n, "B_problem": p.b_problem, "compute": c,
                                        "train_reward": v}
                                       for n, by_seed in p.seed_curves.items() for s in by_seed
                                       for c, v in p.train_curves[n][s].items()])
        train = surrogate_rates(p.train_counts, p.measure_samples, cfg.pass_rate_estimate)
        val = surrogate_rates(p.val_counts, p.measure_samples, cfg.pass_rate_estimate)
        cal = calibrate(pd.DataFrame(rows), train, "avg@1", val_pass_rates=val, knobs=knobs,
                        base=SimConfig(model=cfg.surrogate, algo=surrogate_algo(cfg, SimConfig().algo.lr)),
                        training=train_rows, training_mode=training_mode)
        table = cal.predict_n_star(p.targets, ns=p.grid, b_problem=p.b_problem)
        tr = cal.details.get("training")
        p.extra["calibrated_knobs"] = dict(cal.knobs)
        p.extra["calibrated_training"] = "none" if tr is None else "kept" if tr.get("used") else "set aside"
        if tr is not None:
            p.extra["calibrated_training_misfit"] = tr.get("fit_ratio")
        p.extra["calibrated_interval"] = [{"compute": int(c), "n_low": int(lo), "n_high": int(hi)}
                                          for c, lo, hi in zip(table["compute"], table["n_low"], table["n_high"])]
        return {int(c): nearest_grid(p.grid, math.log2(n)) for c, n in zip(table["compute"], table["n"])}
    return Predictor(fn)


def alternatives(cfg) -> dict[str, Predictor]:
    """The simple predictors a practitioner has, by name."""
    return {"always_smallest_n": constant("smallest"), "always_largest_n": constant("largest"),
            "study_law": study_law(), "default_surrogate": default_surrogate(cfg),
            "scalerl_per_n": scalerl_per_n()}
