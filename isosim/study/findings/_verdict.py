"""Three-valued verdicts: a finding's check repeated on bootstrap resamples of the seeds.

A finding's check turns stored sweeps into a yes/no criterion and the quantities it compares
(``evidence["compared"]``). One seed's runs are the unit of replication, so the resampling
unit is the replicate: a resample draws, for each set of replicates the finding's sweeps share
(the same replicate in two sweeps has the same training seed, so comparisons across sweeps stay
paired), as many replicates with replacement and reruns the check on the drawn runs (a
replicate drawn twice counts twice in every mean and fit). With ``S`` replicates there are
``C(2S-1, S)`` distinct resamples (3 for two seeds, 35 for four); when that is at most
``n_boot`` every one is evaluated with its multinomial probability (the exact bootstrap
distribution), otherwise ``n_boot`` resamples are drawn with a fixed seed.

With ``P`` = the bootstrap probability that the criterion holds, the verdict is

* ``holds`` when ``P >= 0.95``,
* ``fails`` when ``P <= 0.05``,
* ``inconclusive`` otherwise.

Every compared quantity is reported with its value on all seeds, its bootstrap standard error
and its 95% percentile interval. With few seeds the bootstrap understates the spread (by a
factor ``sqrt((S-1)/S)`` for a mean) and two seeds give only three resamples: a verdict of
``holds`` then needs the criterion to hold on each seed alone and on both together.
"""
from __future__ import annotations

import math
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
import pandas as pd

HOLDS, FAILS, INCONCLUSIVE = "holds", "fails", "inconclusive"
VERDICTS = (HOLDS, FAILS, INCONCLUSIVE)
#: the bootstrap probability at or above which a criterion holds (at or below 1 - LEVEL: fails)
LEVEL = 0.95
#: resamples drawn when the exact enumeration is larger than this
N_BOOT = 100


def verdict_of(p_holds: float) -> str:
    """``holds`` / ``fails`` / ``inconclusive`` from the bootstrap probability that the criterion holds."""
    if p_holds >= LEVEL - 1e-12:
        return HOLDS
    if p_holds <= 1 - LEVEL + 1e-12:
        return FAILS
    return INCONCLUSIVE


class SeedResample:
    """The stored results of a finding with each sweep's replicates replaced by a resample.

    ``draws`` maps a sweep's replicate set (sorted tuple) to the replicates drawn for it; rows
    of a replicate drawn ``k`` times appear ``k`` times, each copy as its own run. ``memo`` is
    shared between resamples so that a fit on the same draw of the same sweep is done once. A
    resample's n*(C) law starts from the all-seed fit (one start instead of a grid), as the
    run bootstrap of :func:`isosim.analysis.fit.analyse_runs` does."""

    def __init__(self, parent, draws: dict[tuple[int, ...], tuple[int, ...]], memo: dict):
        self.parent, self.draws, self.memo = parent, draws, memo
        self.specs = parent.specs

    def _draw(self, name: str) -> tuple[int, ...]:
        key = ("replicates", name)
        if key not in self.memo:
            self.memo[key] = replicate_set(self.parent, name)
        reps = self.memo[key]
        return self.draws.get(reps, reps)

    def _resampled(self, table: pd.DataFrame, draw: tuple[int, ...]) -> pd.DataFrame:
        by_rep = dict(tuple(table.groupby("replicate", sort=False)))
        parts = []
        for i, rep in enumerate(draw):
            part = by_rep[rep]
            parts.append(part.assign(run=part["run"].astype(str) + f"~{i}", replicate=i))
        return pd.concat(parts, ignore_index=True)

    def _get(self, kind: str, name: str, split: str, make):
        key = (kind, name, split, self._draw(name))
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def all_seeds(self):
        """The results this resample draws from: where a check reads a tolerance that one drawn
        replicate alone cannot estimate (a spread between seeds)."""
        return self.parent

    def raw(self, name: str) -> pd.DataFrame:
        return self._get("raw", name, "", lambda: self._resampled(self.parent.raw(name), self._draw(name)))

    def evals(self, name: str, split: str = "val") -> pd.DataFrame:
        return self._get("evals", name, split,
                         lambda: self._resampled(self.parent.evals(name, split), self._draw(name)))

    def law(self, name: str, split: str = "val") -> dict[str, Any]:
        from ._common import n_star_law

        return self._get("law", name, split,
                         lambda: n_star_law(self.evals(name, split), warm=self.parent.law(name, split)))


def replicate_set(results, name: str) -> tuple[int, ...]:
    """The replicates stored for sweep ``name`` (sorted)."""
    return tuple(sorted(int(r) for r in results.raw(name)["replicate"].unique()))


def resamples(groups: list[tuple[int, ...]], n_boot: int = N_BOOT, seed: int = 0):
    """``(draws, weights, exact)``: the resamples of each replicate set in ``groups`` and their probabilities.

    Exact (every multiset, multinomial weights) for a single group with at most ``n_boot``
    multisets; otherwise ``n_boot`` equally weighted draws, each group drawn independently."""
    if len(groups) == 1:
        reps = groups[0]
        s = len(reps)
        if math.comb(2 * s - 1, s) <= n_boot:
            draws, weights = [], []
            for combo in combinations_with_replacement(reps, s):
                counts = np.unique(combo, return_counts=True)[1]
                weights.append(math.factorial(s) / np.prod([math.factorial(int(c)) for c in counts]) / s**s)
                draws.append({reps: combo})
            return draws, np.asarray(weights), True
    rng = np.random.default_rng(seed)
    draws = [{g: tuple(int(x) for x in rng.choice(g, size=len(g), replace=True)) for g in groups}
             for _ in range(n_boot)]
    return draws, np.full(n_boot, 1.0 / n_boot), False


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(x)
    x, w = x[order], w[order]
    cw = np.cumsum(w) / w.sum()
    return float(x[min(np.searchsorted(cw, q - 1e-12), len(x) - 1)])


def summarise(point: dict, boot: list[dict], weights: np.ndarray) -> dict:
    """Each compared quantity: its value on all seeds, bootstrap SE and 95% percentile interval."""
    out = {}
    for key, value in point.items():
        xs = np.array([float(b.get(key, np.nan)) for b in boot], dtype=float)
        ok = np.isfinite(xs)
        entry = {"value": float(value) if value is not None else math.nan}
        if ok.any():
            w = weights[ok] / weights[ok].sum()
            mean = float(np.sum(w * xs[ok]))
            entry.update(se=float(np.sqrt(np.sum(w * (xs[ok] - mean) ** 2))),
                         low=_weighted_quantile(xs[ok], w, 0.025), high=_weighted_quantile(xs[ok], w, 0.975))
        else:
            entry.update(se=math.nan, low=math.nan, high=math.nan)
        if not ok.all():
            entry["share_defined"] = float(weights[ok].sum())
        out[key] = entry
    return out


def decide(finding, results, n_boot: int = N_BOOT, memo: dict | None = None) -> dict:
    """The finding's check on all seeds, then on every bootstrap resample: verdict and intervals."""
    holds, evidence = finding.check(results)
    groups = sorted({replicate_set(results, name) for name in finding.sweeps})
    draws, weights, exact = resamples(groups, n_boot, seed=finding.id)
    memo = {} if memo is None else memo
    outcomes, boot = [], []
    for draw in draws:
        h, ev = finding.check(SeedResample(results, draw, memo))
        outcomes.append(bool(h))
        boot.append(ev.get("compared", {}))
    p_holds = float(np.sum(weights * np.asarray(outcomes, dtype=float)))
    return {"verdict": verdict_of(p_holds), "holds_on_all_seeds": bool(holds), "p_holds": p_holds,
            "resamples": len(draws), "exact": exact,
            "replicates": {",".join(map(str, g)): len(g) for g in groups},
            "compared": summarise(evidence.get("compared", {}), boot, weights), "evidence": evidence}
