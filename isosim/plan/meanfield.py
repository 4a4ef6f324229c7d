"""Mean-field dynamics: the expected evolution of a surrogate population under GRPO.

One GRPO step draws B_problem of the D training problems, samples a group of n rollouts
per problem and ascends the batch mean of the per-group logit gradient
``g = (1/n) sum_s c_s A_s (e_s - pi)`` (see :mod:`isosim.sim.kernels`). Every advantage here
(grpo, drgrpo, rloo) depends on a rollout only through its reward and the group's count
of correct rollouts c, and sums to zero over the group, so ``g_s = c_s A(Y_s, c) / n``.
Given c, the counts of the correct types are Multinomial(c, pi_s / p) and those of the
wrong types Multinomial(n - c, pi_s / (1 - p)). With ``c' ~ Bin(n-1, p)``,
``c'' ~ Bin(n-2, p)``, ``A+ = A(1, .)``, ``A- = A(0, .)``:

    E[g_s]   = pi_s E[A+(c'+1)]                                         (Y_s = 1)
             = pi_s E[A-(c')]                                           (Y_s = 0)
    E[g_s^2] = pi_s E[A+(c'+1)^2] / n + pi_s^2 (n-1)/n E[A+(c''+2)^2]   (Y_s = 1)
             = pi_s E[A-(c')^2]   / n + pi_s^2 (n-1)/n E[A-(c'')^2]     (Y_s = 0)

that is ``E[g_s] = pi_s (Y_s / p - (1 - Y_s) / (1 - p)) h(n, p)`` with
``h = E[c (n - c) / n^2 / (sigma(c) + eps)]`` (grpo), ``(n-1) p (1-p) / n`` (drgrpo),
``p (1 - p)`` (rloo). The expectations are tabulated per n on a logit grid of p.

The recursion follows the expected parameters. Each step every training problem
contributes its expected gradient with weight 1/D (a batch slot is a uniform draw); the
result is chained to beta and V and given to the optimiser. Sampling noise enters Adam
through its second moment: per coordinate ``v`` relaxes to ``E[G]^2 + Var[G]``, with
``Var[G] = (mean_i E[g_i^2] - (mean_i E[g_i])^2) / B_problem`` the variance of the
batch-mean gradient (between problems and within groups; exact for draws with
replacement), so a noisy coordinate moves by ``lr E[G] / sqrt(E[G]^2 + Var[G])`` per
step. Steps are integrated K at a time (K grows geometrically with the steps done and is
capped by the policy change of one macro step); each coordinate's step is damped by
``1 + K lr r`` with ``r`` its restoring rate, a diagonally implicit Euler step that keeps
stiff coordinates from overshooting. With the zero-variance filter the policy gradient of a
step is averaged over its informative groups and a step without one is skipped, while the
KL / entropy term stays averaged over the whole batch (:meth:`_Integrator.filter_factors`,
:meth:`_Integrator.stats`).

Execution noise (a rollout of a correct type succeeds with probability ``e_i``) makes a
rollout's reward Bernoulli(``y_is = e_i Y_is``); the expected gradient above is linear in the
rewards, so it holds with ``y`` in place of ``Y`` and ``p = sum_s pi_s y_s``. The second moment
is exact (a pair of rollouts of one type is 2, 1 or 0 times correct); the Jacobian, which only
damps the integration, interpolates linearly in ``y`` between the 0/1 cases. With
the memorisation path on, a training problem's execution offset follows its expected gradient
``q_i e_i (1 - e_i) (E[A+(c'+1)] - E[A-(c')])`` (``q_i = p_i / e_i``, the strategy pass rate),
with the single-rollout term ``q_i e_i (1 - e_i) ((1 - e_i) E[A+^2] + e_i E[A-^2]) / n`` added to
its square for the optimiser's second moment.

This module holds the model (:func:`mean_field`, :class:`MeanFieldTrace` and the tables and
integrator behind them); curves over allocations and their n*(C) are :mod:`isosim.plan.predict`,
the comparison with simulated sweeps :mod:`isosim.plan.agreement`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numba import njit

from ..analysis._logistic import expit
from ..errors import IsosimInputError
from ..sim.advantages import group_table
from ..sim.config import SimConfig
from ..sim.kernels import LN2_HI, LN2_LO, LOG2E, ROUNDER, ROUNDER_BITS
from ..sim.models import learn_mask, model_module
from ..sim.population import Population, build_population

#: the logit grid of p on which the signal expectations are tabulated
GRID_LOGIT = np.linspace(-16.0, 16.0, 1025)
#: logits more than this far below a row's top get weight e^-FLOOR (no subnormal numbers)
FLOOR = 30.0


# --- the expected group gradient ---------------------------------------------------------

def advantages(n: int, advantage: str, std_eps: float) -> tuple[np.ndarray, np.ndarray]:
    """``A+(c)`` and ``A-(c)`` for c = 0..n: the advantage of a correct / wrong rollout
    (the registered estimator's table, :mod:`isosim.sim.advantages`)."""
    return group_table(n, advantage, std_eps)


@functools.lru_cache(maxsize=64)
def _log_binom(m: int) -> np.ndarray:
    """``log C(m, k)`` for k = 0..m (read-only; cached: the zero-variance filter asks for it at
    every macro step)."""
    log_fact = np.array([math.lgamma(j + 1.0) for j in range(m + 1)])  # log j!
    out = log_fact[m] - log_fact - log_fact[::-1]
    out.flags.writeable = False
    return out


def _binom_pmf(m: int, p: np.ndarray) -> np.ndarray:
    """Binomial(m, p) pmf at k = 0..m for each p in the column ``p``: (len(p), m + 1)."""
    k = np.arange(m + 1)
    return np.exp(_log_binom(m) + k * np.log(p) + (m - k) * np.log1p(-p))


#: bump when :func:`signal_table` computes something else (the tables cached on disk carry it)
TABLE_VERSION = 1


@functools.lru_cache(maxsize=64)
def signal_table(n: int, advantage: str = "grpo", std_eps: float = 1e-6) -> np.ndarray:
    """(9, G) table on :data:`GRID_LOGIT`: E[A+(c'+1)], E[A-(c')], E[A+(c'+1)^2] / n,
    E[A-(c')^2] / n, (n-1)/n E[A+(c''+2)^2], (n-1)/n E[A-(c'')^2], the derivatives of
    the first two with respect to logit(p), and (n-1)/n E[A+(c''+1) A-(c''+1)] (two rollouts
    of one type, one correct: execution noise).

    A table of n >= 64 (a few hundredths of a second of binomial sums, more for large n) is
    kept on disk under ``$XDG_CACHE_HOME/isosim`` (``~/.cache/isosim``), written once and read
    by later processes; where that folder cannot be written, it is computed each time."""
    if n < 64:
        return _signal_table(n, advantage, std_eps)
    import hashlib
    import os
    from pathlib import Path

    key = hashlib.sha256(repr((TABLE_VERSION, n, advantage, float(std_eps), GRID_LOGIT[0], GRID_LOGIT[-1],
                               GRID_LOGIT.size)).encode()).hexdigest()[:20]
    folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "isosim"
    path = folder / f"signal-{key}.npy"
    try:
        table = np.load(path)
        if table.shape == (9, GRID_LOGIT.size) and np.isfinite(table).all():
            return table
    except Exception:  # missing, or unreadable (cut short, overwritten): compute it again
        pass
    table = _signal_table(n, advantage, std_eps)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{path.name}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            np.save(fh, table)
        os.replace(tmp, path)
    except OSError:
        pass
    return table


def _signal_table(n: int, advantage: str, std_eps: float) -> np.ndarray:
    p = expit(GRID_LOGIT)[:, None]
    ap, am = advantages(n, advantage, std_eps)
    out = np.zeros((9, GRID_LOGIT.size))
    if n < 2:
        return out
    k1 = np.arange(n)
    w1 = _binom_pmf(n - 1, p)
    out[0], out[1] = w1 @ ap[k1 + 1], w1 @ am[k1]
    out[2], out[3] = w1 @ ap[k1 + 1] ** 2 / n, w1 @ am[k1] ** 2 / n
    k2 = np.arange(n - 1)
    w2 = _binom_pmf(n - 2, p)
    out[4], out[5] = (n - 1) / n * (w2 @ ap[k2 + 2] ** 2), (n - 1) / n * (w2 @ am[k2] ** 2)
    out[6], out[7] = np.gradient(out[0], GRID_LOGIT), np.gradient(out[1], GRID_LOGIT)
    out[8] = (n - 1) / n * (w2 @ (ap[k2 + 1] * am[k2 + 1]))
    return out


def signal_h(n: int, p, advantage: str = "grpo", std_eps: float = 1e-6) -> np.ndarray:
    """``h(n, p) = p E[A+(c'+1)]``: the expected per-group signal, ``E[g_s] = pi_s (Y_s/p - (1-Y_s)/(1-p)) h``."""
    p = np.asarray(p, float)
    return p * lookup(signal_table(int(n), advantage, float(std_eps)), p)[0]


def lookup(table: np.ndarray, p) -> np.ndarray:
    """Linear interpolation of ``table`` (rows on :data:`GRID_LOGIT`) at pass rates ``p``."""
    pc = np.clip(np.asarray(p, dtype=float), 1e-12, 1.0 - 1e-12)
    x = np.log(pc) - np.log1p(-pc)
    g0, dg = GRID_LOGIT[0], GRID_LOGIT[1] - GRID_LOGIT[0]
    u = np.clip((x - g0) / dg, 0.0, GRID_LOGIT.size - 1.000001)
    j = u.astype(np.int64)
    f = u - j
    return table[:, j] * (1.0 - f) + table[:, j + 1] * f


def _row_table(n: int, advantage: str, std_eps: float, p: np.ndarray) -> np.ndarray:
    """(11, D): the table at each row's pass rate, then 1/p and -1/(1-p)."""
    out = np.empty((11, p.shape[0]))
    _lookup_rows(signal_table(int(n), advantage, float(std_eps)), GRID_LOGIT[0], GRID_LOGIT[1] - GRID_LOGIT[0],
                 np.ascontiguousarray(p, dtype=float), out)
    return out


@njit(cache=True, nogil=True)
def _lookup_rows(table, g0, dg, p, out):
    G = table.shape[1]
    for i in range(p.shape[0]):
        q = min(max(p[i], 1e-12), 1.0 - 1e-12)
        u = min(max((math.log(q) - math.log1p(-q) - g0) / dg, 0.0), G - 1.000001)
        j = int(u)
        f = u - j
        for row in range(table.shape[0]):
            out[row, i] = table[row, j] * (1.0 - f) + table[row, j + 1] * f
        out[9, i] = 1.0 / q
        out[10, i] = -1.0 / (1.0 - q)


@njit(cache=True, nogil=True)
def _coeffs(t, i, c):
    """Row i's moment coefficients: (wrong-type value, correct minus wrong) for F, the
    single-rollout second moment and dF/dl; the pair second moment ``c4 + y c5 + y^2 c8``.

    A rollout of type s is correct with probability ``y_s`` (0/1 without execution noise), so
    a pair of them is two, one or no correct rollouts with probabilities ``y^2``, ``2y(1-y)``,
    ``(1-y)^2``: ``(1-y)^2 E[A-^2] + 2y(1-y) E[A+ A-] + y^2 E[A+^2]``."""
    c[0], c[2], c[4], c[6] = t[1, i], t[3, i], t[5, i], t[7, i] * t[10, i]
    c[1], c[3], c[7] = t[0, i] - c[0], t[2, i] - c[2], t[6, i] * t[9, i] - c[6]
    c[5] = 2.0 * (t[8, i] - t[5, i])
    c[8] = t[4, i] + t[5, i] - 2.0 * t[8, i]


@njit(cache=True, nogil=True)
def _moments(pi, Y, t, mean, sq, jac):
    """Fill E[g], E[g^2] and dE[g_s]/dl_s per (row, type) from the row tables ``t``."""
    D, S = pi.shape
    c = np.empty(9)
    for i in range(D):
        _coeffs(t, i, c)
        for s in range(S):
            q, y = pi[i, s], Y[i, s]
            m = q * (c[0] + y * c[1])
            mean[i, s] = m
            sq[i, s] = q * (c[2] + y * c[3] + q * (c[4] + y * (c[5] + y * c[8])))
            jac[i, s] = m * (1.0 - q) + q * q * (c[6] + y * c[7])


@dataclass(frozen=True)
class GroupMoments:
    """Per (problem, type): ``mean = E[g_s]``, ``sq = E[g_s^2]``, ``jac = dE[g_s]/dl_s``."""

    mean: np.ndarray
    sq: np.ndarray
    jac: np.ndarray


def group_moments(pi: np.ndarray, y: np.ndarray, n: int, advantage: str = "grpo",
                  std_eps: float = 1e-6) -> GroupMoments:
    """Moments of one group's logit gradient for each row of ``pi`` (rewards ``y``).

    With ``E[g_s] = pi_s F_s(p)``, ``dpi_s/dl_s = pi_s (1 - pi_s)`` and
    ``dp/dl_s = pi_s (Y_s - p)``: ``jac_s = pi_s (1 - pi_s) F_s + pi_s^2 (Y_s - p) F_s'(p)``.
    """
    pi2 = np.atleast_2d(np.asarray(pi, float))
    y2 = np.broadcast_to(np.asarray(y, float), pi2.shape)
    t = _row_table(n, advantage, std_eps, (pi2 * y2).sum(axis=1))
    out = [np.empty_like(pi2) for _ in range(3)]
    _moments(pi2, np.ascontiguousarray(y2), t, *out)
    return GroupMoments(*(o.reshape(np.shape(pi)) for o in out))


#: 1 / j! for j = 0 ... 13, the Taylor coefficients of exp(r) that :func:`_exp_floored` sums
_INV_FACT = tuple(1.0 / math.factorial(j) for j in range(14))


@njit(cache=True, nogil=True, fastmath={"contract"}, error_model="numpy")
def _exp_floored(x, out, k1):
    """``out = exp(x)`` for ``-FLOOR <= x <= 0`` (a row's logits after :func:`_policy_rows`
    shifts and floors them), in loops the compiler vectorises. ``x = k ln 2 + r`` with
    ``k = round(x / ln 2)`` (``ln 2`` in two parts) and ``|r| <= ln 2 / 2``, ``exp(r)`` by its
    Taylor polynomial to degree 13 (truncation below 1e-17) evaluated by Estrin's scheme (a
    short dependency chain: about 1.6 times faster than Horner's rule here), and ``2^k`` built
    from exponent bits (a normal number for every ``k >= -44``; ``k`` rounded with
    :data:`~isosim.sim.kernels.ROUNDER`, so no loop needs a float-to-integer conversion).
    Within 2 ulp of ``numpy.exp`` (tested). ``k1``: int64 scratch of ``x``'s length."""
    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13 = _INV_FACT
    f1 = k1.view(np.float64)
    for j in range(x.shape[0]):
        xj = x[j]
        w = xj * LOG2E - 0.5
        kn = (w + ROUNDER) - ROUNDER
        k = kn + 1.0 if kn < w else kn  # ceil(w): the nearest integer to x / ln 2
        r = (xj - k * LN2_HI) - k * LN2_LO
        r2 = r * r
        r4 = r2 * r2
        lo = (c0 + c1 * r) + r2 * (c2 + c3 * r) + r4 * ((c4 + c5 * r) + r2 * (c6 + c7 * r))
        hi = (c8 + c9 * r) + r2 * (c10 + c11 * r) + r4 * (c12 + c13 * r)
        f1[j] = k + ROUNDER
        out[j] = lo + (r4 * r4) * hi
    for j in range(x.shape[0]):
        k1[j] = (k1[j] - ROUNDER_BITS + 1023) << 52
    for j in range(x.shape[0]):
        out[j] = out[j] * f1[j]


# --- policy and reductions without BLAS (its threads stall on a busy machine; r is small) ---

@njit(cache=True, nogil=True, fastmath=True)
def _policy_rows(L0, bias, Z, V, U, us, Y, rate, want_pi, pi, p, x, k1):
    """Row by row: the logits ``l_i = L0_i + bias + Z_i V + us U_i`` (U may have no rows) minus
    the row's maximum, floored at -FLOOR (no subnormal numbers after exp, which would slow every
    product); ``pi_i = softmax(l_i)`` (written to ``pi`` only with ``want_pi``); and
    ``p_i = rate_i pi_i . Y_i`` (``rate``: the rows' execution rates, or no entries for 1).
    ``x``, ``k1``: scratch of one row's length (float, int64)."""
    D, S = L0.shape
    use_u = U.shape[0] == D
    use_rate = rate.shape[0] == D
    e = np.empty(S)
    for i in range(D):
        for s in range(S):
            x[s] = L0[i, s] + bias[s]
        for k in range(Z.shape[1]):
            z = Z[i, k]
            for s in range(S):
                x[s] += z * V[k, s]
        if use_u:
            for s in range(S):
                x[s] += us * U[i, s]
        mx = x[0]
        for s in range(1, S):
            mx = max(mx, x[s])
        for s in range(S):
            x[s] = max(x[s] - mx, -FLOOR)
        row = pi[i] if want_pi else e
        _exp_floored(x, row, k1)
        tot = 0.0
        for s in range(S):
            tot += row[s]
        inv = 1.0 / tot
        acc = 0.0
        for s in range(S):
            row[s] *= inv
            acc += row[s] * Y[i, s]
        p[i] = acc * rate[i] if use_rate else acc


#: rows a reduction adds per pass over its (3, r, S) sums: each sum is read and written once per
#: block instead of once per row (the sums outgrow the first-level cache); each element still adds
#: its rows one at a time in row order, so the result is the row-by-row loop's to the bit
#: (:func:`_add_block` writes out the four terms)
ROW_BLOCK = 4


@njit(cache=True, nogil=True, inline="always")
def _add_block(o, w, m0, m1, m2, m3):
    """``o += w_0 m0 + w_1 m1 + w_2 m2 + w_3 m3``, added term by term in that order."""
    w0, w1, w2, w3 = w[0], w[1], w[2], w[3]
    for s in range(o.shape[0]):
        o[s] = (((o[s] + w0 * m0[s]) + w1 * m1[s]) + w2 * m2[s]) + w3 * m3[s]


@njit(cache=True, nogil=True, inline="always")
def _block_weights(Z, i0, nb, k, w1, w2):
    """``w1 = Z[i0:i0+nb, k]`` and ``w2 = w1^2``, padded with zeros to :data:`ROW_BLOCK` entries."""
    for b in range(ROW_BLOCK):
        z = Z[i0 + b, k] if b < nb else 0.0
        w1[b] = z
        w2[b] = z * z


@njit(cache=True, nogil=True, inline="always")
def _reduce_start(out_s, out_v):
    """Zero the sums of a reduction; its scratch: the rows of a block ``ms`` (ROW_BLOCK, 3, S) and
    two weight vectors."""
    out_s[:, :] = 0.0
    out_v[:, :, :] = 0.0
    return np.zeros((ROW_BLOCK, 3, out_s.shape[1])), np.empty(ROW_BLOCK), np.empty(ROW_BLOCK)


@njit(cache=True, nogil=True, inline="always")
def _reduce_block(Z, i0, nb, ms, out_s, out_v, w1, w2):
    """Add the ``nb`` rows of a block (``ms`` (ROW_BLOCK, 3, S): E[g], E[g^2], dE[g]/dl of rows
    ``i0 ...``; the rest are set to zero) to the column sums ``out_s`` and to
    ``out_v[0, k] += sum_b Z[i0+b, k] ms[b, 0]``, ``out_v[j, k] += sum_b Z[i0+b, k]^2 ms[b, j]`` (j = 1, 2)."""
    ms[nb:] = 0.0
    for b in range(nb):
        for j in range(3):
            for s in range(ms.shape[2]):
                out_s[j, s] += ms[b, j, s]
    for k in range(Z.shape[1]):
        _block_weights(Z, i0, nb, k, w1, w2)
        _add_block(out_v[0, k], w1, ms[0, 0], ms[1, 0], ms[2, 0], ms[3, 0])
        _add_block(out_v[1, k], w2, ms[0, 1], ms[1, 1], ms[2, 1], ms[3, 1])
        _add_block(out_v[2, k], w2, ms[0, 2], ms[1, 2], ms[2, 2], ms[3, 2])


@njit(cache=True, nogil=True)
def _reduce(Z, mean, sq, jac, out_s, out_v):
    """Column sums of mean, sq, jac (``out_s`` (3, S)) and ``Z.T @ mean``, ``(Z^2).T @ sq``,
    ``(Z^2).T @ jac`` (``out_v`` (3, r, S)), :data:`ROW_BLOCK` rows at a time."""
    ms, w1, w2 = _reduce_start(out_s, out_v)
    D = mean.shape[0]
    for i0 in range(0, D, ROW_BLOCK):
        nb = min(ROW_BLOCK, D - i0)
        for b in range(nb):
            ms[b, 0], ms[b, 1], ms[b, 2] = mean[i0 + b], sq[i0 + b], jac[i0 + b]
        _reduce_block(Z, i0, nb, ms, out_s, out_v, w1, w2)


@njit(cache=True, nogil=True)
def _fused_stats(pi, Y, t, Z, out_s, out_v):
    """:func:`_moments` and :func:`_reduce` in one pass, without the (D, S) intermediates."""
    ms, w1, w2 = _reduce_start(out_s, out_v)
    D, S = pi.shape
    c = np.empty(9)
    for i0 in range(0, D, ROW_BLOCK):
        nb = min(ROW_BLOCK, D - i0)
        for b in range(nb):
            i = i0 + b
            _coeffs(t, i, c)
            for s in range(S):
                q, y = pi[i, s], Y[i, s]
                m = q * (c[0] + y * c[1])
                ms[b, 0, s] = m
                ms[b, 1, s] = q * (c[2] + y * c[3] + q * (c[4] + y * (c[5] + y * c[8])))
                ms[b, 2, s] = m * (1.0 - q) + q * q * (c[6] + y * c[7])
        _reduce_block(Z, i0, nb, ms, out_s, out_v, w1, w2)


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy", inline="always")
def _row_moments(t, i, c, pi_row, y_row, rate, m0, m1, m2):
    """Row i's moments per type into ``m0 = E[g]``, ``m1 = E[g^2]``, ``m2 = dE[g]/dl``
    (:func:`_moments` for one row, expected rewards ``rate * y_row``; ``c``: scratch for its
    coefficients, :func:`_coeffs`); the coefficients are held in scalars, which lets the compiler
    vectorise the loop."""
    _coeffs(t, i, c)
    c0, c1, c2, c3, c4, c5, c6, c7, c8 = c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
    for s in range(pi_row.shape[0]):
        q, y = pi_row[s], y_row[s] * rate
        m = q * (c0 + y * c1)
        m0[s] = m
        m1[s] = q * (c2 + y * c3 + q * (c4 + y * (c5 + y * c8)))
        m2[s] = m * (1.0 - q) + q * q * (c6 + y * c7)


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _fused_local_stats(pi, Y, rate, t, Z, q, us, bp, mask, out_s, out_v, g_out, var_out, jac_out):
    """:func:`_moments`, :func:`_reduce` and :func:`_local_stats` (without a KL / entropy term)
    in one pass over the rows; the expected reward of (i, s) is ``rate_i Y_is``."""
    ms, w1, w2 = _reduce_start(out_s, out_v)
    D, S = pi.shape
    c = np.empty(9)
    a1 = us * mask / (q * bp)  # g = a1 E[g]
    a2 = us * us * mask / (q * q * bp * bp)  # the second moment: a2 E[g^2]
    a3 = us * us * mask / (q * bp)  # the Jacobian: a3 dE[g]/dl
    for i0 in range(0, D, ROW_BLOCK):
        nb = min(ROW_BLOCK, D - i0)
        for b in range(nb):
            i = i0 + b
            m0, m1, m2 = ms[b, 0], ms[b, 1], ms[b, 2]
            _row_moments(t, i, c, pi[i], Y[i], rate[i], m0, m1, m2)
            g, var, jac = g_out[i], var_out[i], jac_out[i]
            for s in range(S):
                gi = a1[s] * m0[s]
                g[s] = gi
                var[s] = max(a2[s] * m1[s] - gi * gi, 0.0)
                jac[s] = a3[s] * m2[s]
        _reduce_block(Z, i0, nb, ms, out_s, out_v, w1, w2)


@njit(cache=True, nogil=True, inline="always")
def _shared_shift(db, Z, dV, i, dl):
    """``dl = db + Z_i dV``: the shared blocks' logit change of row i."""
    for s in range(dl.shape[0]):
        dl[s] = db[s]
    for k in range(Z.shape[1]):
        z = Z[i, k]
        for s in range(dl.shape[0]):
            dl[s] += z * dV[k, s]


@njit(cache=True, nogil=True, inline="always")
def _total_variation(pi, i, dl):
    """``sum_s pi_is |dl_s - pi_i . dl|``: ``||d pi_i||_1`` to first order for a logit change ``dl``."""
    mean = 0.0
    for s in range(dl.shape[0]):
        mean += pi[i, s] * dl[s]
    tv = 0.0
    for s in range(dl.shape[0]):
        tv += pi[i, s] * abs(dl[s] - mean)
    return tv


@njit(cache=True, nogil=True)
def _policy_change(pi, Z, db, dV, stride, out):
    """``out_j = sum_s pi_is |dl_is - pi_i . dl_i|`` (``||d pi_i||_1`` to first order) for
    ``dl_i = db + Z_i dV`` and rows ``i = j * stride``: the shared blocks alone (with per-problem
    rows, :func:`_policy_change_rows`)."""
    dl = np.empty(pi.shape[1])
    for j in range(out.shape[0]):
        i = j * stride
        _shared_shift(db, Z, dV, i, dl)
        out[j] = _total_variation(pi, i, dl)


@njit(cache=True, nogil=True)
def _local_stats(pi, mean, sq, jac, d, q, us, bp, klent, mask, g_out, var_out, jac_out):
    """Per-step statistics of the per-problem rows (one (D, S) pass): a row drawn into the batch
    moves by ``us (g_i / K + d_i / B_problem)`` with ``K ~ B_problem q``, so with
    ``x1 = E[g] / q + d`` and ``x2 = E[g^2] / q^2 + 2 d E[g] / q + d^2`` (``d`` may have no rows:
    no KL / entropy term) the mean is ``us x1 / B_problem``, the variance
    ``us^2 x2 / B_problem^2 - mean^2`` and the diagonal Jacobian
    ``us^2 (dE[g]/dl / q - (kl + ent) pi (1 - pi)) / B_problem``."""
    D, S = pi.shape
    use_d = d.shape[0] == D
    for i in range(D):
        for s in range(S):
            ds = d[i, s] if use_d else 0.0
            x1 = mean[i, s] / q + ds
            x2 = sq[i, s] / (q * q) + 2.0 * ds * mean[i, s] / q + ds * ds
            gi = us * x1 * mask[s] / bp
            g_out[i, s] = gi
            var_out[i, s] = max(us * us * x2 * mask[s] / (bp * bp) - gi * gi, 0.0)
            jac_out[i, s] = us * us * (jac[i, s] / q - klent * pi[i, s] * (1.0 - pi[i, s])) * mask[s] / bp


@njit(cache=True, nogil=True, fastmath=True, inline="always")
def _direction(xj, mj, vj, gj, varj, jacj, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp):
    """One coordinate of :func:`_optimiser_step`: ``(d, m', v')``."""
    gj = gj - wd_l2 * xj
    if sgd:
        scale = 1.0
        dj = gj
        mj2 = mj
        vj2 = vj
    else:
        mj2 = b1k * mj + (1.0 - b1k) * gj
        vj2 = b2k * vj + (1.0 - b2k) * (gj * gj + varj)
        scale = 1.0 / (math.sqrt(vj2 / c2) + eps)
        dj = mj2 / c1 * scale
    return dscale * dj / (1.0 + damp * max(-jacj, 0.0) * scale), mj2, vj2


@njit(cache=True, nogil=True, fastmath=True, inline="always")
def _optimiser_loop(x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp, out_d, out_m, out_v):
    for j in range(x.shape[0]):
        out_d[j], mj, vj = _direction(x[j], m[j], v[j], g[j], var[j], jac[j], wd_l2, sgd, b1k, b2k, c1, c2, eps,
                                      dscale, damp)
        if not sgd:
            out_m[j] = mj
            out_v[j] = vj


@njit(cache=True, nogil=True, fastmath=True)
def _optimiser_step(x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp, out_d, out_m, out_v):
    """The direction of one block over the next k steps (flat arrays), :meth:`_Integrator._plan`:
    ``g' = g - wd_l2 x``; Adam: ``m' = b1k m + (1 - b1k) g'``, ``v' = b2k v + (1 - b2k) (g'^2 + var)``,
    ``scale = 1 / (sqrt(v' / c2) + eps)``, ``d = m' / c1 * scale`` (SGD: ``scale = 1``, ``d = g'``);
    returned damped, ``dscale * d / (1 + damp * max(-jac, 0) * scale)``."""
    _optimiser_loop(x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp, out_d, out_m, out_v)


# The two kernels below run over the per-problem rows ((training problems x strategies) arrays)
# and divide without Python's zero-division check (``error_model="numpy"``; no divisor here is
# zero): the check keeps the compiler from vectorising their loops, which made them 2-3 times
# slower. Their results can differ from the checked kernel's by an ulp (a division may become a
# multiplication by a reciprocal); the shared blocks, small, keep the checked :func:`_optimiser_step`.

@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _optimiser_rows(x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp, out_d, out_m, out_v):
    """:func:`_optimiser_step` of the per-problem rows."""
    _optimiser_loop(x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps, dscale, damp, out_d, out_m, out_v)


@njit(cache=True, nogil=True, fastmath=True, error_model="numpy")
def _policy_change_rows(pi, Z, db, dV, us, Y, stride, x, m, v, g, var, jac, wd_l2, sgd, b1k, b2k, c1, c2, eps,
                        dscale, damp, out):
    """:func:`_policy_change` with the per-problem rows' direction ``dU`` computed row by row
    (:func:`_direction`, the arguments of :func:`_optimiser_step` as (D, S) arrays) instead of
    read from an array: the bound needs one step's direction of the rows it looks at only.

    A row's per-problem offsets move that training problem alone, and its pass rate
    ``e_i sum_s pi_is Y_is`` only through the mass on its correct strategies (``Y_is > 1/2``).
    So each strategy's ``dU_is`` enters as the pi-weighted mean of its reward class (correct or
    wrong), ``sum_{s' ~ s} pi_is' dU_is' / sum_{s' ~ s} pi_is'``: a move of mass between two
    correct strategies (or two wrong ones) changes neither the problem's reward nor its groups'
    signal, and is not counted. The shared blocks' change ``db + Z_i dV`` counts in full."""
    S = pi.shape[1]
    dl = np.empty(S)
    for j in range(out.shape[0]):
        i = j * stride
        _shared_shift(db, Z, dV, i, dl)
        w1 = a1 = w0 = a0 = 0.0
        for s in range(S):
            du, _, _ = _direction(x[i, s], m[i, s], v[i, s], g[i, s], var[i, s], jac[i, s], wd_l2, sgd, b1k, b2k,
                                  c1, c2, eps, dscale, damp)
            if Y[i, s] > 0.5:
                w1 += pi[i, s]
                a1 += pi[i, s] * du
            else:
                w0 += pi[i, s]
                a0 += pi[i, s] * du
        c1m = a1 / w1 if w1 > 0.0 else 0.0
        c0m = a0 / w0 if w0 > 0.0 else 0.0
        for s in range(S):
            dl[s] += us * (c1m if Y[i, s] > 0.5 else c0m)
        out[j] = _total_variation(pi, i, dl)


# --- the recursion -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Arrays:
    """The kernel's view of a population, plus the path scales."""

    L0: np.ndarray
    Z: np.ndarray
    Y: np.ndarray
    val_L0: np.ndarray
    val_Z: np.ndarray
    val_Y: np.ndarray
    E: np.ndarray
    val_E: np.ndarray
    mask: np.ndarray
    bs: float
    vs: float
    us: float
    u_share: bool  # the per-problem rows step with lr / K, K the informative groups (PathScales.u_share)


def _arrays(config: SimConfig, pop: Population, max_train: int | None, seed: int) -> _Arrays:
    tr, va = pop.train.problems, pop.val.problems
    idx = np.arange(len(tr))
    if max_train is not None and len(tr) > max_train:
        idx = np.sort(np.random.default_rng(seed).choice(len(tr), max_train, replace=False))
    sc = model_module(config.model).path_scales(config.model)
    c = np.ascontiguousarray
    return _Arrays(c(tr.base_logits[idx]), c(tr.features[idx]), c(tr.rewards[idx]), c(va.base_logits),
                   c(va.features), c(va.rewards), c(tr.execution[idx]), c(va.execution), learn_mask(config.model),
                   sc.beta, sc.v, sc.u, sc.u_share)


@dataclass
class _Block:
    """One parameter block with its Adam moments."""

    x: np.ndarray
    m: np.ndarray
    v: np.ndarray


@dataclass(frozen=True)
class _Stats:
    """A block's batch-mean gradient per step: mean, variance and diagonal Jacobian."""

    g: np.ndarray
    var: np.ndarray
    jac: np.ndarray


class _Integrator:
    """Expected parameters and optimiser moments, advanced K GRPO steps at a time."""

    def __init__(self, config: SimConfig, A: _Arrays, d_full: int):
        a, al = config.algo, config.allocation
        self.A, self.algo = A, a
        self.n, self.bp, self.d_full = al.n, al.b_problem, d_full
        #: the per-problem rows' share of the learning rate (:meth:`row_share`; 1 without ``u_share``)
        self.u_share = 1.0
        self.lr = a.lr_at(al.n * al.b_problem)
        S, r = A.L0.shape[1], A.Z.shape[1]
        shapes = {"beta": (S,), "V": (r, S)}
        if A.us > 0:
            shapes["U"] = A.L0.shape
            if np.isfinite(A.E).any():
                shapes["alpha"] = A.L0.shape[:1]
        self.blocks = {k: _Block(*(np.zeros(sh) for _ in range(3))) for k, sh in shapes.items()}
        self.t = 0
        self.t_adam = 0.0
        self.t_u = 0.0
        #: the per-problem rows as the current epoch found them (see :meth:`snapshot`)
        self.epoch_rows = {k: self.blocks[k].x.copy() for k in ("U", "alpha") if k in self.blocks}
        self.epochs_done = 0
        self.active = 1.0
        self.ref = None
        if a.kl_coef > 0 or a.entropy_coef > 0:
            self.ref, _ = self.policy(A.L0, A.Z, A.Y, False, base=True)

    def execution(self, E: np.ndarray, use_u: bool, rows: dict | None = None) -> np.ndarray:
        """``e_i = sigmoid(E_i + us alpha_i)`` (``alpha`` only for training rows, ``use_u``; from
        ``rows`` when given, else the current expectation)."""
        if use_u and "alpha" in self.blocks:
            E = E + self.A.us * (rows or {}).get("alpha", self.blocks["alpha"].x)
        with np.errstate(over="ignore"):
            return expit(E)

    def policy(self, L0, Z, Y, use_u: bool, base: bool = False, rows: dict | None = None,
               need_pi: bool = True, rate: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray]:
        """Pass-rate-level view of the expected parameters: ``pi`` (None without ``need_pi``) and
        ``p`` of each row (the rows' expected rewards are ``rate_i Y_is``, ``rate`` the execution
        rates, 1 when not given; per-problem offsets from ``rows`` when given)."""
        A, b = self.A, self.blocks
        S, r = L0.shape[1], Z.shape[1]
        bias = np.zeros(S) if base else A.bs * b["beta"].x
        V = np.zeros((r, S)) if base else A.vs * b["V"].x
        U = (rows or {}).get("U", b["U"].x) if use_u and "U" in b and not base else np.zeros((0, S))
        D = L0.shape[0]
        pi = np.empty((D, S) if need_pi else (0, S))
        p = np.empty(D)
        _policy_rows(L0, bias, Z, V, U, A.us, Y, np.empty(0) if rate is None else rate, need_pi, pi, p, np.empty(S),
                     np.empty(S, dtype=np.int64))
        return (pi if need_pi else None), p

    def stats(self, pi: np.ndarray, p: np.ndarray, Y: np.ndarray, e: np.ndarray) -> dict[str, _Stats]:
        """Per-step gradient statistics of every block at the current expected parameters.

        Per coordinate, with weights ``w_i`` (1 for beta, ``z_ik`` for V) and a step that
        updates (:meth:`filter_factors`: ``q``, ``c``; ``q = c = 1`` without the filter), the
        batch gradient is ``G = sum_b w_b g_b / K + (1 / B_problem) sum_b w_b d_b``: the policy
        gradient averaged over the K informative groups (all B_problem without the filter),
        the KL / entropy gradient ``d`` over the whole batch, as in the kernel. With the
        problem means ``S0 = mean_i w_i E[g_i]``, ``S1 = mean_i w_i^2 E[g_i^2]``,
        ``D0 = mean_i w_i d_i``, ``D1 = mean_i w_i^2 d_i^2`` and ``X = mean_i w_i^2 d_i E[g_i]``:

            E[G]   = S0 / q + D0
            Var[G] = (c (S1 / q - (S0 / q)^2) + D1 - D0^2 + 2 (X - S0 D0) / q) / B_problem

        (the informative groups are i.i.d. with mean ``S0 / q`` and second moment ``S1 / q``;
        ``c / B_problem = E[1 / K | K > 0]``; the cross term takes ``E[d | informative]`` as
        ``D0``). Without the filter this is ``(E[x^2] - E[x]^2) / B_problem`` for ``x = g + d``.
        The diagonal Jacobian is ``mean_i w_i^2 (dE[g_i]/dl / q - (kl + ent) pi (1 - pi))``.
        ``Y``: the rewards of the training rows' types; ``e``: their execution rates (expected
        rewards ``y_is = e_i Y_is``).
        """
        A, a = self.A, self.algo
        t = _row_table(self.n, a.advantage, a.std_eps, p)
        D, S = pi.shape
        r = A.Z.shape[1]
        q, self.active, c = self.filter_factors(p)
        if A.u_share:
            self.u_share = self.row_share(p)
        red_s, red_v = np.empty((3, S)), np.empty((3, r, S))
        reg_s, reg_v = np.zeros((3, S)), np.zeros((3, r, S))
        if self.ref is None and "U" in self.blocks:
            st = _Stats(*(np.empty_like(pi) for _ in range(3)))
            _fused_local_stats(pi, Y, e, t, A.Z, q, A.us, float(self.bp), A.mask, red_s, red_v, st.g, st.var, st.jac)
            out_u = st
        elif self.ref is not None or "U" in self.blocks:
            y = Y * e[:, None]
            mean, sq, jac = (np.empty_like(pi) for _ in range(3))
            _moments(pi, y, t, mean, sq, jac)
            if self.ref is not None:
                logpi, logref = np.log(pi), np.log(self.ref)
                kl = (pi * (logpi - logref)).sum(axis=1, keepdims=True)
                ent = -(pi * logpi).sum(axis=1, keepdims=True)
                d = -a.kl_coef * pi * (logpi - logref - kl) - a.entropy_coef * pi * (logpi + ent)
                _reduce(A.Z, mean, sq, jac - q * (a.kl_coef + a.entropy_coef) * pi * (1.0 - pi), red_s, red_v)
                _reduce(A.Z, d, d * d, d * mean, reg_s, reg_v)
            else:
                _reduce(A.Z, mean, sq, jac, red_s, red_v)
        else:
            _fused_stats(pi, Y * e[:, None], t, A.Z, red_s, red_v)
        out = {}
        for name, red, reg, scale in (("beta", red_s / D, reg_s / D, A.bs), ("V", red_v / D, reg_v / D, A.vs)):
            s0, s1, jq = red
            d0, d1, x = reg
            var = c * (s1 / q - (s0 / q) ** 2) + d1 - d0**2 + 2.0 * (x - s0 * d0) / q
            out[name] = _Stats(scale * (s0 / q + d0) * A.mask, scale**2 * np.maximum(var, 0.0) / self.bp * A.mask,
                               scale**2 * jq / q * A.mask)
        if "U" in self.blocks and self.ref is None:
            out["U"] = out_u
        elif "U" in self.blocks:
            # row i's update when it is drawn: us (g_i / K + d_i / B_problem), with K ~ B_problem q
            st = _Stats(*(np.empty_like(pi) for _ in range(3)))
            _local_stats(pi, mean, sq, jac, d if self.ref is not None else np.zeros((0, S)), q, A.us, float(self.bp),
                         a.kl_coef + a.entropy_coef, A.mask, st.g, st.var, st.jac)
            out["U"] = st
        if "alpha" in self.blocks:
            strat = p / np.maximum(e, 1e-300)
            ee = e * (1.0 - e)
            x1 = strat * ee * (t[0] - t[1]) / q
            x2 = x1 * x1 + strat * ee * ((1.0 - e) * t[2] + e * t[3]) / q**2
            g = A.us * x1 / self.bp
            out["alpha"] = _Stats(g, np.maximum(A.us**2 * x2 / self.bp**2 - g * g, 0.0),
                                  A.us**2 * x1 * (1.0 - 2.0 * e) / self.bp)
        return out

    def informative_share(self, p: np.ndarray) -> float:
        """``q = mean_i 1 - p_i^n - (1 - p_i)^n``: the chance that a batch slot's group carries
        signal (not all of its n rollouts agree)."""
        return 1.0 - float((p**self.n + (1.0 - p) ** self.n).sum()) / p.size

    def row_share(self, p: np.ndarray) -> float:
        """``E[1 / K]`` for a visit that moves its row: with ``local_share`` the kernel steps a
        problem's own rows with ``lr / K``, K the batch's informative groups. A row moves when its
        own group is informative, so ``K = 1 + K'`` with ``K' ~ Bin(B_problem - 1, q)`` the other
        slots (:meth:`informative_share`), and
        ``E[1 / (1 + K')] = (1 - (1 - q)^B_problem) / (B_problem q)`` (as in :meth:`filter_factors`)."""
        q = self.informative_share(p)
        if q <= 1e-12:
            return 1.0
        return float((1.0 - (1.0 - min(q, 1.0)) ** self.bp) / (self.bp * q))

    def filter_factors(self, p: np.ndarray) -> tuple[float, float, float]:
        """``(q, P, c)`` of the zero-variance filter: the informative share of the groups in a
        step that updates, the probability that a step updates at all, and
        ``c = B_problem E[1 / K | K > 0]`` for K the number of informative groups.

        Without the filter all three are 1. With it, a group is informative with
        probability ``q_i = 1 - p_i^n - (1 - p_i)^n``; a batch slot is a uniform draw, so
        ``K ~ Bin(B_problem, q)`` with ``q = mean_i q_i`` (exact for draws with
        replacement). The kernel skips a step with ``K = 0``, so
        ``P = 1 - (1 - q)^B_problem``, and otherwise divides the summed policy gradient by K.
        A slot's gradient g_b is zero unless its group is informative, and then
        ``K = 1 + K'`` with ``K' ~ Bin(B_problem - 1, q)`` the other slots, so
        ``E[g_b / K; K > 0] = E[g_b] E[1 / (1 + K')] = E[g_b] P / (B_problem q)``. Summed over
        the slots and given that the step happens, the expected update is
        ``mean_i E[g_i] / q``. The optimiser (Adam's moments and step count) advances only in
        the steps that happen, a share P of them.
        """
        if not self.algo.zero_var_filter:
            return 1.0, 1.0, 1.0
        q = self.informative_share(p)
        if q <= 0.0:
            return 1.0, 0.0, 1.0
        k = np.arange(1, self.bp + 1)
        pk = _binom_pmf(self.bp, np.array([[min(q, 1.0 - 1e-16)]]))[0, 1:]
        active = float(pk.sum())
        return q, active, float(self.bp * (pk / k).sum() / active)

    def _scalars(self, name: str, k: int, lr: float) -> tuple | None:
        """The scalar arguments of :func:`_optimiser_step` for block ``name`` over the next k
        steps (see :meth:`_plan`); None before the block's first optimiser step."""
        a = self.algo
        local = name in ("U", "alpha")
        per = self.active * (self.bp / self.d_full if local else 1.0)
        kk, t = k * per, (self.t_u if local else self.t_adam) + k * per
        if t <= 0.0:  # no optimiser step yet (every group so far filtered out)
            return None
        share = self.u_share if local else 1.0
        return (a.weight_decay if a.optimizer in ("sgd", "adam") else 0.0, a.optimizer == "sgd",
                a.beta1**kk, a.beta2**kk, 1.0 - a.beta1**t, 1.0 - a.beta2**t, a.adam_eps, per * share,
                kk * lr * share)

    def _plan(self, name: str, st: _Stats, k: int, lr: float):
        """Per-step direction over the next k steps and the moments after them.

        Adam: ``m`` and ``v`` relax towards ``E[G]`` and ``E[G]^2 + Var[G]``; the step
        ``m_hat / (sqrt(v_hat) + eps)`` is damped by ``1 + k lr r``, with the restoring
        rate ``r = max(0, -dE[G]/dx) / (sqrt(v_hat) + eps)``. A block moves in a share
        ``per`` of the steps: P, the share of steps that update (:meth:`filter_factors`),
        times B_problem / D for the per-problem offsets ``U`` (they move only when their
        problem is drawn); those step with ``lr * u_share`` (:meth:`row_share`).
        """
        b = self.blocks[name]
        sgd = self.algo.optimizer == "sgd"
        sc = self._scalars(name, k, lr)
        if sc is None:
            return np.zeros_like(b.x), (None if sgd else b.m), (None if sgd else b.v)
        d, m2, v2 = np.empty_like(b.x), np.empty_like(b.x), np.empty_like(b.x)
        flat = [np.ascontiguousarray(z).reshape(-1) if z.shape == b.x.shape else
                np.ascontiguousarray(np.broadcast_to(z, b.x.shape)).reshape(-1)
                for z in (b.x, b.m, b.v, st.g, st.var, st.jac)]
        step = _optimiser_rows if name in ("U", "alpha") else _optimiser_step
        step(*flat, *sc, d.reshape(-1), m2.reshape(-1), v2.reshape(-1))
        return d, (None if sgd else m2), (None if sgd else v2)

    def plan(self, stats: dict[str, _Stats], k: int) -> dict:
        """:meth:`_plan` of every block."""
        lr = self.lr_over(k)
        return {name: self._plan(name, st, k, lr) for name, st in stats.items()}

    def lr_over(self, k: int) -> float:
        """Mean learning rate over the next k steps (linear warm-up)."""
        w = self.algo.warmup
        if self.t + 1 >= w:
            return self.lr
        steps = np.arange(self.t, self.t + k) + 1.0
        return float(np.mean(self.lr * np.where(steps < w, steps / max(w, 1), 1.0)))

    def policy_change(self, stats: dict[str, _Stats], pi: np.ndarray) -> float:
        """Largest ``||d pi_i||_1`` of one step along :meth:`plan` ``(stats, 1)`` (full learning
        rate; about 1000 rows). The per-problem rows' direction is computed for the rows looked
        at only, and counts only where it moves mass between a row's correct and wrong
        strategies (:func:`_policy_change_rows`)."""
        A = self.A
        lr = self.lr_over(1)
        shared = {name: self._plan(name, stats[name], 1, lr)[0] for name in ("beta", "V")}
        db, dV = A.bs * shared["beta"], A.vs * shared["V"]
        stride = max(1, pi.shape[0] // 1000)
        out = np.empty((pi.shape[0] - 1) // stride + 1)
        sc = self._scalars("U", 1, lr) if "U" in stats else None
        if sc is None:
            _policy_change(pi, A.Z, db, dV, stride, out)
        else:
            b, st = self.blocks["U"], stats["U"]
            _policy_change_rows(pi, A.Z, db, dV, A.us, A.Y, stride, b.x, b.m, b.v, st.g, st.var, st.jac, *sc, out)
        return self.lr * float(out.max())

    def advance(self, plan: dict, k: int) -> None:
        a = self.algo
        lr = self.lr_over(k)
        for name, (d, m2, v2) in plan.items():
            b = self.blocks[name]
            if a.optimizer == "adamw" and a.weight_decay > 0:
                local = name in ("U", "alpha")
                share = self.active * (self.bp / self.d_full if local else 1.0)
                b.x *= (1.0 - (lr * self.u_share if local else lr) * a.weight_decay) ** (k * share)
            b.x += k * lr * d
            if m2 is not None:
                b.m, b.v = m2, v2
        if "U" in plan:
            self.t_u += k * self.active * self.bp / self.d_full
        self.t_adam += k * self.active
        self.t += k
        self.snapshot()

    def snapshot(self) -> None:
        """Keep the per-problem rows as each new epoch finds them.

        The simulator visits every training problem once per epoch, so a problem drawn during
        epoch k has been visited k times, all before the epoch began, and its gradient is that
        of its offsets then. The rows advance continuously here (a share B_problem / D of a visit
        per step), so the batch's gradient is computed from :attr:`epoch_rows`, taken at each
        whole visit count; evaluated from the advancing rows instead, every problem would look
        a fraction of a visit more memorised than the ones actually drawn, which at large n
        (few epochs) starves the shared path of signal.
        """
        if self.epoch_rows and int(self.t_u) > self.epochs_done:
            self.epochs_done = int(self.t_u)
            self.epoch_rows = {k: self.blocks[k].x.copy() for k in self.epoch_rows}


@dataclass(frozen=True)
class MeanFieldTrace:
    """The mean-field prediction of one config. ``wide``: one row per macro step and split
    (``step, compute_rollouts, compute_tokens, split`` and a column per metric);
    :attr:`table` is the tidy format of :class:`isosim.sim.run.Trace` (``seed`` -1)."""

    config: SimConfig
    wide: pd.DataFrame

    @property
    def table(self) -> pd.DataFrame:
        from ..sim.run import TRACE_COLUMNS

        t = self.wide.melt(id_vars=["step", "compute_rollouts", "compute_tokens", "split"], var_name="metric")
        t = t.dropna(subset=["value"]).assign(config_id=self.config.config_id(), seed=-1)
        return t.sort_values(["step", "split"], kind="stable")[TRACE_COLUMNS].reset_index(drop=True)

    def curve(self, metric: str, split: str = "val") -> pd.DataFrame:
        w = self.wide[self.wide["split"] == split]
        cols = ["step", "compute_rollouts", "compute_tokens", metric]
        return w[cols].rename(columns={metric: "value"}).reset_index(drop=True)

    def final(self, split: str = "val") -> dict[str, float]:
        row = self.wide[self.wide["split"] == split].iloc[-1]
        return {k: float(v) for k, v in row.drop(["step", "compute_rollouts", "compute_tokens", "split"]).items()
                if pd.notna(v)}

    def at(self, compute, metric: str, split: str = "val") -> np.ndarray:
        """The metric at ``compute`` rollouts (linear in log compute between macro steps)."""
        c = self.curve(metric, split)
        c = c[c["compute_rollouts"] > 0]
        return np.interp(np.log(np.asarray(compute, float)), np.log(c["compute_rollouts"].to_numpy(float)),
                         c["value"].to_numpy(float))


def _metrics(p: np.ndarray, ks) -> dict[str, float]:
    """Mean exact metrics of pass rates p: avg@k = p, best@k = 1 - (1-p)^k, worst@k = p^k."""
    p = np.clip(p, 0.0, 1.0)
    q = 1.0 - p
    inv = 1.0 / p.size  # sums, not np.mean: this runs after every macro step
    avg = float(p.sum()) * inv
    out = {}
    for k in ks:
        out[f"avg@{k}"] = avg
        out[f"best@{k}"] = 1.0 - float((q**k).sum()) * inv
        out[f"worst@{k}"] = float((p**k).sum()) * inv
    return out


def mean_field(config: SimConfig, population: Population | None = None, *, max_change: float = 0.5,
               growth: float = 0.3, max_train: int | None = None, seed: int = 0, train_size: int | None = None,
               train_every_step: bool = True) -> MeanFieldTrace:
    """Integrate the mean-field recursion for ``config`` up to its M steps.

    ``growth`` bounds a macro step to ``max(1, growth * t)`` GRPO steps after ``t`` and
    ``max_change`` its largest policy change ``||d pi_i||_1``; ``max_train`` uses a
    random subset of that many training problems (``seed``) for the expected gradient.
    ``train_size``: the number of training problems the population's training rows stand
    for (default: their number). The expected gradient is a mean over problems, so equally
    weighted representatives of D problems give it directly; D enters through the share
    B_problem / D of the steps that visit a problem (its per-problem offsets), which is taken
    with this D (:func:`isosim.plan.planner.representatives` makes such rows).
    Metrics are recorded after every macro step (the training split's only after the last
    one without ``train_every_step``); the validation set is evaluated without the
    per-problem offsets, as in :func:`isosim.sim.run.simulate`.
    """
    config.validate()
    if config.algo.baseline_n > config.allocation.n:
        raise IsosimInputError("the mean field does not model a decoupled baseline (baseline_n > n)")
    if config.algo.drift > 0:
        raise IsosimInputError("the mean field does not model the drift of the shared parameters (algo.drift > 0): "
                               "simulate the allocations instead")
    pop = population if population is not None else build_population(config.population, config.model)
    A = _arrays(config, pop, max_train, seed)
    it = _Integrator(config, A, int(train_size) if train_size else len(pop.train))
    al = config.allocation
    total = al.resolved_steps(config.algo)
    per_step = al.rollouts_per_step(config.algo)
    tokens = per_step * float(np.mean(pop.train.lengths))
    ks = config.eval.ks
    rows: list[dict] = []
    e_val = it.execution(A.val_E, False)

    while True:
        head = {"step": it.t, "compute_rollouts": it.t * per_step, "compute_tokens": it.t * tokens}
        pi = None
        if train_every_step or it.t >= total:
            e = it.execution(A.E, True)
            pi, p = it.policy(A.L0, A.Z, A.Y, True, need_pi=not it.epoch_rows, rate=e)
            zero = float(np.mean(p**al.n + (1.0 - p) ** al.n))
            rows.append({**head, "split": "train", **_metrics(p, ks), "zero_var_frac": zero})
        p_val = it.policy(A.val_L0, A.val_Z, A.val_Y, False, need_pi=False, rate=e_val)[1]
        rows.append({**head, "split": "val", **_metrics(p_val, ks)})
        if it.t >= total:
            break
        if it.epoch_rows or pi is None:  # the batch's problems as this epoch found them
            e = it.execution(A.E, True, it.epoch_rows)
            pi, p = it.policy(A.L0, A.Z, A.Y, True, rows=it.epoch_rows, rate=e)
        stats = it.stats(pi, p, A.Y, e)
        k = 1
        if it.t >= config.algo.warmup:
            change = it.policy_change(stats, pi)
            cap = int(max_change / change) if change > 0 else total
            k = max(1, min(cap, int(growth * it.t), total - it.t))
        it.advance(it.plan(stats, k), k)
    return MeanFieldTrace(config, pd.DataFrame(rows))
