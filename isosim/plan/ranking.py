"""The mean field's ranking error, measured against the simulator: how often, and by how much,
the planner's first choice falls short of the best allocation the simulator finds.

For one planning case (a pass-rate population, a budget C, a batch cap B_max, a surrogate model)
and one metric m, the planner (:func:`isosim.plan.planner.plans`) ranks its candidate
allocations by the mean field. The top ``k`` of each metric's ranking are simulated with
``S`` seeds (:func:`isosim.plan.planner.simulate_candidate`, the planner's own population and
config); ``y_c`` is candidate c's simulated final validation metric, averaged over the seeds.
With ``pick`` the mean field's first choice and the maximum over every simulated candidate of
the case,

    regret = max_c y_c - y_pick >= 0,       hit = (regret = 0),

and the predicted gap is the mean field's lead of ``pick`` over its runner-up. The summary of a
metric family (avg, best, worst) over its cases is the hit rate, the mean, median,
90th percentile (:func:`numpy.quantile`, linear) and maximum of the regret, and the typical
noise of a regret: ``sqrt(2 / S)`` times the root-mean-square seed-to-seed standard deviation
of the case's candidates (the standard error of a difference of two seed means). ``isosim plan``
reads the summary (:func:`ranking_error`): a predicted gap under the threshold
``max(90th-percentile regret, median noise)`` is a near tie (below the noise the measurement
cannot tell a regret from zero).

The best is taken over the simulated candidates only (the union of the three metrics' top
``k``), so the regret is a lower bound on the loss against the best of all candidates; with
``S`` seeds it also carries selection noise of the order of the noise above.
``docs/planner_ranking_error.py`` runs :func:`isosim.plan.ranking_measure.measure` on
:data:`FULL` and writes the file the planner ships with (:data:`DATA_FILE`). This module only
reads and summarises the measurement, so the planner can import it; the measuring, which runs
the planner, is :mod:`isosim.plan.ranking_measure`.
"""
from __future__ import annotations

import functools
import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ..sim.config import ModelConfig, PopulationConfig
from ..sim.metrics import parse_metric

#: the summary the planner reads, next to this module
DATA_FILE = "ranking_error.json"
#: the metrics every case ranks by
METRICS = ("avg@4", "best@4", "worst@4")


@dataclass(frozen=True)
class Grid:
    """The planning cases: every population x budget x model, at one B_max.

    ``populations``: ``(name, spec)`` pairs; a spec is ``{"preset": band}`` (the base pass rates
    of that band's training problems under the default model) or ``{"beta": [a, b],
    "samples": s}`` (pass rates drawn from Beta(a, b), then measured as ``correct / s`` with
    ``correct ~ Bin(s, p)``, like a user's file). ``problems`` pass rates per population (data
    seed 0); ``seeds`` simulated seeds per candidate; ``top_k`` candidates simulated per metric.
    """

    populations: tuple[tuple[str, dict], ...]
    problems: int
    budgets: tuple[float, ...]
    b_max: int
    models: tuple[str, ...]
    seeds: int
    top_k: int
    metrics: tuple[str, ...] = METRICS

    def as_dict(self) -> dict:
        d = asdict(self)
        d["populations"] = [{"name": name, **spec} for name, spec in self.populations]
        return json.loads(json.dumps(d))


#: the grid of the shipped file: two study bands and two user-like histograms, four budgets,
#: the default model and the features model
FULL = Grid(
    populations=(("easy", {"preset": "easy"}), ("hard", {"preset": "hard"}),
                 ("beta(0.6,1.6)", {"beta": [0.6, 1.6], "samples": 16}),
                 ("beta(0.4,2.5)", {"beta": [0.4, 2.5], "samples": 16})),
    problems=500, budgets=(3e4, 1e5, 3e5, 1e6), b_max=4096, models=("strategies", "features"), seeds=8, top_k=3)
#: a grid that runs in seconds (the test of the generating script)
SMALL = Grid(populations=(("beta(0.6,1.6)", {"beta": [0.6, 1.6], "samples": 16}),),
             problems=100, budgets=(4e3, 1.6e4), b_max=256, models=("strategies",), seeds=2, top_k=2)


def population_values(spec: dict, problems: int, seed: int = 0) -> np.ndarray:
    """The base pass rates of one population spec of a :class:`Grid`."""
    if "preset" in spec:
        from ..sim.population import build_population

        cfg = PopulationConfig(preset=spec["preset"], train_size=problems, val_size=1, seed=seed)
        return np.asarray(build_population(cfg, ModelConfig()).train.base_pass, float)
    a, b = spec["beta"]
    rng = np.random.default_rng(seed)
    p = rng.beta(a, b, problems)
    s = int(spec.get("samples", 0))
    return rng.binomial(s, p) / s if s else p


def summarise(cases: list[dict]) -> dict:
    """Per metric family (and ``all``), over every model and (``by_model``) per model kind:
    cases, hit rate, regret mean / median / p90 / max, the median noise of a regret, the mean
    and RMS level error of the pick (predicted minus simulated), and the hit rate and mean
    regret per confidence level of the planner's rule (:func:`confidence_level` with that
    summary's own :attr:`RankingError.threshold`)."""
    rows: dict[str, list[tuple[str, dict]]] = {}
    for case in cases:
        for m, r in case["metrics"].items():
            rows.setdefault(parse_metric(m)[0], []).append((case["model"], r))
            rows.setdefault("all", []).append((case["model"], r))
    out = {}
    for family, rs in rows.items():
        out[family] = _summary([r for _, r in rs])
        out[family]["by_model"] = {kind: _summary([r for k, r in rs if k == kind])
                                   for kind in dict.fromkeys(k for k, _ in rs)}
    return out


def _summary(rs: list[dict]) -> dict:
    regret = np.array([r["regret"] for r in rs])
    p90 = float(np.quantile(regret, 0.9))
    noise = float(np.median([r["noise"] for r in rs]))
    levels: dict[str, list[dict]] = {}
    for r in rs:
        levels.setdefault(confidence_level(np.inf if r["gap"] is None else r["gap"], max(p90, noise)), []).append(r)
    level_err = np.array([r["level_error"] for r in rs])
    return {
        "cases": len(rs), "hit_rate": float(np.mean([r["hit"] for r in rs])),
        "regret_mean": float(regret.mean()), "regret_median": float(np.median(regret)), "regret_p90": p90,
        "regret_max": float(regret.max()), "noise_median": noise,
        "level_error_mean": float(level_err.mean()), "level_error_rms": float(np.sqrt(np.mean(level_err**2))),
        "by_confidence": {lv: {"cases": len(v), "hit_rate": float(np.mean([r["hit"] for r in v])),
                               "regret_mean": float(np.mean([r["regret"] for r in v]))}
                          for lv, v in sorted(levels.items())},
    }


def confidence_level(gap: float, threshold: float) -> str:
    """The planner's rule: ``high`` when the predicted gap to the runner-up exceeds twice the
    threshold (:attr:`RankingError.threshold`), ``medium`` when it exceeds it, ``low`` (a near
    tie) otherwise."""
    if gap > 2 * threshold:
        return "high"
    return "medium" if gap > threshold else "low"


@dataclass(frozen=True)
class RankingError:
    """The measured ranking error of one metric family (:func:`summarise`), for one model
    kind or (``model = "all"``) pooled over the measured ones."""

    family: str
    model: str
    cases: int
    hit_rate: float
    regret_mean: float
    regret_p90: float
    noise: float
    by_confidence: dict = field(default_factory=dict)

    @property
    def threshold(self) -> float:
        """The near-tie threshold: the 90th-percentile regret, not below the median noise of a
        measured regret (a smaller regret the measurement cannot tell from zero)."""
        return max(self.regret_p90, self.noise)


@functools.lru_cache(maxsize=4)
def load(path: str | None = None) -> dict:
    """The measured file: ``path``, or :data:`DATA_FILE` shipped with the package."""
    if path is None:
        return json.loads(resources.files(__package__).joinpath(DATA_FILE).read_text())
    return json.loads(Path(path).read_text())


def ranking_error(metric: str, model: str | None = None, path: str | None = None) -> RankingError:
    """The measured ranking error for ``metric``'s family (avg, best, worst; measured at k = 4,
    used for every k) and model kind ``model``; pooled over the measured models for a model
    the file lacks (or ``None``), over the families for a family it lacks."""
    summary = load(path)["summary"]
    family = parse_metric(metric)[0]
    if family not in summary:
        family = "all"
    s = summary[family]
    kind = model if model in s.get("by_model", {}) else "all"
    if kind != "all":
        s = s["by_model"][kind]
    return RankingError(family, kind, s["cases"], s["hit_rate"], s["regret_mean"], s["regret_p90"],
                        s["noise_median"], s["by_confidence"])
