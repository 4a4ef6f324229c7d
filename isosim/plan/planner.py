"""The allocation planner: from a pass-rate histogram, a budget C and a batch cap B_max to
``n``, ``B_problem`` and ``M``.

Allocations are powers of two with ``n >= 2``, ``n * B_problem <= B_max``,
``B_problem <= D`` and ``M = floor(C / (n * B_problem)) >= 1``. The mean field runs on
:data:`MAX_TRAIN` (or ``representatives``) pass-rate quantile representatives of the D problems
that stand for all of them (:func:`representatives`, :func:`mean_field_setup`), so a plan's cost
does not grow with D; ``verify`` simulates every problem. The search runs the mean
field (:mod:`isosim.plan.meanfield`, through :func:`isosim.plan.predict.predict`) in two
stages, as the study prescribes (tune n first, keep B_problem moderate): every n at
``B_problem = min(32, ...)``, then for the three best n the neighbouring B_problem (a half,
2x, 4x). Each curve runs to C, so the same
curves give n*(C') for every C' <= C. ``verify`` simulates the three best with a few
seeds (:func:`isosim.sim.run.simulate`) and checks the ranking.

How sure a plan is comes from measurement, not from the mean field's curve error: over a
fixed grid of planning cases, :mod:`isosim.plan.ranking` recorded how often the mean field's
first choice was the simulator's best and the regret when it was not. A predicted lead of
the first choice over the runner-up below the 90th-percentile regret is a near tie. With an
``ensemble`` of configs (a calibration's knob sets that fit the pilots within their noise,
:mod:`isosim.calibrate`), how sure a plan is comes from them instead: each member's n* at the
budget at the chosen B_problem, and the share of members that pick the chosen n
(:class:`EnsembleAgreement`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..analysis.n_star import best_key
from ..errors import IsosimInputError
from ..sim.config import AlgoConfig, ModelConfig, SimConfig
from ..sim.metrics import parse_metric
from ..sim.population import Population, population_from_pass_rates
from .predict import n_star, predict
from .ranking import RankingError, confidence_level, ranking_error

MAX_N = 2048
MAX_B_PROBLEM = 1024
#: training problems the mean field integrates (pass-rate quantile representatives of a larger
#: set, :func:`representatives`), and validation problems it scores
MAX_TRAIN, MAX_VAL = 256, 300
#: how the planner runs the mean field (:func:`isosim.plan.meanfield.mean_field`): its default
#: integration, with the training metrics only at the end (the ranking needs the final
#: zero-signal share alone). A looser step (``max_change`` 1) takes a third fewer macro steps on
#: the hard band but raised the measured mean regret of the features model from 0.00001 to
#: 0.0005 avg@4 (docs/planner.md), so it is not used.
MEAN_FIELD_OPTIONS = {"train_every_step": False}
#: a fall of a mean-field curve after its peak, in the plan's metric, above which the plan notes it
#: (:func:`falling_curves`)
FALL_NOTED = 0.002


@dataclass(frozen=True)
class Candidate:
    """One allocation and its predicted validation metrics at the budget."""

    n: int
    b_problem: int
    steps: int
    predicted: dict[str, float]
    zero_signal_end: float

    @property
    def batch(self) -> int:
        return self.n * self.b_problem

    def as_json(self, metric: str) -> dict:
        return {"n": self.n, "B_problem": self.b_problem, "M": self.steps,
                "predicted": {metric: self.predicted[metric]}}


@dataclass(frozen=True)
class Verification:
    """Simulated final metric (mean over seeds) of the top candidates, in mean-field order, and
    whether the simulation agrees that the first is best (:func:`verified_ranking`): ``lead`` and
    ``lead_se`` are the first's mean paired lead over each other candidate (the same seeds) and
    its standard error over the seeds (NaN with one seed)."""

    seeds: int
    simulated: tuple[float, ...]
    ranking: str
    lead: tuple[float, ...] = ()
    lead_se: tuple[float, ...] = ()

    @property
    def ranking_holds(self) -> bool:
        return self.ranking == "holds"

    def as_json(self) -> dict:
        return {"seeds": self.seeds, "simulated": list(self.simulated), "ranking": self.ranking,
                "ranking_holds": self.ranking_holds, "lead": [_num(x) for x in self.lead],
                "lead_se": [_num(x) for x in self.lead_se]}


def verified_ranking(values: np.ndarray) -> tuple[str, np.ndarray, np.ndarray]:
    """Does a simulation confirm the mean field's first choice? ``values[c, s]``: candidate c's
    simulated metric on seed s (the mean field's order, the same seeds for every candidate).
    The first's lead over candidate j is the mean over seeds of ``values[0] - values[j]``, with
    standard error ``sd / sqrt(seeds)`` (NaN with one seed). ``holds``: every lead exceeds its
    standard error; ``fails``: some candidate leads the first by more than its standard error;
    ``inconclusive`` otherwise (a lead within the seeds' noise, or one seed); with no other
    candidate, ``holds``. Returns the verdict,
    the leads and their standard errors."""
    values = np.asarray(values, float)
    k = values.shape[1]
    diff = values[:1] - values[1:]
    lead = diff.mean(axis=1)
    se = diff.std(axis=1, ddof=1) / np.sqrt(k) if k > 1 else np.full(len(lead), np.nan)
    if np.any(lead < -se):
        verdict = "fails"
    elif np.all(lead > se):  # also with no other candidate to compare
        verdict = "holds"
    else:
        verdict = "inconclusive"
    return verdict, lead, se


@dataclass(frozen=True)
class EnsembleAgreement:
    """How the members of an ensemble of configs agree on a plan. ``n_star``: each member's
    compute-optimal n at the budget, among every n of stage 1 at the chosen B_problem (the
    plan's own config first); ``curve``: ``compute, n_low, n_high``, the smallest and largest
    member n*(C') on the plan's grid of budgets C' <= C."""

    n_star: tuple[int, ...]
    chosen_n: int
    b_problem: int
    curve: pd.DataFrame

    @property
    def members(self) -> int:
        return len(self.n_star)

    @property
    def agree(self) -> float:
        """The share of members whose n* is the chosen n."""
        return float(np.mean([n == self.chosen_n for n in self.n_star]))

    @property
    def n_low(self) -> int:
        return int(min(self.n_star))

    @property
    def n_high(self) -> int:
        return int(max(self.n_star))

    @property
    def level(self) -> str:
        """high: at least 80% of the members pick the chosen n; medium: at least half; low otherwise."""
        return ensemble_level(self.agree)

    def as_json(self) -> dict:
        return {"members": self.members, "agree": self.agree, "n_low": self.n_low, "n_high": self.n_high,
                "n_star": list(self.n_star), "B_problem": self.b_problem}


def ensemble_level(agree: float) -> str:
    """The confidence of a plan from its ensemble: ``high`` when at least 80% of the members pick
    the chosen n, ``medium`` when at least half do, ``low`` otherwise."""
    return "high" if agree >= 0.8 else "medium" if agree >= 0.5 else "low"


@dataclass(frozen=True)
class Plan:
    """A recommendation, its runner-ups and the evidence behind it."""

    metric: str
    budget: float
    b_max: int
    problems: int
    base: dict[str, float]
    ranked: tuple[Candidate, ...]
    n_star_curve: pd.DataFrame
    zero_signal_start: float
    mechanism: str
    n_star_best4: int
    n_star_worst4: int
    verification: Verification | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    model: str = "strategies"
    ensemble: EnsembleAgreement | None = None
    #: whether the plan's model and algorithm are the package defaults, on which the ranking
    #: error was measured (another model's plan gets the measurement with that caveat)
    default_knobs: bool = True
    #: the mean field's training rows: quantile representatives of the problems (all of them
    #: when there are no more than asked for)
    representatives: int = MAX_TRAIN

    @property
    def best(self) -> Candidate:
        return self.ranked[0]

    @property
    def ranking_error(self) -> RankingError:
        """The mean field's measured ranking error for this metric's family and model kind
        (:mod:`isosim.plan.ranking`, the file shipped with the package)."""
        return ranking_error(self.metric, self.model)

    @property
    def error(self) -> float:
        """The near-tie threshold: the measured 90th-percentile regret of the mean field's first
        choice against the simulator's best, not below the measurement's noise
        (:attr:`isosim.plan.ranking.RankingError.threshold`)."""
        return self.ranking_error.threshold

    @property
    def gap(self) -> float:
        if len(self.ranked) < 2:
            return math.inf
        return self.best.predicted[self.metric] - self.ranked[1].predicted[self.metric]

    @property
    def confidence(self) -> str:
        """With an ensemble, its agreement on the chosen n (:attr:`EnsembleAgreement.level`).
        Otherwise high: the runner-up is predicted to trail by more than twice the near-tie
        threshold (:attr:`error`); medium: by more than it; low: within it (a near tie,
        :func:`isosim.plan.ranking.confidence_level`)."""
        if self.ensemble is not None:
            return self.ensemble.level
        return confidence_level(self.gap, self.error)

    def reasoning(self) -> str:
        b, m = self.best, self.metric
        gain_best = b.predicted["best@4"] - self.base["best@4"]
        gain_worst = b.predicted["worst@4"] - self.base["worst@4"]
        if self.mechanism == "neither":
            what = (f"neither best@4 nor worst@4 moves by more than the near-tie threshold ({self.error:.4f}), so no "
                    "mechanism can be named")
            gains = f"{gain_best:+.4f} and {gain_worst:+.4f}"
        else:
            what = ("sharpening dominates: worst@4 (all 4 samples correct) gains more than best@4"
                    if self.mechanism == "sharpening" else
                    "coverage dominates: best@4 (at least 1 of 4 correct) gains more than worst@4")
            gains = (f"{gain_worst:+.3f} vs {gain_best:+.3f}" if self.mechanism == "sharpening" else
                     f"{gain_best:+.3f} vs {gain_worst:+.3f}")  # in the order the sentence names them
        runner = self.ranked[1] if len(self.ranked) > 1 else None
        tie = ""
        if self.ensemble is not None:
            e = self.ensemble
            tie = (f" Across the {e.members} knob sets of the calibration's ensemble (those that fit the pilot runs "
                   f"within their noise), {round(e.agree * e.members)} pick n = {b.n} at this budget (at B_problem = "
                   f"{e.b_problem}; their n* runs from {e.n_low} to {e.n_high}): {self.confidence} confidence.")
        elif runner is not None:
            r = self.ranking_error
            tie = (f" The runner-up (n = {runner.n}, B_problem = {runner.b_problem}) is predicted "
                   f"{self.gap:+.4f} behind. Measured against the simulator over {r.cases} planning cases"
                   f"{'' if r.model == 'all' else f' of the {r.model} model'}"
                   f"{'' if self.default_knobs else ' with its default knobs (this plan uses others, so it may not carry over)'}, "
                   f"the mean field's first choice was the best simulated allocation in {r.hit_rate:.0%} of "
                   f"them and fell short of it by {r.regret_mean:.4f} {r.family}@k on average, by at most "
                   f"{r.regret_p90:.4f} in 90% (measurement noise {r.noise:.4f}): {self.confidence} confidence"
                   + (" (a near tie: either allocation is as good as the mean field can tell)."
                      if self.confidence == "low" else "."))
        return (
            f"With n = {b.n}, {self.zero_signal_start:.0%} of groups carry no signal at the start "
            f"(all {b.n} rollouts agree, p^n + (1-p)^n averaged over your pass rates) and "
            f"{b.zero_signal_end:.0%} by the end of the {b.steps} steps. Over the run {what} "
            f"({gains}); at this budget the n that maximises worst@4 is "
            f"{self.n_star_worst4} and the one that maximises best@4 is {self.n_star_best4}. A smaller n "
            f"buys more update steps on the problems that have signal; a larger n buys signal on "
            f"problems that rarely give any and a less noisy gradient. The mean field predicts "
            f"{m} {b.predicted[m]:.4f} (base {self.base[m]:.4f}).{tie}"
        )

    def _measured(self) -> dict:
        r = self.ranking_error
        return {"regret_p90": r.regret_p90, "regret_mean": r.regret_mean, "hit_rate": r.hit_rate, "noise": r.noise,
                "cases": r.cases, "model": r.model, "measured_on_these_knobs": self.default_knobs}

    def to_json(self) -> dict:
        b = self.best
        curve = [{"compute": float(c), "n": int(n), "B_problem": int(bp)}
                 for c, n, bp in zip(self.n_star_curve["compute"], self.n_star_curve["n"],
                                     self.n_star_curve["B_problem"])]
        if self.ensemble is not None:
            for point, lo, hi in zip(curve, self.ensemble.curve["n_low"], self.ensemble.curve["n_high"]):
                if math.isfinite(lo) and math.isfinite(hi):
                    point.update(n_low=int(lo), n_high=int(hi))
        return {
            "n": b.n, "B_problem": b.b_problem, "M": b.steps,
            "predicted": {self.metric: b.predicted[self.metric]},
            "alternatives": [c.as_json(self.metric) for c in self.ranked[1:6]],
            "n_star_curve": curve,
            "metric": self.metric, "budget": self.budget, "b_max": self.b_max, "problems": self.problems,
            "representatives": self.representatives,
            "base": {self.metric: self.base[self.metric]},
            "metrics": b.predicted,
            "confidence": {"level": self.confidence, "gap": _num(self.gap), "threshold": self.error,
                           **self._measured(), **({} if self.ensemble is None else
                                                  {"source": "ensemble", "ensemble": self.ensemble.as_json()})},
            "mechanism": self.mechanism, "zero_signal": {"start": self.zero_signal_start, "end": b.zero_signal_end},
            "reasoning": self.reasoning(), "notes": list(self.notes),
            "verify": None if self.verification is None else self.verification.as_json(),
        }


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _powers(lo: int, hi: int) -> list[int]:
    return [2**k for k in range(max(0, math.ceil(math.log2(lo))), int(math.log2(hi)) + 1)] if hi >= lo else []


def check_inputs(values: np.ndarray, budget: float, b_max: int, metric: str, representatives: int = MAX_TRAIN) -> None:
    """One :class:`IsosimInputError` line for each way the planner's input can be wrong."""
    parse_metric(metric)
    if values.size == 0:
        raise IsosimInputError("the pass-rate file holds no problems")
    if not np.all(np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise IsosimInputError("pass rates must be numbers in [0, 1]")
    if not (isinstance(b_max, (int, np.integer)) and b_max >= 2):
        raise IsosimInputError(f"B_max must be an integer >= 2 (n >= 2 rollouts of at least one problem), got {b_max}")
    if not (isinstance(representatives, (int, np.integer)) and representatives >= 2):
        raise IsosimInputError(f"representatives must be an integer >= 2, got {representatives}")
    if not math.isfinite(budget):
        raise IsosimInputError(f"budget must be a finite number of rollouts, got {budget}")
    if budget < 2:
        raise IsosimInputError(f"budget {budget:g} is below one step (the smallest, n = 2 and B_problem = 1, "
                               "costs 2 rollouts)")


def allocations_stage1(d: int, budget: float, b_max: int) -> tuple[int, list[tuple[int, int]]]:
    """B_problem0 = the largest power of two <= min(32, D, B_max / 2, C / 2) and every n with it."""
    cap = min(32, d, b_max // 2, int(budget // 2))
    bp0 = 2 ** int(math.log2(cap))
    ns = _powers(2, min(MAX_N, b_max // bp0, int(budget // bp0)))
    return bp0, [(n, bp0) for n in ns]


def allocations_stage2(top_n: list[int], bp0: int, d: int, budget: float, b_max: int) -> list[tuple[int, int]]:
    """For each n of ``top_n``: B_problem in {bp0/2, 2 bp0, 4 bp0} within the constraints."""
    out = []
    for n in top_n:
        for bp in (bp0 // 2, 2 * bp0, 4 * bp0):
            if 1 <= bp <= min(d, MAX_B_PROBLEM) and n * bp <= b_max and n * bp <= budget:
                out.append((n, bp))
    return out


def representatives(values, k: int) -> np.ndarray:
    """``k`` pass rates that stand for ``values`` in equal shares: the means of ``k`` equal-count
    quantile bins (all of ``values``, sorted, when there are at most ``k``).

    With the D values sorted, ``F(x)`` the integral of the step function ``x -> p_(floor(x))``
    over [0, x], bin j covers ``[j D / k, (j + 1) D / k)`` (fractional ends) and its
    representative is ``(F((j+1) D/k) - F(j D/k)) / (D / k)``. Every bin carries weight 1/k,
    so the mean pass rate (avg@k of the base) is exact, and for any metric ``f(p)``
    (best@k, worst@k) the error of the base value is at most ``max |f''| / 2`` times the mean
    within-bin variance of the pass rates (:func:`binning_error`): a Taylor expansion about
    each bin's mean, whose first-order term vanishes.
    """
    v = np.sort(np.asarray(values, float).ravel())
    d = v.size
    if d <= k:
        return v
    edges = np.arange(k + 1) * (d / k)
    F = np.concatenate([[0.0], np.cumsum(v)])
    Fe = np.interp(edges, np.arange(d + 1), F)
    return np.clip(np.diff(Fe) / (d / k), v[0], v[-1])


def binning_error(values, k: int) -> float:
    """The mean within-bin variance of ``values`` in :func:`representatives`' ``k`` bins: the base
    value of a metric ``f(p)`` moves by at most ``max |f''| / 2`` times it (``max |f''| = j (j-1)``
    for best@j and worst@j)."""
    v = np.sort(np.asarray(values, float).ravel())
    d = v.size
    if d <= k:
        return 0.0
    edges = np.arange(k + 1) * (d / k)
    idx = np.arange(d + 1)
    F1 = np.interp(edges, idx, np.concatenate([[0.0], np.cumsum(v)]))
    F2 = np.interp(edges, idx, np.concatenate([[0.0], np.cumsum(v * v)]))
    w = d / k
    return float(np.mean(np.maximum(np.diff(F2) / w - (np.diff(F1) / w) ** 2, 0.0)))


def _validation_values(values: np.ndarray, seed: int) -> np.ndarray:
    """The validation set's pass rates: :data:`MAX_VAL` of ``values`` at random (all of them when
    fewer), the same for the mean field and for the simulations of ``verify``."""
    rng = np.random.default_rng(seed)
    return values if len(values) <= MAX_VAL else rng.choice(values, MAX_VAL, replace=False)


def _population(values: np.ndarray, model: ModelConfig, seed: int) -> Population:
    return population_from_pass_rates(values, _validation_values(values, seed), model=model, seed=seed)


def setup(values, metrics=("avg@4",), model: ModelConfig | None = None, algo: AlgoConfig | None = None,
          seed: int = 0) -> tuple[Population, SimConfig]:
    """The population a plan for base pass rates ``values`` runs on (``MAX_VAL`` of them, at
    random, for validation) and its base config (evaluated at ``k`` = 1, 4 and every k of
    ``metrics``); :func:`simulate_candidate` simulates an allocation on the same pair."""
    values = np.asarray(values, dtype=float).ravel()
    model = model or ModelConfig()
    ks = tuple(sorted({1, 4, *(parse_metric(m)[1] for m in metrics)}))
    pop = _population(values, model, seed)
    base = SimConfig(model=model, algo=algo or AlgoConfig()).replace(
        population={"train_size": len(values), "val_size": len(pop.val)}, eval={"ks": ks})
    return pop, base


def mean_field_setup(values, metrics=("avg@4",), model: ModelConfig | None = None, algo: AlgoConfig | None = None,
                     seed: int = 0, rows: int = MAX_TRAIN) -> tuple[Population, SimConfig, dict]:
    """What the planner's mean field runs on: a population of ``rows`` (default :data:`MAX_TRAIN`)
    training problems whose base pass rates are :func:`representatives` of ``values`` (fresh generator draws, as in
    :func:`setup`) and the validation problems of :func:`setup` (the same draws: its validation
    set does not depend on the training set), the base config of :func:`setup`,
    and the options of :func:`isosim.plan.predict.predict` that make those rows stand for all
    ``len(values)`` training problems (``train_size``). Its cost per macro step does not grow
    with the number of problems."""
    values = np.asarray(values, dtype=float).ravel()
    model = model or ModelConfig()
    ks = tuple(sorted({1, 4, *(parse_metric(m)[1] for m in metrics)}))
    pop = population_from_pass_rates(representatives(values, rows), _validation_values(values, seed),
                                     model=model, seed=seed)
    base = SimConfig(model=model, algo=algo or AlgoConfig()).replace(
        population={"train_size": len(values), "val_size": len(pop.val)}, eval={"ks": ks})
    return pop, base, dict(MEAN_FIELD_OPTIONS, train_size=len(values), threads=threads())


def threads() -> int:
    """Allocations the planner integrates at once: the cores this process may use, at most 4."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def simulate_candidate(base: SimConfig, pop: Population, n: int, b_problem: int, budget: float,
                       seeds: int, seed: int = 0) -> list[dict[str, float]]:
    """Final validation metrics of ``seeds`` simulated runs (seeds ``seed, seed + 1, ...``) of
    one allocation, ``M = floor(budget / (n B_problem))`` steps, on :func:`setup`'s pair."""
    from ..sim.run import simulate

    cfg = base.replace(allocation={"n": int(n), "b_problem": int(b_problem), "budget": float(budget), "steps": 0},
                       eval={"n_evals": 4})
    return [simulate(cfg, seed + s, population=pop).final("val") for s in range(seeds)]


def _candidates(curves: pd.DataFrame, metrics: list[str]) -> list[Candidate]:
    out = []
    for (n, bp), g in curves.groupby(["n", "B_problem"], sort=False):
        last_val = g[g["split"] == "val"].sort_values("step").iloc[-1]
        last_tr = g[g["split"] == "train"].sort_values("step").iloc[-1]
        out.append(Candidate(int(n), int(bp), int(last_val["step"]), {m: float(last_val[m]) for m in metrics},
                             float(last_tr["zero_var_frac"])))
    return out


def plan(values, budget: float, b_max: int, metric: str = "avg@4", model: ModelConfig | None = None,
         algo: AlgoConfig | None = None, verify: bool = False, seeds: int = 2, seed: int = 0,
         ensemble=None, representatives: int = MAX_TRAIN) -> Plan:
    """Recommend ``(n, B_problem, M)`` for base pass rates ``values`` (see the module docstring)."""
    return plans(values, budget, b_max, (metric,), model, algo, verify, seeds, seed, ensemble, representatives)[metric]


def plans(values, budget: float, b_max: int, metrics=("avg@4",), model: ModelConfig | None = None,
          algo: AlgoConfig | None = None, verify: bool = False, seeds: int = 2, seed: int = 0,
          ensemble=None, representatives: int = MAX_TRAIN) -> dict[str, Plan]:
    """One :func:`plan` per metric of ``metrics``, sharing the mean-field curves: stage 1 is
    the same for every metric, stage 2 (the B_problem neighbours of the metric's three best n)
    adds only the curves not run yet, and each metric ranks exactly the candidates its own
    :func:`plan` would. ``ensemble``: further :class:`SimConfig` (their model and algo
    sections are used) whose agreement on each plan sets its confidence
    (:func:`ensemble_agreement`). ``representatives``: the mean field's training rows
    (:func:`mean_field_setup`); more follow the simulator on every problem more closely on a
    large histogram, at a cost about in proportion (docs/planner.md, "Large histograms")."""
    values = np.asarray(values, dtype=float).ravel()
    metrics = list(dict.fromkeys(metrics))
    for metric in metrics:
        check_inputs(values, float(budget), b_max, metric, representatives)
    if verify and seeds < 1:
        raise IsosimInputError(f"verify needs at least one seed, got {seeds}")
    shown = list(dict.fromkeys([*metrics, "avg@4", "best@4", "worst@4"]))
    d = len(values)
    pop, base, opts = mean_field_setup(values, metrics, model, algo, seed, representatives)
    bp0, stage1 = allocations_stage1(d, budget, b_max)
    runs = _by_allocation(predict(base, stage1, budget, pop, **opts))
    first = _candidates(pd.concat(runs.values(), ignore_index=True), shown)
    out = {}
    for metric in metrics:
        top = sorted(first, key=lambda c: (-c.predicted[metric], c.batch, c.n))[:3]
        stage2 = allocations_stage2([c.n for c in top], bp0, d, budget, b_max)
        todo = [a for a in stage2 if a not in runs]
        if todo:
            runs.update(_by_allocation(predict(base, todo, budget, pop, **opts)))
        curves = pd.concat([runs[a] for a in dict.fromkeys([*stage1, *stage2])], ignore_index=True)
        out[metric] = replace(_plan_of(curves, values, metric, shown, budget, b_max, base.model.kind),
                              default_knobs=base.model == ModelConfig(kind=base.model.kind) and base.algo == AlgoConfig(),
                              representatives=len(pop.train),
                              notes=fall_notes(falling_curves(curves, metric), d, len(pop.train), metric))
        if ensemble:
            out[metric] = ensemble_agreement(out[metric], runs, values, ensemble, base, pop, b_max, seed,
                                             representatives)
        if verify:  # simulated on every problem, not on the mean field's representatives
            full_pop, full_base = setup(values, metrics, model, algo, seed)
            out[metric] = _verify(out[metric], full_base, full_pop, seeds, seed)
    return out


def ensemble_agreement(p: Plan, runs: dict, values: np.ndarray, ensemble, base: SimConfig, pop: Population,
                       b_max: int, seed: int = 0, rows: int = MAX_TRAIN) -> Plan:
    """``p`` with the agreement of ``base`` (on ``pop``) and the ``ensemble`` configs on it: for
    each, the mean-field curve of every n of stage 1 (powers of two from 2, ``n * B_problem
    <= B_max``, within the budget) at the chosen B_problem, to the budget; its n* at the budget
    and on the plan's grid (held past a run's last step, ties to the smaller n). ``runs``:
    curves of ``base`` already computed, by allocation."""
    bp = p.best.b_problem
    allocs = [(n, bp) for n in _powers(2, min(MAX_N, b_max // bp, int(p.budget // bp)))]
    grid = p.n_star_curve["compute"].to_numpy(float)
    opts = dict(MEAN_FIELD_OPTIONS, train_size=len(values), threads=threads())  # as mean_field_setup's
    todo = [a for a in allocs if a not in runs]
    have = {**runs, **(_by_allocation(predict(base, todo, p.budget, pop, **opts)) if todo else {})}
    per = [pd.concat([have[a] for a in allocs], ignore_index=True)]
    for member in ensemble:
        m_pop, m_base, _ = mean_field_setup(values, (p.metric,), member.model, member.algo, seed, rows)
        per.append(predict(m_base, allocs, p.budget, m_pop, **opts))
    table = np.array([n_star(c, p.metric, grid=grid, hold=True).set_index("compute")["n"].reindex(grid)
                      .to_numpy(float) for c in per])
    # fmin / fmax skip NaN (a grid point where a member has no n*) and give NaN where all are, silently
    curve = pd.DataFrame({"compute": grid, "n_low": np.fmin.reduce(table, axis=0),
                          "n_high": np.fmax.reduce(table, axis=0)})
    return replace(p, ensemble=EnsembleAgreement(tuple(int(x) for x in table[:, -1]), p.best.n, bp, curve))


def falling_curves(curves: pd.DataFrame, metric: str, tol: float = FALL_NOTED) -> dict[tuple[int, int], float]:
    """The allocations whose validation ``metric`` curve ends more than ``tol`` below its peak,
    with that fall: ``{(n, B_problem): peak - final}``."""
    v = curves[curves["split"] == "val"].sort_values("step")
    g = v.groupby(["n", "B_problem"])[metric]
    fall = g.max() - g.last()
    return {(int(n), int(bp)): float(x) for (n, bp), x in fall.items() if x > tol}


def fall_notes(falls: dict[tuple[int, int], float], problems: int, rows: int, metric: str) -> tuple[str, ...]:
    """What a plan says of curves that fall after their peak (:func:`falling_curves`). On fewer
    representatives than problems such a fall can be the representatives' (the shared path fits
    what is particular to them, as it would a training set of that size; measured on 100,000
    problems, docs/planner.md, "Large histograms"); on every problem it is the surrogate's own
    memorisation."""
    if not falls:
        return ()
    worst = max(falls.values())
    ns = ", ".join(str(n) for n in sorted({n for n, _ in falls}))
    head = (f"the mean field's {metric} curves of n = {ns} fall after their peak, by up to {worst:.3f}, "
            "and each candidate is ranked at the budget")
    if rows < problems:
        return (f"{head}. On {rows} representatives of {problems:,} problems such a fall can come from the "
                f"representatives, which the shared path fits as it would a set of {rows} problems (on 100,000 hard-band "
                "problems the simulated curves kept rising where those of 256 representatives fell): --representatives "
                f"{4 * rows} integrates more rows, closer to the simulator, at a higher cost.",)
    return (f"{head}: the surrogate memorises the training problems and its held-out reward falls, so those runs "
            "do best stopped before the budget.",)


def _by_allocation(curves: pd.DataFrame) -> dict[tuple[int, int], pd.DataFrame]:
    return {(int(n), int(bp)): g for (n, bp), g in curves.groupby(["n", "B_problem"], sort=False)}


def _plan_of(curves: pd.DataFrame, values: np.ndarray, metric: str, shown: list[str], budget: float,
             b_max: int, model: str) -> Plan:
    ranked = sorted(_candidates(curves, shown), key=lambda c: (-c.predicted[metric], c.batch, c.n))
    best = ranked[0]
    step0 = curves[(curves["split"] == "val") & (curves["step"] == 0)].iloc[0]
    base_metrics = {m: float(step0[m]) for m in shown}
    same_bp = [c for c in ranked if c.b_problem == best.b_problem]
    gain = {m: best.predicted[m] - base_metrics[m] for m in ("best@4", "worst@4")}
    threshold = ranking_error(metric, model).threshold
    return Plan(
        metric=metric, budget=float(budget), b_max=int(b_max), problems=len(values), base=base_metrics,
        ranked=tuple(ranked), n_star_curve=n_star(curves, metric, grid=_grid(curves, budget), hold=True),
        zero_signal_start=zero_signal_share(values, best.n),
        mechanism=dominant_mechanism(gain["best@4"], gain["worst@4"], threshold),
        n_star_best4=best_key({c.n: c.predicted["best@4"] for c in same_bp}),
        n_star_worst4=best_key({c.n: c.predicted["worst@4"] for c in same_bp}), model=model,
    )


def _grid(curves: pd.DataFrame, budget: float) -> np.ndarray:
    from ..analysis.frontier import log_grid

    lo = float(curves.loc[curves["compute"] > 0, "compute"].min())
    return log_grid(lo, max(lo, float(budget)), 5)


def _verify(p: Plan, base: SimConfig, pop: Population, seeds: int, seed: int) -> Plan:
    """Simulate the top three candidates with ``seeds`` seeds; does the mean-field order hold
    (:func:`verified_ranking`)?"""
    values = np.array([[r[p.metric] for r in simulate_candidate(base, pop, c.n, c.b_problem, p.budget, seeds, seed)]
                       for c in p.ranked[:3]])
    verdict, lead, se = verified_ranking(values)
    return replace(p, verification=Verification(seeds, tuple(float(x) for x in values.mean(axis=1)), verdict,
                                                tuple(float(x) for x in lead), tuple(float(x) for x in se)))


def dominant_mechanism(gain_best: float, gain_worst: float, threshold: float) -> str:
    """``sharpening`` when worst@4 (all of 4 samples correct) gains more than best@4 (at least one
    of 4), ``coverage`` otherwise; ``neither`` when neither gain exceeds ``threshold`` in size (the
    plan's near-tie threshold: a change the mean field cannot tell from none)."""
    if max(abs(gain_best), abs(gain_worst)) <= threshold:
        return "neither"
    return "sharpening" if gain_worst > gain_best else "coverage"


def zero_signal_share(values, n: int) -> float:
    """Share of groups of n with no GRPO signal at the base policy: mean of p^n + (1-p)^n."""
    p = np.asarray(values, float)
    return float(np.mean(p**n + (1 - p) ** n))
