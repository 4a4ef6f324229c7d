"""Measuring the mean field's ranking error (:mod:`isosim.plan.ranking` describes the statistic
and reads the result): run the planner over a :class:`~isosim.plan.ranking.Grid` of planning
cases and simulate what it picked. ``docs/planner_ranking_error.py`` writes the shipped file."""
from __future__ import annotations

import time
from dataclasses import asdict

import numpy as np

from ..sim.config import SCHEMA_VERSION, AlgoConfig, ModelConfig
from .planner import plans, setup, simulate_candidate
from .ranking import FULL, Grid, population_values, summarise


def _case(values: np.ndarray, budget: float, b_max: int, kind: str, grid: Grid) -> dict:
    """One planning case: the mean field's rankings, the simulated top k of each, the regrets."""
    model = ModelConfig(kind=kind)
    ps = plans(values, budget, b_max, grid.metrics, model=model)
    chosen = list(dict.fromkeys((c.n, c.b_problem) for m in grid.metrics for c in ps[m].ranked[:grid.top_k]))
    by_key = {(c.n, c.b_problem): c for m in grid.metrics for c in ps[m].ranked}
    pop, base = setup(values, grid.metrics, model)
    candidates = []
    for n, bp in chosen:
        c = by_key[n, bp]
        runs = simulate_candidate(base, pop, n, bp, budget, grid.seeds)
        candidates.append({"n": n, "B_problem": bp, "M": c.steps,
                           "predicted": {m: c.predicted[m] for m in grid.metrics},
                           "simulated": {m: [r[m] for r in runs] for m in grid.metrics}})
    out = {"budget": float(budget), "b_max": int(b_max), "model": kind, "candidates": candidates, "metrics": {}}
    for m in grid.metrics:
        y = np.array([np.mean(c["simulated"][m]) for c in candidates])
        sd = np.array([np.std(c["simulated"][m], ddof=1) if grid.seeds > 1 else np.nan for c in candidates])
        pick = chosen.index((ps[m].best.n, ps[m].best.b_problem))
        best = int(np.argmax(y))
        gap = ps[m].gap
        out["metrics"][m] = {
            "top": [chosen.index((c.n, c.b_problem)) for c in ps[m].ranked[:grid.top_k]],
            "pick": pick, "best": best, "regret": float(y[best] - y[pick]), "hit": bool(y[best] == y[pick]),
            "gap": float(gap) if np.isfinite(gap) else None,
            "noise": float(np.sqrt(2.0 / grid.seeds * np.mean(sd**2))),
            "level_error": float(candidates[pick]["predicted"][m] - y[pick]),
        }
    return out


def measure(grid: Grid = FULL, progress=None) -> dict:
    """Run every case of ``grid``; the content of :data:`DATA_FILE` (``grid``, ``cases``,
    ``summary``). ``progress``: called with one line per case."""
    t0 = time.perf_counter()
    cases = []
    for name, spec in grid.populations:
        values = population_values(spec, grid.problems)
        for kind in grid.models:
            for budget in grid.budgets:
                t = time.perf_counter()
                case = {"population": name, **_case(values, budget, grid.b_max, kind, grid)}
                cases.append(case)
                if progress is not None:
                    scores = "  ".join(f"{m}: regret {r['regret']:.4f}{' hit' if r['hit'] else ''}"
                                       for m, r in case["metrics"].items())
                    progress(f"{name:>14} {kind:>10} C={budget:8.3g}  {scores}  ({time.perf_counter() - t:.1f} s)")
    return {
        "about": "The mean field's ranking error against the simulator: per planning case and metric, the "
                 "regret (simulated best minus simulated value of the mean field's first choice) and whether "
                 "the first choice is the simulated best. Made by docs/planner_ranking_error.py.",
        "schema_version": SCHEMA_VERSION,
        "algo": asdict(AlgoConfig()),
        "grid": grid.as_dict(),
        "seconds": round(time.perf_counter() - t0, 1),
        "cases": cases,
        "summary": summarise(cases),
    }


