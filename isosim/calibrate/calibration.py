"""``calibrate(pilots, pass_rates) -> Calibration``: the surrogate fitted to a user's pilot
runs, and its compute-optimal n with an interval from the ensemble.

A :class:`Calibration` holds the best-fit knob values, the ensemble of knob sets that fit
within the pilots' noise (:mod:`isosim.calibrate.fit`, the best fit first) and what it was
fitted on. :meth:`Calibration.predict_n_star` runs the mean field of every member over a
grid of n (at the pilots' B_problem) up to the largest budget asked for, and takes at each
budget C the raw arg-max of the curves there (:func:`isosim.analysis.n_star.best_key`: ties
go to the smaller n; a run stopped at C' <= C holds its last value, as in the planner):

    n(C)      = n* of the best fit,
    n_low(C)  = min over the members of their n*,      n_high(C) = max over the members,
    agree(C)  = share of the members whose n* is n(C).
"""
from __future__ import annotations

import dataclasses
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..analysis.n_star import best_key
from ..errors import IsosimInputError
from ..sim.config import SimConfig
from ..sim.models import MODELS
from . import knobs as K
from .fit import MAX_MEMBERS, default_workers, fit
from .pilots import Pilots, read_pilots
from .surrogate import MAX_TRAIN, Surrogate, base_config, population_for, validation_rates

#: the n over which n*(C) is predicted unless a caller gives others
DEFAULT_NS = (2, 4, 8, 16, 32, 64, 128)
#: a fit whose RMSE exceeds the pilots' noise sd by more than this factor is outside the noise
NOISE_FACTOR = 1.5
#: how :func:`calibrate` treats a training reward: fit it whatever the misfit, or only where the fit reproduces it
TRAINING_MODES = ("always", "auto")
#: a knob this close to an end of its range (in the optimiser's [0, 1] coordinate) is at the edge
EDGE = 0.01
#: below this share of the ensemble picking the best fit's n*, the ensemble disagrees with it
AGREE_MIN = 0.5
#: a knob whose ensemble spans more than this share of its range (optimiser coordinate) is not pinned down
UNPINNED = 0.5


@dataclass(frozen=True)
class Calibration:
    """A fitted surrogate: ``knobs`` (name -> value, the best fit), ``ensemble`` (knob sets,
    the best fit first), the fit's RMSE and the pilots' noise, and what was fitted: the
    pilots' metric, B_problem, budget and n, the base config (``base``, before the knobs),
    the training and validation pass rates and the data seed."""

    metric: str
    knobs: dict[str, float]
    ensemble: tuple[dict[str, float], ...]
    fit_rmse: float
    pilot_noise_sd: float
    base: SimConfig
    train: np.ndarray = field(repr=False)
    val: np.ndarray = field(repr=False)
    b_problem: int
    pilot_budget: float
    pilot_ns: tuple[int, ...]
    details: dict = field(default_factory=dict)
    seed: int = 0

    def config(self, member: int | None = None) -> SimConfig:
        """The base config with the best fit's knobs, or with ensemble member ``member``'s."""
        return K.apply(self.base, self.knobs if member is None else self.ensemble[member])

    def n_grid(self, budgets, ns=None, b_problem: int | None = None) -> list[int]:
        """The n competing at these budgets (:func:`n_grid`)."""
        return n_grid(ns, int(b_problem or self.b_problem), float(np.max(budgets)))

    def predict_n_star(self, budgets, ns=None, b_problem: int | None = None,
                       workers: int | None = None) -> pd.DataFrame:
        """n*(C) at each budget C (rollouts) with its ensemble interval: ``compute, n,
        n_low, n_high, agree`` (see the module docstring)."""
        budgets = np.atleast_1d(np.asarray(budgets, float))
        if budgets.size == 0 or not np.all(np.isfinite(budgets)) or np.any(budgets <= 0):
            raise IsosimInputError("budgets must be positive, finite numbers of rollouts")
        bp = int(b_problem or self.b_problem)
        grid = self.n_grid(budgets, ns, bp)
        jobs = [(self.config(i), self.train, self.val, self.seed, grid, bp, tuple(budgets), self.metric)
                for i in range(len(self.ensemble))]
        per = _map(_member_n_star, jobs, default_workers() if workers is None else workers)
        table = np.array(per)  # members x budgets
        best = table[0]
        return pd.DataFrame({
            "compute": budgets, "n": best.astype(int), "n_low": table.min(axis=0).astype(int),
            "n_high": table.max(axis=0).astype(int), "agree": (table == best[None, :]).mean(axis=0),
        })

    def budgets_to(self, budget: float) -> np.ndarray:
        """Doublings of the pilots' budget up to ``budget`` (and ``budget`` itself)."""
        c = [self.pilot_budget * 2.0**j for j in range(0, 64) if self.pilot_budget * 2.0**j <= budget * (1 + 1e-9)]
        if not c or c[-1] < budget * (1 - 1e-9):
            c.append(float(budget))
        return np.asarray(c, float)

    @property
    def noise_ratio(self) -> float:
        """The fit's RMSE over the pilots' noise sd (about 1 for a fit within the noise)."""
        return self.fit_rmse / self.pilot_noise_sd if self.pilot_noise_sd > 0 else math.inf

    @property
    def within_noise(self) -> bool:
        return self.noise_ratio <= NOISE_FACTOR

    def warnings(self, n_star_curve: pd.DataFrame | None = None) -> list[str]:
        """Why this calibration does not deserve trust, one sentence each (empty when none):
        a best fit outside the pilots' noise, a knob at an end of its range, a training reward
        the best fit misses by more than its noise, a knob the pilots leave open (its ensemble
        spans over :data:`UNPINNED` of its range), and budgets where most of the ensemble picks
        another n* than the best fit."""
        out = []
        if not self.within_noise:
            out.append(f"the best fit misses the pilots by {self.noise_ratio:.1f} times their noise (RMSE "
                       f"{self.fit_rmse:.3g} against noise sd {self.pilot_noise_sd:.3g}): the surrogate does not "
                       "reproduce these pilots, and its ensemble holds the knob sets that miss them about as much")
        for name, value in self.knobs.items():
            knob = K.KNOBS.get(name)
            if knob is None:
                continue
            u = knob.to_unit(value)
            if u <= EDGE or u >= 1 - EDGE:
                end = "bottom" if u <= EDGE else "top"
                out.append(f"{name} = {value:.4g} is at the {end} of its range [{knob.lo:g}, {knob.hi:g}]: the pilots "
                           "ask for a value the range does not hold, so the fit is a bound, not an estimate")
        tr = self.details.get("training")
        if tr and not tr["used"]:
            out.append(f"the pilots' training reward was set aside: the best fit with it missed it by "
                       f"{tr['fit_ratio']:.1f} times its noise (the surrogate learns the training problems at another "
                       "speed than the pilots show), so this fit is to the validation curves alone")
        elif tr and tr["fit_ratio"] > NOISE_FACTOR:
            out.append(f"the best fit misses the pilots' training reward by {tr['fit_ratio']:.1f} times its noise: "
                       "the surrogate learns the training problems at another speed than the pilots show")
        for name, (lo, hi) in self.knob_spread().items():
            if hi - lo > UNPINNED:
                knob = K.KNOBS[name]
                out.append(f"the pilots do not pin down {name}: knob sets from {knob.from_unit(lo):.4g} to "
                           f"{knob.from_unit(hi):.4g} fit them (over {UNPINNED:.0%} of its range)")
        if n_star_curve is not None and len(self.ensemble) > 1:
            low = n_star_curve[n_star_curve["agree"] < AGREE_MIN]
            if len(low):
                first = low.iloc[0]
                out.append(f"the ensemble disagrees with the best fit at {len(low)} of {len(n_star_curve)} budgets "
                           f"(from C = {first['compute']:.3g}: {first['agree']:.0%} of its {len(self.ensemble)} "
                           f"members pick n* = {int(first['n'])}, their n* {int(first['n_low'])} to "
                           f"{int(first['n_high'])})")
        return out

    def knob_spread(self) -> dict[str, tuple[float, float]]:
        """Per fitted knob, the lowest and highest value over the ensemble, in the optimiser's
        [0, 1] coordinate (:mod:`isosim.calibrate.knobs`): how far the pilots leave it open."""
        out = {}
        for name in self.knobs:
            if name in K.KNOBS:
                u = [K.KNOBS[name].to_unit(m[name]) for m in self.ensemble]
                out[name] = (min(u), max(u))
        return out

    def to_json(self, n_star_curve: pd.DataFrame | None = None) -> dict:
        """``{"knobs", "fit_rmse", "pilot_noise_sd", "within_noise", "warnings", "ensemble",
        "n_star_curve", "knob_ranges", ...}``; ``warnings``: :meth:`warnings`, empty for a fit to
        trust; ``knob_ranges``: each knob's lowest and highest value over the ensemble."""
        curve = [] if n_star_curve is None else [
            {"compute": float(c), "n": int(n), "n_low": int(lo), "n_high": int(hi), "agree": float(a)}
            for c, n, lo, hi, a in n_star_curve[["compute", "n", "n_low", "n_high", "agree"]].itertuples(index=False)]
        return {
            "knobs": dict(self.knobs), "fit_rmse": self.fit_rmse, "pilot_noise_sd": self.pilot_noise_sd,
            "within_noise": self.within_noise, "warnings": self.warnings(n_star_curve),
            "ensemble": [dict(m) for m in self.ensemble], "n_star_curve": curve,
            "knob_ranges": {k: [K.KNOBS[k].from_unit(lo), K.KNOBS[k].from_unit(hi)]
                            for k, (lo, hi) in self.knob_spread().items()},
            "metric": self.metric, "B_problem": self.b_problem, "pilot_budget": self.pilot_budget,
            "pilot_n": list(self.pilot_ns), "problems": int(len(self.train)), "details": self.details,
        }


def n_grid(ns, b_problem: int, budget: float) -> list[int]:
    """The n of ``ns`` (default :data:`DEFAULT_NS`) with at least one step of n * B_problem
    rollouts within ``budget``; none is an :class:`IsosimInputError`."""
    given = DEFAULT_NS if ns is None else tuple(ns)
    if any(int(n) < 1 for n in given):
        raise IsosimInputError("n must be positive integers")
    out = sorted({int(n) for n in given if int(n) * b_problem <= budget})
    if not out:
        raise IsosimInputError(f"no n of {', '.join(map(str, given))} fits one step of B_problem = {b_problem} "
                               f"within {budget:g} rollouts")
    return out


def pilot_b_problem(pilots: Pilots) -> int:
    """The B_problem of most pilot runs (the smaller on a tie): the one n*(C) is predicted at."""
    counts = pilots.table.groupby("B_problem")["run"].nunique()
    return int(counts.index[int(np.argmax(counts.to_numpy()))])


def _map(fun, jobs, workers: int):
    if workers > 1 and len(jobs) > 1:
        import multiprocessing as mp

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=ctx) as pool:
            return list(pool.map(fun, jobs))
    return [fun(j) for j in jobs]


def _member_n_star(job) -> list[int]:
    """One member's n*(C) at the budgets: mean-field curves of every n at B_problem, held past
    their last step, the raw arg-max with ties to the smaller n."""
    from ..plan.predict import curve_at, predict

    cfg, train, val, seed, ns, bp, budgets, metric = job
    pop = population_for(cfg, train, val, seed)
    curves = predict(cfg, [(n, bp) for n in ns], max(budgets), pop, max_train=MAX_TRAIN, seed=seed)
    at = curve_at(curves, list(budgets), metric, hold=True)
    out = []
    for j in range(len(budgets)):
        col = at.iloc[:, j]
        out.append(best_key({int(n): float(v) for (_, n, _), v in col.items()}) or 0)
    return out


def fitted_knobs(base: SimConfig, names=None) -> tuple[K.Knob, ...]:
    """The knobs to fit for ``base``'s model: ``names`` (default :data:`isosim.calibrate.knobs.DEFAULT`),
    without the model knobs that model does not read (they could not be identified)."""
    reads = set(MODELS[base.model.kind].KNOBS) | {"shared", "local", "local_share"}  # every model's learning paths
    chosen = K.knobs_of(names)
    kept = tuple(k for k in chosen if k.section != "model" or k.field in reads)
    if not kept:
        raise IsosimInputError(f"model {base.model.kind!r} reads none of the knobs {', '.join(k.name for k in chosen)}")
    return kept


def check_pass_rates(values) -> np.ndarray:
    """Per-problem base pass rates: a non-empty array of numbers in [0, 1], or the path of a file
    :func:`isosim.sim.population.load_pass_rates` reads."""
    if isinstance(values, (str, Path)):
        from ..sim.population import load_pass_rates

        values = load_pass_rates(values)
    try:
        v = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise IsosimInputError("pass rates must be numbers in [0, 1] (an array, or the path of a pass-rate file)") from None
    if v.size == 0:
        raise IsosimInputError("the pass-rate file holds no problems")
    if not np.all(np.isfinite(v)) or np.any((v < 0) | (v > 1)):
        raise IsosimInputError("pass rates must be numbers in [0, 1]")
    return v


def prepare(runs: pd.DataFrame, pass_rates, metric: str = "avg@1", val_pass_rates=None,
            base: SimConfig | None = None, knobs=None, budget: float | None = None,
            seed: int = 0, training: pd.DataFrame | bool | None = None
            ) -> tuple[Pilots, np.ndarray, np.ndarray, SimConfig, tuple[K.Knob, ...]]:
    """Every check of a calibration's input, before any fitting: the pilots
    (:func:`isosim.calibrate.pilots.read_pilots`, with their training reward), the pass
    rates, the base config, the knobs, and (``budget``) that no pilot ran past the budget
    asked about."""
    pilots = read_pilots(runs, metric, training)
    if knobs is None and pilots.train is not None:
        knobs = K.WITH_TRAINING
    train = check_pass_rates(pass_rates)
    val = validation_rates(train, None if val_pass_rates is None else check_pass_rates(val_pass_rates), seed)
    base = base or SimConfig()
    if base.algo.baseline_n:
        raise IsosimInputError("the calibration's mean field does not model a decoupled baseline (baseline_n)")
    chosen = fitted_knobs(base, knobs)
    for n, bp, _ in pilots.groups:
        if bp > len(train):
            raise IsosimInputError(f"the pilots' B_problem = {bp} exceeds the {len(train)} problems of the "
                                   "pass-rate file")
    if budget is not None:
        if not (math.isfinite(budget) and budget > 0):
            raise IsosimInputError(f"the budget must be a positive, finite number of rollouts, got {budget}")
        if pilots.budget > budget:
            raise IsosimInputError(f"the pilots ran to {pilots.budget:.6g} rollouts, past the budget asked about "
                                   f"({budget:.6g}): pilots must be shorter than the budget")
    n0, bp0, m0 = pilots.groups[0]
    sized = base_config(base, train, val, metric).replace(allocation={"n": n0, "b_problem": bp0, "steps": m0,
                                                                      "budget": 0.0})
    sized.validate()
    return pilots, train, val, sized, chosen


def calibrate(runs: pd.DataFrame, pass_rates, metric: str = "avg@1", *, val_pass_rates=None,
              base: SimConfig | None = None, knobs=None, budget: float | None = None, seed: int = 0,
              max_members: int = MAX_MEMBERS, workers: int | None = None,
              training: pd.DataFrame | bool | None = None, training_mode: str = "auto") -> Calibration:
    """Fit the knobs (``knobs``, default :data:`isosim.calibrate.knobs.DEFAULT`) of ``base``
    (default :class:`SimConfig`) so that the surrogate's mean-field curves at the pilots'
    allocations match the pilots' measured ``metric``.

    ``runs``: the pilots, a DataFrame in the ``isosim fit`` format; ``pass_rates``: the base
    model's per-problem pass rates on the training problems (an array, or a pass-rate file's path); ``val_pass_rates``: on the
    validation problems the pilots evaluate on (default: up to 300 of the training ones);
    ``budget``: refuse pilots that ran past it; ``workers``: processes (default 2 where there
    are two cores); ``training``: the pilots' training reward to fit beside the validation
    curves (rows ``run, n, B_problem, compute or step, train_reward``, or True for the
    ``train_reward`` column of ``runs``; :func:`isosim.calibrate.pilots.read_training`). With
    a training reward the default knobs add ``local``, the memorisation path, whose speed it
    shows (:data:`isosim.calibrate.knobs.WITH_TRAINING`). Not fitted by default: the mean
    field's training reward runs ahead of the simulator's where few groups carry signal (hard
    problems, small n), which biases the fit there (docs/calibrate.md).
    ``training_mode``: ``"always"`` keeps the fit with the training reward whatever its misfit;
    ``"auto"`` keeps it only when the best fit reproduces the training reward within
    :data:`NOISE_FACTOR` times its noise, and otherwise refits on the validation curves alone
    (``knobs`` as given, default :data:`isosim.calibrate.knobs.DEFAULT`), recording the
    set-aside fit under ``details["training"]``: a surrogate that cannot reproduce the training
    reward is not steered by it.
    Bad input raises :class:`IsosimInputError` before any fitting."""
    if training_mode not in TRAINING_MODES:
        raise IsosimInputError(f"training_mode must be one of {', '.join(TRAINING_MODES)}, got {training_mode!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    prepared = prepare(runs, pass_rates, metric, val_pass_rates, base, knobs, budget, seed, training)
    cal = _calibration(*prepared, metric, seed, max_members, workers, t0, c0)
    tr = cal.details["training"]
    if training_mode == "always" or tr is None or tr["fit_ratio"] <= NOISE_FACTOR:
        return cal
    alone = _calibration(*prepare(runs, pass_rates, metric, val_pass_rates, base, knobs, budget, seed, None),
                         metric, seed, max_members, workers, t0, c0)
    set_aside = {**tr, "used": False, "knobs": dict(cal.knobs), "fit_rmse": cal.fit_rmse}
    return dataclasses.replace(alone, details={**alone.details, "training": set_aside})


def _calibration(pilots: Pilots, train: np.ndarray, val: np.ndarray, sized: SimConfig, chosen, metric: str,
                 seed: int, max_members: int, workers: int | None, t0: float, c0: float) -> Calibration:
    """One fit of ``chosen`` to ``pilots`` (:func:`calibrate`'s work after its checks)."""
    surrogate = Surrogate(pilots, train, val, sized, chosen, seed)
    start = {k.name: k.value(sized) for k in chosen}
    res = fit(surrogate, start, max_members, workers)
    members = tuple(K.from_units(chosen, u) for u in res.members)
    nv = surrogate.n_val

    def val_rmse(r: np.ndarray) -> float:  # back in the metric's units
        return pilots.noise_sd * math.sqrt(float(np.mean(r[:nv] ** 2)))

    def train_ratio(r: np.ndarray) -> float:
        return math.sqrt(float(np.mean(r[nv:] ** 2)))

    details = {
        "knobs_fitted": [{"name": k.name, "section": k.section, "field": k.field, "lo": k.lo, "hi": k.hi,
                          "scale": k.scale} for k in chosen],
        "start": start, "start_rmse": val_rmse(res.start_residuals),
        "noise_between_seeds": _num(pilots.noise_between_seeds),
        "noise_within_runs": _num(pilots.noise_within_runs), "base_level": pilots.base_level,
        "points": res.n_points, "sigma": res.sigma, "rho": res.rho, "threshold_ssr": res.threshold,
        "ensemble_rmse": [val_rmse(r) for r in res.member_residuals],
        "evaluations": res.evaluations,
        "training": None if pilots.train is None else {
            "used": True, "bins": int(len(pilots.train)), "fit_ratio": train_ratio(res.residuals),
            "start_ratio": train_ratio(res.start_residuals),
            "ensemble_ratio": [train_ratio(r) for r in res.member_residuals]},
        "fit_seconds": round(time.perf_counter() - t0, 2), "fit_cpu_seconds": round(time.process_time() - c0, 2),
    }
    return Calibration(
        metric=metric, knobs=members[0], ensemble=members, fit_rmse=val_rmse(res.residuals),
        pilot_noise_sd=pilots.noise_sd, base=sized, train=train, val=val, b_problem=pilot_b_problem(pilots),
        pilot_budget=pilots.budget, pilot_ns=tuple(sorted(int(n) for n in pilots.table["n"].unique())),
        details=details, seed=seed)


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def model_config_toml(cal: Calibration, n_star_curve: pd.DataFrame, budget: float,
                      pass_rates_path: str | None = None) -> str:
    """The model config file of a calibration (:mod:`isosim.calibrate.config_file`): the best
    fit, the population of ``pass_rates_path`` (the base config's otherwise), the allocation
    n*(budget) at the pilots' B_problem, and the ensemble."""
    from ..sim.population import file_digest
    from .config_file import model_config_text

    cfg = cal.config()
    if pass_rates_path is not None:
        path = str(Path(pass_rates_path).resolve())
        cfg = cfg.replace(population={"preset": "file", "path": path, "data_digest": file_digest(path),
                                      "train_size": 0, "val_size": int(len(cal.val)), "mixture_weights": (),
                                      "val_mixture_weights": ()})
    last = n_star_curve.iloc[-1]
    cfg = cfg.replace(allocation={"n": int(last["n"]), "b_problem": cal.b_problem, "budget": float(budget),
                                  "steps": 0}, eval={"n_evals": 24})
    info = {"metric": cal.metric, "fit_rmse": cal.fit_rmse, "pilot_noise_sd": cal.pilot_noise_sd,
            "B_problem": cal.b_problem, "pilot_budget": cal.pilot_budget, "pilot_n": list(cal.pilot_ns),
            "problems": int(len(cal.train)), "knobs": list(cal.knobs)}
    return model_config_text(cfg, cal.ensemble, info)
