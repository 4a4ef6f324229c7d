"""The n*(C) scaling law, bootstrap confidence intervals and the ``isosim fit`` pipeline
(:func:`analyse_runs`: runs -> frontier -> per-n curves -> n*(C) -> law). Reading and checking
the run files is :mod:`isosim.analysis.runs`; the n*(C) arg-max is :mod:`isosim.analysis.n_star`.

    log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b,   L >= 0

fitted by robust least squares (``scipy.optimize.least_squares``) from several starts.
With L >= 0 the curve runs from b to its upper plateau L + b (the saturation); k < 0 is
allowed and means a decreasing curve. The study's Q2 form is the same curve in M
(linear): L / (1 + exp(-k (M - M0))) + b.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IsosimInputError
from ._logistic import fit_logistic, logistic
from .frontier import ScaleRLFit, fit_groups, frontier, group_ranges, initial_values, log_grid, record_breaking
from .n_star import n_star_envelope
from .runs import require_two_n, validate_runs

CI = Mapping[str, tuple[float, float]]


class _Sigmoid:
    """Shared methods of the fitted laws ``L / (1 + exp(-k (x - x0))) + b`` (fields in PARAMS order)."""

    PARAMS: ClassVar[tuple[str, ...]]

    @property
    def saturation(self) -> float:
        """The upper plateau L + b."""
        return self.L + self.b

    def params(self) -> dict[str, float]:
        return {p: getattr(self, p) for p in self.PARAMS}

    def predict(self, x) -> np.ndarray:
        return logistic(np.asarray(x, dtype=float), *(getattr(self, p) for p in self.PARAMS))


@dataclass(frozen=True)
class ScalingLawFit(_Sigmoid):
    """log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b, with R^2 and optional CIs."""

    PARAMS: ClassVar[tuple[str, ...]] = ("L", "k", "log10_C0", "b")
    L: float
    k: float
    log10_C0: float
    b: float
    r2: float
    ci: CI = field(default_factory=dict)
    n_points: int = 0


@dataclass(frozen=True)
class MLawFit(_Sigmoid):
    """y(M) = L / (1 + exp(-k (M - M0))) + b, M linear (the study's Q2 form for log2 n*, log2 B_problem*)."""

    PARAMS: ClassVar[tuple[str, ...]] = ("L", "k", "M0", "b")
    L: float
    k: float
    M0: float
    b: float
    r2: float
    ci: CI = field(default_factory=dict)
    n_points: int = 0


def fit_scaling_law(
    log10_C,
    log2_n,
    starts: Iterable[Sequence[float]] | None = None,
    loss: str = "soft_l1",
    f_scale: float | None = None,
) -> ScalingLawFit:
    """Fit log2 n = L / (1 + exp(-k (log10 C - log10 C0))) + b by robust least squares.

    ``starts``: (L, k, log10_C0, b) tuples; default a grid of 18 (3 centres x 3 slopes x 2
    signs). ``loss``: a scipy robust loss; ``f_scale`` its scale in log2 n units (default:
    MAD of the least-squares residuals). Raises :class:`IsosimInputError` for fewer than
    4 distinct C, constant n, NaN or a fit that does not converge.
    """
    fit = fit_logistic(
        log10_C, log2_n, loss=loss, f_scale=f_scale, x_name="log10 C", y_name="log2 n*",
        starts=None if starts is None else [(L, k, x0, b) for L, k, x0, b in starts],
    )
    return ScalingLawFit(fit.a, fit.s, fit.m, fit.c, fit.r2, n_points=fit.n_points)


def fit_m_law(
    M,
    log2_y,
    starts: Iterable[Sequence[float]] | None = None,
    loss: str = "soft_l1",
    f_scale: float | None = None,
) -> MLawFit:
    """Fit y = L / (1 + exp(-k (M - M0))) + b with M linear; as :func:`fit_scaling_law`."""
    fit = fit_logistic(
        M, log2_y, loss=loss, f_scale=f_scale, x_name="M", y_name="log2 y",
        starts=None if starts is None else [(L, k, x0, b) for L, k, x0, b in starts],
    )
    return MLawFit(fit.a, fit.s, fit.m, fit.c, fit.r2, n_points=fit.n_points)


@dataclass(frozen=True)
class Bootstrap:
    """Percentile CIs of each parameter over ``n_ok`` successful of ``n_boot`` resamples."""

    ci: CI
    n_ok: int
    n_boot: int
    mode: str
    level: float


def bootstrap_mode(data: pd.DataFrame, unit: str | None = "run", strata: Sequence[str] = ("n",)) -> str:
    """"runs" when every stratum has at least 2 units (runs/seeds), else "points"."""
    strata = [s for s in strata if s in data.columns]
    if unit is None or unit not in data.columns:
        return "points"
    counts = data.groupby(strata)[unit].nunique() if strata else pd.Series([data[unit].nunique()])
    return "runs" if len(counts) and counts.min() >= 2 else "points"


def _cells(data: pd.DataFrame, unit: str | None, strata: list[str], mode: str) -> list[list[np.ndarray]]:
    """Row positions to resample: per stratum, one array per unit ("runs") or per row ("points")."""
    by = strata if mode == "runs" else [*strata, unit] if unit in data.columns else strata
    blocks = list(data.groupby(by, sort=True).indices.values()) if by else [np.arange(len(data))]
    if mode == "points":
        return [[np.array([i]) for i in rows] for rows in blocks]
    units = data[unit].to_numpy()
    return [[rows[units[rows] == u] for u in pd.unique(units[rows])] for rows in blocks]


def _resample(data, unit, mode, cells, rng) -> pd.DataFrame:
    picks = [block[i] for block in cells for i in rng.integers(0, len(block), size=len(block))]
    out = data.iloc[np.concatenate(picks)].reset_index(drop=True)
    if mode == "runs":
        out[unit] = np.repeat(np.arange(len(picks)), [len(p) for p in picks])
    return out


def bootstrap_fit(
    data: pd.DataFrame,
    refit: Callable[[pd.DataFrame], Mapping[str, float]],
    *,
    unit: str | None = "run",
    strata: Sequence[str] = ("n",),
    mode: str = "auto",
    n_boot: int = 200,
    seed: int = 0,
    level: float = 0.95,
    discrete: bool = False,
) -> Bootstrap:
    """Percentile bootstrap: refit on ``n_boot`` resamples, CI = quantiles (1 -+ level) / 2.

    ``discrete``: the parameters take values on a lattice (log2 n*, say), so each end of an
    interval is a value some resample gave (the lower end rounded down, the upper one up)
    instead of an interpolation between two of them.

    "runs" mode resamples whole units (runs/seeds) with replacement within each stratum
    (each n), relabelling repeats as distinct runs; "points" mode resamples rows within
    each unit. "auto" is :func:`bootstrap_mode`. Resamples whose refit raises
    :class:`IsosimInputError` are skipped; with fewer than 2 successes the CIs are NaN.
    """
    if not 0 < level < 1:
        raise IsosimInputError(f"confidence level must be in (0, 1), got {level}")
    if n_boot < 0:
        raise IsosimInputError(f"n_boot must be >= 0, got {n_boot}")
    strata = [s for s in strata if s in data.columns]
    mode = bootstrap_mode(data, unit, strata) if mode == "auto" else mode
    if mode not in ("runs", "points"):
        raise IsosimInputError(f"unknown bootstrap mode {mode!r}")
    rng = np.random.default_rng(seed)
    cells = _cells(data, unit, strata, mode)
    draws: list[Mapping[str, float]] = []
    for _ in range(n_boot):
        try:
            draws.append(refit(_resample(data, unit, mode, cells, rng)))
        except IsosimInputError:
            continue
    names = list(draws[0]) if draws else []
    alpha = (1.0 - level) / 2.0
    ci = {}
    for name in names:
        vals = np.array([d[name] for d in draws], dtype=float)
        vals = vals[np.isfinite(vals)]
        if len(vals) >= 2 and discrete:
            lo, hi = np.quantile(vals, alpha, method="lower"), np.quantile(vals, 1.0 - alpha, method="higher")
            ci[name] = (float(lo), float(hi))
        elif len(vals) >= 2:
            lo, hi = np.quantile(vals, [alpha, 1.0 - alpha])
            ci[name] = (float(lo), float(hi))
        else:
            ci[name] = (math.nan, math.nan)
    return Bootstrap(ci, len(draws), n_boot, mode, level)


@dataclass(frozen=True, eq=False)
class RunsAnalysis:
    """Every stage of :func:`analyse_runs`: records, frontier, per-n curves, n*(C), the law."""

    metric: str
    bucket: float
    runs: pd.DataFrame
    records: pd.DataFrame
    frontier: pd.DataFrame
    curves: Mapping[tuple, ScaleRLFit]
    skipped: tuple
    n_star: pd.DataFrame
    law: ScalingLawFit
    bootstrap: Bootstrap | None
    #: grid points left out of n*(C) because fewer than ``min_groups`` curves reach them:
    #: ``{compute, groups, n}`` dicts, ``n`` the best of those that do (see analyse_runs)
    too_few_groups: tuple = ()
    #: each n's reward before training (its runs' evaluations at compute 0), where measured: the
    #: R0 its curve starts from (an n without one has its R0 fitted)
    measured_start: Mapping[tuple, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        """``{"metric", "sigmoid", "ci", "r2", "warnings", "n_star", "frontier", "n_star_left_out"}``
        (NaN as null); ``warnings``: :func:`law_warnings`, empty for a law to trust; ``n_star_left_out``: ``[{"compute", "n", "groups"}]``, the grid points left out of
        n*(C) because only ``groups`` (fewer than ``min_groups``) curves reach them, ``n`` the best."""
        ci = self.law.ci
        return {
            "metric": self.metric,
            "sigmoid": {p: _num(v) for p, v in self.law.params().items()},
            "ci": {p: [_num(x) for x in ci.get(p, (math.nan, math.nan))] for p in ScalingLawFit.PARAMS},
            "r2": _num(self.law.r2),
            "warnings": law_warnings(self),
            "n_star": [
                {"compute": float(c), "n": int(n)}
                for c, n in zip(self.n_star["compute"], self.n_star["n"])
            ],
            "frontier": [
                {"compute": float(r.compute), "value": float(r.value), "n": int(r.n), "B_problem": int(r.B_problem)}
                for r in self.frontier.itertuples(index=False)
            ],
            "n_star_left_out": [
                {"compute": float(p["compute"]), "n": int(p["n"]), "groups": int(p["groups"])}
                for p in self.too_few_groups
            ],
        }


#: below this R^2 the fitted law explains too little of n*(C) to be read on its own
R2_MIN = 0.8


def law_bounds(n_star: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """The bounds the law's fit imposes (:mod:`isosim.analysis._logistic`), in data units for
    these n*(C) points: L and b in log2 n, k per decade, log10_C0 in log10 C."""
    x, y = np.log10(n_star["compute"].to_numpy(float)), np.log2(n_star["n"].to_numpy(float))
    x0, xs, y0, ys = x.min(), np.ptp(x), y.min(), np.ptp(y)
    return {"L": (0.0, 10 * ys), "k": (-100 / xs, 100 / xs), "log10_C0": (x0 - xs, x0 + 2 * xs),
            "b": (y0 - 10 * ys, y0 + ys)}


def law_warnings(result: "RunsAnalysis") -> list[str]:
    """Why the fitted law of ``result`` does not deserve trust, one sentence each (empty when
    none): a low R^2, a parameter or an interval's end at the fit's bound, a saturation beyond
    the largest n measured (n* is then not determined beyond the largest compute)."""
    law, out = result.law, []
    if not law.r2 >= R2_MIN:
        out.append(f"R^2 {law.r2:.3f} is below {R2_MIN}: the law explains little of how n*(C) moves; "
                   "read the n*(C) table rather than the law")
    bounds = law_bounds(result.n_star)
    for name, value in law.params().items():
        lo, hi = bounds[name]
        tol = 1e-3 * (hi - lo)
        ends = [value, *law.ci.get(name, ())]
        hit = [b for b in (lo, hi) if any(math.isfinite(e) and abs(e - b) <= tol for e in ends)]
        if name == "L" and hit == [0.0]:
            continue  # L = 0 is a flat law, a value the data can hold, not a limit of the fit
        if hit:
            what = "its value" if any(abs(value - b) <= tol for b in hit) else "its interval"
            out.append(f"{name}: {what} reaches the fit's bound {hit[0]:.3g}: the data do not determine {name}")
    n_max = int(result.runs["n"].max())
    if law.saturation > math.log2(n_max) + 1:
        c_max = float(result.n_star["compute"].max())
        out.append(f"the law saturates at log2 n* = {law.saturation:.2f}, beyond the largest n measured ({n_max}): "
                   f"n* is not determined beyond C = {c_max:.3g}")
    return out


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _n_star_law(records, ranges, grid, slack, curve_starts=None, law_starts=None, min_groups=2, r0=None):
    curves = fit_groups(records, ("n",), ranges=ranges, starts=curve_starts, r0=r0)
    n_star = n_star_envelope(curves, grid, ("n",), slack, min_groups=min_groups)
    if n_star.empty:
        raise IsosimInputError(f"no compute point is reached by the fitted curves of {min_groups} or more values of n"
                               if min_groups > 1 else "no fitted curve covers the compute grid")
    if n_star["n"].nunique() < 2:
        raise IsosimInputError(
            f"n*(C) is n={n_star['n'].iloc[0]} at every compute: the compute-optimal n never "
            "changes, so there is no scaling law to fit"
        )
    law = fit_scaling_law(np.log10(n_star["compute"]), np.log2(n_star["n"]), starts=law_starts)
    return curves, n_star, law


def analyse_runs(
    df: pd.DataFrame,
    metric: str = "avg@4",
    bucket: float | None = 0.005,
    n_boot: int = 200,
    seed: int = 0,
    *,
    points_per_decade: int = 10,
    level: float = 0.95,
    curve_starts: Mapping[tuple, ScaleRLFit] | None = None,
    law_starts: Sequence[Sequence[float]] | None = None,
    min_groups: int = 2,
) -> RunsAnalysis:
    """Record-breaking points -> per-n ScaleRL curves -> envelope -> n*(C) -> scaling law.

    n*(C) is taken on a log grid (``points_per_decade``) over the union of the runs'
    compute ranges, each n's curve eligible within its range (to half a grid step, as in
    :func:`~isosim.analysis.frontier.compute_optimal`); the law is fitted on (log10 C, log2 n*).
    CIs: :func:`bootstrap_fit` over runs within each n (points when some n has a single
    run), refitting the whole pipeline warm-started from the full-data fit. Evaluations at
    compute 0 are not points of the curves: where an n has them, their mean is the R0 its
    curve starts from (every n starts from the same policy, so no n's curve can begin above
    it). ``curve_starts`` (per-n curves) and ``law_starts`` (law parameters
    L, k, log10_C0, b) start the fits instead of the default grids: a refit of similar data,
    such as the same runs resampled, started from the all-data fit.

    ``min_groups`` (default 2): n*(C) is taken only at grid points that the curves of at least
    that many values of n reach. At the edges of the compute range one n's runs may reach
    further than the others' (evaluated earlier, or run longer); there that n would be n*
    unopposed, an artefact of coverage rather than a comparison (one run of n = 1024 whose
    first evaluation comes before the others' would make n* = 1024 at the smallest budgets).
    Those points are left out of n*(C) and of the law, and listed in ``too_few_groups``
    (:mod:`isosim.analysis.n_star`, edge rule). ``min_groups=1`` keeps them.
    """
    runs = validate_runs(df, metric)
    data = runs.assign(value=runs[metric])[["run", "n", "B_problem", "compute", "value"]]
    r0 = initial_values(data, ("n",))
    data = data[data["compute"] > 0].reset_index(drop=True)
    require_two_n(data, " with compute > 0")
    records = record_breaking(data, bucket=bucket)
    ranges = group_ranges(data, ("n",))
    lo, hi = min(r[0] for r in ranges.values()), max(r[1] for r in ranges.values())
    grid = log_grid(lo, hi, points_per_decade)
    slack = 0.5 / points_per_decade
    curves, n_star, law = _n_star_law(records, ranges, grid, slack, curve_starts, law_starts, min_groups, r0)
    warm_law = [tuple(law.params().values())]

    def law_params(recs, rngs):
        return _n_star_law(recs, rngs, grid, slack, curves, warm_law, min_groups, r0)[2].params()

    boot = None
    if n_boot > 0:
        kw = dict(n_boot=n_boot, seed=seed, level=level)
        if bootstrap_mode(data, "run", ("n",)) == "runs":
            boot = bootstrap_fit(
                data, lambda d: law_params(record_breaking(d, bucket=bucket), group_ranges(d)),
                mode="runs", **kw,
            )
        else:
            boot = bootstrap_fit(records, lambda d: law_params(d, ranges), mode="points", **kw)
        law = replace(law, ci=boot.ci)
    return RunsAnalysis(
        metric=metric,
        bucket=bucket or 0.0,
        runs=runs,
        records=records,
        frontier=frontier(data),
        curves=curves,
        skipped=tuple(k for k in sorted(ranges) if k not in curves),
        n_star=n_star,
        law=law,
        bootstrap=boot,
        too_few_groups=n_star.attrs.get("too_few_groups", ()),
        measured_start=r0,
    )


def fit_runs(
    df: pd.DataFrame,
    metric: str = "avg@4",
    bucket: float | None = 0.005,
    n_boot: int = 200,
    seed: int = 0,
    **kwargs,
) -> dict:
    """:func:`analyse_runs` as the ``isosim fit --json`` dictionary."""
    return analyse_runs(df, metric, bucket, n_boot, seed, **kwargs).to_json()
