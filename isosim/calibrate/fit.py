"""Fitting the knobs to the pilots, and the ensemble of knob sets that fit within their noise.

With ``u`` the knobs' optimiser coordinates (:mod:`isosim.calibrate.knobs`), ``y`` the N
compared pilot points (the validation evaluations, then the bins of the training reward when
the pilots logged it), ``w_j`` one over each point's noise (the pilots' validation noise sd; a
bin's standard error) and ``s(u)`` the surrogate's values there
(:class:`isosim.calibrate.surrogate.Surrogate`), the residuals are ``r(u) = (s(u) - y) w``, in
units of their own noise, and

    SSR(u) = sum_j r_j(u)^2,        fit_rmse = noise_sd sqrt(mean over the validation points of r_j(u*)^2).

**Fit.** ``scipy.optimize.least_squares`` (trust-region reflective, box bounds [0, 1] on every
coordinate, forward-difference Jacobian with step :data:`STEP`, its columns evaluated in
parallel) from the best of a small space-filling start: the base config's own knob values and a
scrambled Sobol design of :data:`STARTS` points (``scipy.stats.qmc.Sobol``, seed 0). The Sobol
design keeps a poor default from trapping the local solver; the local solver uses the
least-squares structure (Gauss-Newton steps in a trust region) and converges in a handful of
iterations, where a black-box global method would need hundreds of evaluations.

**Ensemble.** The knob sets the pilots cannot tell from the best fit, by the likelihood-ratio
test of a Gaussian error model. The error scale is the points' own noise (1 in these units), or
the best fit's residual scale when that is larger (the model then misfits by more than the
noise, and the misfit, not the noise, is what the data resolve):
``sigma^2 = max(1, SSR(u*) / (N - k))``. Residuals of neighbouring evaluations are
correlated (a run that is ahead stays ahead), so the N points carry the information of
``N_eff = N (1 - rho) / (1 + rho)`` independent ones, rho the lag-1 autocorrelation of the
best fit's residuals within runs (clipped to [0, 0.9]). A knob set u is kept when

    SSR(u) - SSR(u*) <= T = sigma^2 chi2_k(0.95) N / N_eff,

k the number of knobs: the 95% likelihood-ratio region. Candidates are every point the fit
evaluated plus probes at the ends of the axes of the region's quadratic approximation,
``du' J'J du = T`` with J the Jacobian at u* (an end outside the unit cube is clipped to it;
one whose exact SSR is above the threshold is pulled halfway towards u* once), and k points
in random directions on the same boundary (the same pull); when a probe fits better than u*,
it becomes the best fit and the threshold is recomputed around it. The ensemble
is u* followed by accepted candidates chosen farthest-point first (the largest distance in u
to those already chosen), at most ``max_members`` in all.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats
from scipy.stats import qmc

from . import knobs as K
from .surrogate import Surrogate

#: Sobol points of the start design (a power of two)
STARTS = 4
#: forward-difference step in optimiser coordinates
STEP = 0.02
#: least_squares tolerance on the step, in optimiser coordinates
XTOL = 5e-3
#: function evaluations the local fit may use (each Jacobian costs k more)
MAX_NFEV = 8
#: ensemble members kept, the best fit included
MAX_MEMBERS = 8


@dataclass(frozen=True)
class FitResult:
    """The best fit, the ensemble and the numbers behind its threshold."""

    best: tuple[float, ...]
    ssr: float
    members: tuple[tuple[float, ...], ...]
    n_points: int
    sigma: float
    rho: float
    threshold: float
    evaluations: int
    #: the residuals (in units of each point's noise) of the best fit, of the start and of each member
    residuals: np.ndarray
    start_residuals: np.ndarray
    member_residuals: tuple[np.ndarray, ...]


class _Evaluator:
    """SSR and residuals of knob coordinates, remembered, optionally in worker processes."""

    def __init__(self, surrogate: Surrogate, workers: int):
        self.surrogate = surrogate
        self.seen: dict[tuple[float, ...], np.ndarray] = {}
        self.pool = None
        self.workers = max(1, int(workers))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.pool is not None:
            self.pool.shutdown()

    def _ensure_pool(self):
        if self.pool is None and self.workers > 1:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            self.pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker,
                                            initargs=(self.surrogate,))
        return self.pool

    def residuals(self, u) -> np.ndarray:
        key = _key(u)
        if key not in self.seen:
            self.seen[key] = _residuals(self.surrogate, key)
        return self.seen[key]

    def many(self, points) -> list[np.ndarray]:
        """Residuals of several points, in parallel when there are workers."""
        keys = [_key(u) for u in points]
        todo = list(dict.fromkeys(k for k in keys if k not in self.seen))
        if len(todo) > 1 and self._ensure_pool() is not None:
            for k, r in zip(todo, self.pool.map(_residuals_in_worker, todo)):
                self.seen[k] = r
        else:
            for k in todo:
                self.seen[k] = _residuals(self.surrogate, k)
        return [self.seen[k] for k in keys]

    def jacobian(self, u) -> np.ndarray:
        """Forward differences with step :data:`STEP` (backward at the upper bound), the k
        columns evaluated together (in parallel when there are workers)."""
        u = np.asarray(u, float)
        steps = [STEP if x + STEP <= 1.0 else -STEP for x in u]
        points = [u + h * e for h, e in zip(steps, np.eye(u.size))]
        r0 = self.residuals(u)
        return np.column_stack([(r - r0) / h for r, h in zip(self.many(points), steps)])

    def ssr(self, u) -> float:
        r = self.residuals(u)
        return float(r @ r)


_WORKER: dict = {}


def _init_worker(surrogate: Surrogate) -> None:
    _WORKER["surrogate"] = surrogate


def _residuals_in_worker(key) -> np.ndarray:
    return _residuals(_WORKER["surrogate"], key)


def _residuals(surrogate: Surrogate, key) -> np.ndarray:
    return (surrogate.values(K.from_units(surrogate.knobs, key)) - surrogate.y) * surrogate.weights


def _key(u) -> tuple[float, ...]:
    return tuple(float(np.clip(round(float(x), 12), 0.0, 1.0)) for x in u)


def default_workers() -> int:
    """Worker processes: two where the machine has two or more cores, else one."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def fit(surrogate: Surrogate, start: dict[str, float], max_members: int = MAX_MEMBERS,
        workers: int | None = None) -> FitResult:
    """Fit the knobs of ``surrogate`` to its pilots from ``start`` (knob values) and a Sobol
    design, then collect the ensemble (see the module docstring)."""
    knobs = surrogate.knobs
    k = len(knobs)
    with _Evaluator(surrogate, default_workers() if workers is None else workers) as ev:
        start_key = _key(K.to_units(knobs, start))
        ev.residuals(start_key)  # also compiles the kernels once before any fork
        design = [K.to_units(knobs, start), *qmc.Sobol(k, scramble=True, seed=0).random(STARTS)]
        ssrs = [float(r @ r) for r in ev.many(design)]
        x0 = np.asarray(design[int(np.argmin(ssrs))], float)
        optimize.least_squares(ev.residuals, x0, jac=ev.jacobian, bounds=(0.0, 1.0), xtol=XTOL, ftol=1e-6,
                               max_nfev=MAX_NFEV)
        best_key = min(ev.seen, key=ev.ssr)
        best = np.asarray(best_key)
        region = _region(ev, best, k, surrogate)
        probes = _probes(best, ev.jacobian(best), region[2], random=k)
        far = [u for u, rr in zip(probes, ev.many(probes)) if float(rr @ rr) - region[0] > region[2]]
        ev.many([best + 0.5 * (np.asarray(u) - best) for u in far])
        if min(ev.seen, key=ev.ssr) != best_key:  # a probe fits better: it is the best fit
            best_key = min(ev.seen, key=ev.ssr)
            region = _region(ev, np.asarray(best_key), k, surrogate)
        ssr, sigma2, threshold, rho = region
        keys = [q for q in ev.seen if ev.ssr(q) - ssr <= threshold]
        members = _farthest_first(best_key, keys, max_members)
        n = surrogate.y.size
        return FitResult(tuple(best_key), ssr, tuple(members), n, math.sqrt(sigma2), rho, threshold, len(ev.seen),
                         ev.residuals(best_key), ev.residuals(start_key), tuple(ev.residuals(q) for q in members))


def _region(ev: _Evaluator, best: np.ndarray, k: int, surrogate: Surrogate) -> tuple[float, float, float, float]:
    """``(SSR(u*), sigma^2, T, rho)`` of the likelihood-ratio region around ``best``."""
    r = ev.residuals(best)
    ssr, n = float(r @ r), r.size
    sigma2 = max(1.0, ssr / max(n - k, 1))  # residuals are in units of their noise
    rho = _lag1(r, surrogate.runs)
    n_eff = n * (1 - rho) / (1 + rho)
    return ssr, sigma2, sigma2 * float(stats.chi2.ppf(0.95, k)) * n / n_eff, rho


def _lag1(r: np.ndarray, runs: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals within runs (rows sorted by run and compute), in [0, 0.9]."""
    same = runs[1:] == runs[:-1]
    den = float(r @ r)
    if den <= 0 or not same.any():
        return 0.0
    return float(np.clip(np.sum(r[1:][same] * r[:-1][same]) / den, 0.0, 0.9))


def _probes(best: np.ndarray, jac: np.ndarray, threshold: float, random: int, seed: int = 0) -> list[np.ndarray]:
    """Points on the boundary ``du' J'J du = T`` of the region's quadratic approximation: the
    two ends of each principal axis (``best +- sqrt(T / lambda_i) v_i``) and ``random``
    directions drawn uniformly on it (``du = sqrt(T) L^-T z / |z|``, ``J'J = L L'``, z
    standard normal; seeded). A point past the unit cube is pulled back along its ray to
    the cube's face (a direction the data barely constrain runs to the face)."""
    lam, vec = np.linalg.eigh(jac.T @ jac)
    lam = np.maximum(lam, 1e-12 * max(float(lam.max()), 1e-300))
    dirs = [s * math.sqrt(threshold / lam[i]) * vec[:, i] for i in range(lam.size) for s in (1.0, -1.0)]
    z = np.random.default_rng(seed).standard_normal((random, lam.size))
    for row in z:
        w = vec @ (vec.T @ row / np.sqrt(lam))  # (J'J)^(-1/2) z
        w /= max(float(np.linalg.norm(row)), 1e-300)
        dirs.append(math.sqrt(threshold) * w)
    out = []
    for d in dirs:
        room = min((((1.0 if x > 0 else 0.0) - b) / x for b, x in zip(best, d) if abs(x) > 1e-15), default=1.0)
        out.append(np.clip(best + min(1.0, room) * d, 0.0, 1.0))
    return out


def _farthest_first(best, keys, limit: int) -> list[tuple[float, ...]]:
    chosen = [tuple(best)]
    rest = [q for q in keys if q != tuple(best)]
    while rest and len(chosen) < limit:
        pts = np.asarray(rest)
        d = np.min(np.linalg.norm(pts[:, None, :] - np.asarray(chosen)[None, :, :], axis=2), axis=1)
        chosen.append(rest.pop(int(np.argmax(d))))
    return chosen
