"""Numba kernels: the GRPO training loop and the exact evaluation of a policy.

Policy of problem i (see :mod:`isosim.sim.models`)::

    logits_i = L0_i + bs * beta + vs * z_i V + us * u_i,   pi_i = softmax(logits_i)

One step, for each of the B_problem problems of the batch:

* counts ``c ~ Multinomial(n, pi_i)``: for ``n <= min(DIRECT_MAX_N, S / 2)`` one rollout at a time
  by inverse CDF (:func:`_draw_direct`, O(S + n log S) per group), above it as
  conditional binomials (:func:`_multinomial`, at most S - 1 draws per group), so a step
  costs O(B_problem * S) whatever n is; with a decoupled baseline ``n_est - n`` more
  rollouts are drawn for the baseline, by the same rule on ``n_est - n``;
* with execution noise (a finite execution logit ``a_i``, :mod:`isosim.sim.models.base`), the
  ``c_s`` rollouts of a correct type s succeed ``k_s ~ Binomial(c_s, e_i)`` times,
  ``e_i = sigmoid(a_i + us * alpha_i)``; otherwise ``k_s = c_s Y[i, s]``;
* rewards 0/1 per rollout, group mean ``rbar = c_correct / n_est`` (``c_correct = sum_s k_s``) and advantages
  ``A_s = (r_s - rbar) / (std + eps)`` (grpo), ``r_s - rbar`` (drgrpo) or
  ``r_s - (c_correct - r_s) / (n_est - 1)`` (rloo);
* logit gradient ``g_i = (1 / n) sum_s (k_s A(1) + (c_s - k_s) A(0)) (e_s - pi_i)`` averaged over the
  groups of the batch (over the non-zero-variance ones with the filter), plus
  ``-kl * grad KL(pi_i || ref_i) + ent * grad H(pi_i)``. Every registered advantage
  sums to zero over its group, so without a decoupled baseline ``sum_s c_s A_s = 0``,
  the ``pi_i`` term vanishes and ``g_i`` has at most ``min(n, S)`` non-zeros: the chain
  rule visits only those;
* chain rule to ``beta``, ``V``, ``u`` and an SGD / Adam / AdamW ascent step; with a drift
  ``d > 0`` the update then moves ``beta`` and ``V`` at random as well, ``+= d * lr_t * xi``,
  ``xi ~ N(0, 1)`` per coordinate drawn from the training stream (``beta`` first, then ``V`` row by
  row), in the steps that update;
  ``u`` rows use lazy Adam (a row's moments move only when its problem is sampled) with
  learning rate ``lr``, or with ``local_share`` ``lr / K``, K the batch's informative groups
  (at least 1): a problem's own step is then its share of the batch's normalised update, which
  only the groups with signal make, so memorising per visit does not speed up with the batch
  and does speed up when few groups carry signal (``PathScales.u_share``, ``fpar[F_USHARE]``);
* with execution noise and the memorisation path on (``us > 0``), the problem's execution
  offset ``alpha_i`` ascends ``us (1 / n) sum_{s: Y_s = 1} (k_s A(1) (1 - e_i) - (c_s - k_s) A(0) e_i)``
  (the score of the rollouts' execution outcomes), averaged like ``g_i`` and stepped with ``u_i``.

The plain NumPy twin in :mod:`isosim.sim.twin` draws the same random numbers in
the same order; the tests compare the two.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .advantages import ADVANTAGES

#: kernel codes of the registered advantages (:mod:`isosim.sim.advantages`)
ADV_GRPO, ADV_DRGRPO, ADV_RLOO = (ADVANTAGES[a].code for a in ("grpo", "drgrpo", "rloo"))
OPT_SGD, OPT_ADAM, OPT_ADAMW = 0, 1, 2
#: groups of n <= min(DIRECT_MAX_N, S / 2) rollouts are sampled one rollout at a time (inverse
#: CDF); larger ones as conditional binomials (at most S - 1 draws, so with few response types
#: binomials are the cheaper way). Both give exact multinomial counts.
DIRECT_MAX_N = 32


@njit(cache=True, error_model="numpy")
def draws_directly(n, S):
    """Whether a group of ``n`` rollouts over ``S`` response types is sampled one rollout at a time."""
    return n <= DIRECT_MAX_N and 2 * n <= S
#: Adam moments below this are set to 0 (never subnormal numbers)
MOMENT_FLOOR = 1e-300



class TrainData(NamedTuple):
    """The training problems as the kernel reads them (never written; one row per problem)."""

    base_logits: np.ndarray  # (D, S) float64: L0_i, the reference policy's logits
    features: np.ndarray  # (D, r) float64: z_i, the embedding the shared V acts through (r may be 0)
    rewards: np.ndarray  # (D, S) float64 0/1: Y[i, s] = 1 if response type s solves problem i
    order: np.ndarray  # (D, S) int64: problem i's types by decreasing base probability (sampling order)
    lengths: np.ndarray  # (D,) float64: tokens of one response to problem i (compute in tokens)
    learn_mask: np.ndarray  # (S,) float64: 1 for the types whose logits learn, 0 for fixed ones
    execution: np.ndarray  # (D,) float64: a_i, the base execution logit (+inf: no execution noise)


class TrainState(NamedTuple):
    """The learned parameters, the optimiser state and the data order; updated in place.

    All parameters start at zero, which is the reference policy. A row of U (and its Adam
    moments) stays exactly zero in every column no gradient has reached, so the kernel keeps,
    per row, the list of columns that one has (``u_cols``) and steps and reads only those: the
    same numbers as a dense pass, at the cost of the few columns a problem's groups have drawn."""

    beta: np.ndarray  # (S,) shared preference over response types
    V: np.ndarray  # (r, S) shared low-rank map from a problem's embedding to logits
    U: np.ndarray  # (D, S) per-problem offsets (memorise, do not transfer)
    m_beta: np.ndarray  # (S,) Adam first moment of beta
    v_beta: np.ndarray  # (S,) Adam second moment of beta
    m_V: np.ndarray  # (r, S) Adam first moment of V
    v_V: np.ndarray  # (r, S) Adam second moment of V
    m_U: np.ndarray  # (D, S) Adam first moments of U's rows
    v_U: np.ndarray  # (D, S) Adam second moments of U's rows
    t_U: np.ndarray  # (D,) int64: Adam steps taken by each row of U (lazy Adam)
    alpha: np.ndarray  # (D,) per-problem execution offsets (memorise, do not transfer)
    m_alpha: np.ndarray  # (D,) Adam first moments of alpha (stepped with U's rows)
    v_alpha: np.ndarray  # (D,) Adam second moments of alpha
    perm: np.ndarray  # (D,) int64: this epoch's order of the training problems
    cursor: np.ndarray  # (1,) int64: next position in perm; D starts a new epoch (reshuffle)
    counters: np.ndarray  # (4,) float64: C_TOKENS, C_ZERO_VAR, C_GROUPS, C_ADAM_T below
    u_cols: np.ndarray  # (D, S) int32: row i's columns of U that a gradient has reached, u_cols[i, :u_ncols[i]]
    u_ncols: np.ndarray  # (D,) int64: how many there are
    u_on: np.ndarray  # (D, S) bool: whether column s of row i is among them


# indices into the float hyper-parameter vector fpar: learning rate (after the LR rule, before warm-up),
# the path scales of beta / V / U, the std epsilon, KL and entropy coefficients, Adam's beta1, beta2, eps,
# the weight decay, whether the per-problem rows step with their share of the batch's update (1.0)
# or with the whole learning rate (0.0), and the drift of the shared parameters per update (in units
# of the step's learning rate)
F_LR, F_BS, F_VS, F_US, F_STD_EPS, F_KL, F_ENT, F_B1, F_B2, F_AEPS, F_WD, F_USHARE, F_DRIFT = range(13)
# indices into the integer hyper-parameter vector ipar: n (rollouts in the update), n_est (rollouts in
# the baseline, >= n), B_problem, the advantage's code, the optimiser's code, the zero-variance filter
# (0/1) and the warm-up steps
I_N, I_NEST, I_BP, I_ADV, I_OPT, I_FILTER, I_WARMUP = range(7)
# indices into TrainState.counters: tokens sampled, groups with zero reward variance, groups, global
# Adam step (the optimiser step count of the shared parameters)
C_TOKENS, C_ZERO_VAR, C_GROUPS, C_ADAM_T = range(4)


@njit(cache=True, error_model="numpy")
def _logits_row(L0, Z, beta, V, U, i, urow, bs, vs, us, out, u_cols, u_ncols):
    """``out = L0[i] + bs * beta + vs * Z[i] @ V (+ us * U[urow] when urow >= 0)``; with a column
    list (``u_ncols`` of U's length) only U's listed columns are added (the others are zero). A path
    whose scale is 0 is skipped: it would add 0 times its (finite) parameters, zeros, so a model
    without shared paths (the no-interference ablations) does not pay for the rank-r product."""
    S = L0.shape[1]
    r = Z.shape[1]
    if bs != 0.0:
        for s in range(S):
            out[s] = L0[i, s] + bs * beta[s]
    else:
        for s in range(S):
            out[s] = L0[i, s]
    if vs != 0.0:
        for k in range(r):
            zk = vs * Z[i, k]
            for s in range(S):
                out[s] += zk * V[k, s]
    if urow >= 0:
        if u_ncols.shape[0] == U.shape[0]:
            for c in range(u_ncols[urow]):
                s = u_cols[urow, c]
                out[s] += us * U[urow, s]
        else:
            for s in range(S):
                out[s] += us * U[urow, s]


@njit(cache=True, error_model="numpy")
def _row_max(x):
    """``max(x)`` as eight running maxima (exact in any order)."""
    S = x.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = x[0]
    s = 0
    while s + 8 <= S:
        m0 = max(m0, x[s])
        m1 = max(m1, x[s + 1])
        m2 = max(m2, x[s + 2])
        m3 = max(m3, x[s + 3])
        m4 = max(m4, x[s + 4])
        m5 = max(m5, x[s + 5])
        m6 = max(m6, x[s + 6])
        m7 = max(m7, x[s + 7])
        s += 8
    while s < S:
        m0 = max(m0, x[s])
        s += 1
    return max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))


@njit(cache=True, error_model="numpy")
def _row_sums(a, m, out):
    """``out[j] = a[j, 0] + ... + a[j, S-1]`` for ``j < m``, each row added left to right (the
    rounding of one row at a time), eight rows at once so that no addition waits on the one before."""
    S = a.shape[1]
    j = 0
    while j + 8 <= m:
        t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = 0.0
        for s in range(S):
            t0 += a[j, s]
            t1 += a[j + 1, s]
            t2 += a[j + 2, s]
            t3 += a[j + 3, s]
            t4 += a[j + 4, s]
            t5 += a[j + 5, s]
            t6 += a[j + 6, s]
            t7 += a[j + 7, s]
        out[j], out[j + 1], out[j + 2], out[j + 3] = t0, t1, t2, t3
        out[j + 4], out[j + 5], out[j + 6], out[j + 7] = t4, t5, t6, t7
        j += 8
    while j < m:
        t = 0.0
        for s in range(S):
            t += a[j, s]
        out[j] = t
        j += 1


@njit(cache=True, error_model="numpy")
def _row_cumsums(a, m, out):
    """``out[j, s] = a[j, 0] + ... + a[j, s]`` for ``j < m`` (left to right, four rows at once)."""
    S = a.shape[1]
    j = 0
    while j + 4 <= m:
        t0 = t1 = t2 = t3 = 0.0
        for s in range(S):
            t0 += a[j, s]
            t1 += a[j + 1, s]
            t2 += a[j + 2, s]
            t3 += a[j + 3, s]
            out[j, s] = t0
            out[j + 1, s] = t1
            out[j + 2, s] = t2
            out[j + 3, s] = t3
        j += 4
    while j < m:
        t = 0.0
        for s in range(S):
            t += a[j, s]
            out[j, s] = t
        j += 1


@njit(cache=True, error_model="numpy")
def _softmax_row(logits, pi, logpi):
    """``pi = softmax(logits)`` and ``logpi = log pi``."""
    S = logits.shape[0]
    mx = logits[0]
    for s in range(1, S):
        if logits[s] > mx:
            mx = logits[s]
    tot = 0.0
    for s in range(S):
        pi[s] = math.exp(logits[s] - mx)
        tot += pi[s]
    lz = mx + math.log(tot)
    inv = 1.0 / tot
    for s in range(S):
        pi[s] = pi[s] * inv
        logpi[s] = logits[s] - lz


#: the constants of :func:`exp_nonpositive`'s argument reduction (the mean field's exponential reads them too)
LOG2E = 1.4426950408889634
LN2_HI = 0.6931471803691238  # ln 2 = LN2_HI + LN2_LO, the high part exact in 32 bits
LN2_LO = 1.9082149292705877e-10
_C0, _C1, _C2, _C3, _C4, _C5, _C6 = 1.0, 1.0, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720
_C7, _C8, _C9, _C10, _C11, _C12, _C13 = 1 / 5040, 1 / 40320, 1 / 362880, 1 / 3628800, 1 / 39916800, \
    1 / 479001600, 1 / 6227020800


#: adding ``ROUNDER`` (1.5 * 2^52) to a float of magnitude below 2^51 rounds it to an integer held in
#: the low bits of the sum's mantissa: the sum's bits minus ``ROUNDER_BITS`` are that integer. Vector
#: code without a float-to-int64 conversion instruction (AVX2) gets integers this way.
ROUNDER = 6755399441055744.0
ROUNDER_BITS = 0x4338000000000000


@njit(cache=True, error_model="numpy")
def exp_nonpositive(x, out, k1, k2):
    """``out = exp(x)`` for ``x <= 0`` (below -745, ``exp(-745)``), in loops the compiler vectorises.

    ``x = k ln 2 + r`` with ``k = ceil(x / ln 2 - 1/2)`` (the nearest integer) and
    ``|r| <= ln 2 / 2`` (Cody-Waite: ``ln 2`` in two parts), ``exp(r)`` by its Taylor polynomial
    to degree 13 (truncation below ``(ln 2 / 2)^14 / 14! ~ 1e-18``), and
    ``2^k = 2^(k1) 2^(k - k1)`` built from exponent bits (``k1 = floor(k / 2)``, so both factors
    are normal numbers down to ``k = -1075``). ``k`` and ``k1`` are rounded with :data:`ROUNDER`
    and moved into the exponent field by integer shifts, so every loop vectorises without a
    float-to-integer conversion. Within 1 ulp of ``numpy.exp`` here (the tests check 2 ulp);
    about three times faster than the scalar ``math.exp`` call, which the compiler cannot
    vectorise without Intel's SVML. ``k1``, ``k2`` are int64 scratch arrays of ``x``'s length.
    """
    N = x.shape[0]
    f1 = k1.view(np.float64)
    f2 = k2.view(np.float64)
    for j in range(N):
        xj = max(x[j], -745.0)
        w = xj * LOG2E - 0.5
        kn = (w + ROUNDER) - ROUNDER
        k = kn + 1.0 if kn < w else kn
        r = (xj - k * LN2_HI) - k * LN2_LO
        q = _C13 * r + _C12
        q = q * r + _C11
        q = q * r + _C10
        q = q * r + _C9
        q = q * r + _C8
        q = q * r + _C7
        q = q * r + _C6
        q = q * r + _C5
        q = q * r + _C4
        q = q * r + _C3
        q = q * r + _C2
        q = q * r + _C1
        q = q * r + _C0
        h = k * 0.5
        hn = (h + ROUNDER) - ROUNDER
        e1 = hn - 1.0 if hn > h else hn
        f1[j] = e1 + ROUNDER
        f2[j] = (k - e1) + ROUNDER
        out[j] = q
    for j in range(N):
        k1[j] = (k1[j] - ROUNDER_BITS + 1023) << 52
        k2[j] = (k2[j] - ROUNDER_BITS + 1023) << 52
    for j in range(N):
        out[j] = out[j] * f1[j] * f2[j]


@njit(cache=True, error_model="numpy")
def _policy_rows(L0, Z, beta, V, U, rows, use_u, bs, vs, us, lg, pi, logpi, want_log, k1, k2, tot, u_cols, u_ncols):
    """``pi[j] = softmax(logits of problem rows[j])`` for ``j < len(rows)`` (and ``logpi`` when
    ``want_log``); ``lg``, ``k1``, ``k2`` are scratch of ``pi``'s size, ``tot`` of ``rows``'. The
    exponentials of all rows go through :func:`exp_nonpositive` in one pass; U's rows are read
    through their column lists when ``u_ncols`` has U's length (:func:`_logits_row`)."""
    m = rows.shape[0]
    S = L0.shape[1]
    for j in range(m):
        i = rows[j]
        _logits_row(L0, Z, beta, V, U, i, i if use_u else -1, bs, vs, us, lg[j], u_cols, u_ncols)
        mx = _row_max(lg[j])
        for s in range(S):
            lg[j, s] -= mx
    exp_nonpositive(lg[:m].reshape(-1), pi[:m].reshape(-1), k1[:m * S], k2[:m * S])
    _row_sums(pi, m, tot)
    for j in range(m):
        inv = 1.0 / tot[j]
        for s in range(S):
            pi[j, s] *= inv
        if want_log:
            lz = math.log(tot[j])
            for s in range(S):
                logpi[j, s] = lg[j, s] - lz


@njit(cache=True, error_model="numpy")
def _draw_direct(rng, pi_row, cdf, m, counts, touched, nt):
    """Add ``m`` categorical draws from ``pi_row`` to ``counts`` by inverse CDF.

    ``cdf`` is the running sum of ``pi_row`` in type order; each draw takes
    ``u ~ U(0, 1) * cdf[-1]`` and the first type with ``cdf[s] > u`` (never a type of
    probability 0: when rounding leaves no such type, the last type of positive probability).
    Types drawn for the first time are appended to ``touched[nt:]``; returns the new length.
    Consumes exactly ``m`` uniforms.
    """
    S = pi_row.shape[0]
    acc = cdf[S - 1]
    for _ in range(m):
        u = rng.random() * acc
        lo = 0
        hi = S - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if cdf[mid] > u:
                hi = mid
            else:
                lo = mid + 1
        if lo == S - 1 and not cdf[lo] > u:
            while lo > 0 and not pi_row[lo] > 0.0:
                lo -= 1
        if counts[lo] == 0:
            touched[nt] = lo
            nt += 1
        counts[lo] += 1
    return nt


@njit(cache=True, error_model="numpy")
def _multinomial(rng, pi, order, idx, n, out):
    """:func:`_multinomial_into` with its own scratch."""
    _multinomial_into(rng, pi, order, idx, n, out, np.empty(pi.shape))


@njit(cache=True, error_model="numpy")
def _multinomial_into(rng, pi, order, idx, n, out, tail):
    """Counts of ``n`` draws from each row of ``pi`` as conditional binomials.

    Row b visits its response types in the fixed order ``order[idx[b]]`` (the
    problem's types by decreasing base probability), position-major over the rows,
    the order the NumPy twin uses:
    ``c_(j) ~ Binomial(n - sum_{l<j} c_(l), pi_(j) / sum_{l>=j} pi_(l))``.
    Any fixed order gives exact multinomial counts; visiting likely types first
    means a row's draws are used up after a few binomials, after which no more
    random numbers are consumed. ``tail`` (``pi``'s shape) is scratch for the tail sums
    ``sum_{l>=j} pi_(l)``, each row added from its end, four rows at once.
    """
    B, S = pi.shape
    out[:, :] = 0
    rem = np.full(B, n, dtype=np.int64)
    b = 0
    while b + 4 <= B:
        o0, o1, o2, o3 = order[idx[b]], order[idx[b + 1]], order[idx[b + 2]], order[idx[b + 3]]
        a0 = a1 = a2 = a3 = 0.0
        for j in range(S - 1, -1, -1):
            a0 += pi[b, o0[j]]
            a1 += pi[b + 1, o1[j]]
            a2 += pi[b + 2, o2[j]]
            a3 += pi[b + 3, o3[j]]
            tail[b, j] = a0
            tail[b + 1, j] = a1
            tail[b + 2, j] = a2
            tail[b + 3, j] = a3
        b += 4
    while b < B:
        acc = 0.0
        for j in range(S - 1, -1, -1):
            acc += pi[b, order[idx[b], j]]
            tail[b, j] = acc
        b += 1
    active = B
    for j in range(S - 1):
        if active == 0:
            break
        for b in range(B):
            if rem[b] == 0:
                continue
            s = order[idx[b], j]
            q = pi[b, s] / tail[b, j] if tail[b, j] > 0.0 else 0.0
            q = min(max(q, 0.0), 1.0)
            c = rng.binomial(rem[b], q)
            out[b, s] = c
            rem[b] -= c
            if rem[b] == 0:
                active -= 1
    for b in range(B):
        out[b, order[idx[b], S - 1]] += rem[b]


@njit(cache=True, error_model="numpy")
def sample_counts(rng, pi, order, idx, n, out, touched, n_touched, work):
    """``out[b] ~ Multinomial(n, pi[b])`` for every row b of the batch.

    :func:`draws_directly` (``n <= min(DIRECT_MAX_N, S / 2)``): row by row, ``n`` inverse-CDF
    draws each (:func:`_draw_direct`); otherwise conditional binomials (:func:`_multinomial_into`).
    ``touched[b, :n_touched[b]]`` lists the types with ``out[b, s] > 0`` in increasing order; ``work`` (``pi``'s
    shape) is scratch space.
    """
    B, S = pi.shape
    if draws_directly(n, S):
        _row_cumsums(pi, B, work)
        for b in range(B):
            for s in range(S):
                out[b, s] = 0
            nt = _draw_direct(rng, pi[b], work[b], n, out[b], touched[b], 0)
            for k in range(1, nt):  # insertion sort: the drawn types in increasing order
                v = touched[b, k]
                j = k - 1
                while j >= 0 and touched[b, j] > v:
                    touched[b, j + 1] = touched[b, j]
                    j -= 1
                touched[b, j + 1] = v
            n_touched[b] = nt
    else:
        _multinomial_into(rng, pi, order, idx, n, out, work)
        for b in range(B):
            k = 0
            for s in range(S):
                if out[b, s] > 0:
                    touched[b, k] = s
                    k += 1
            n_touched[b] = k


@njit(cache=True, error_model="numpy")
def advantage(r, c_tot, n_est, adv, std_eps):
    """Advantage of a rollout with reward ``r`` in a group with ``c_tot`` correct of ``n_est``."""
    rbar = c_tot / n_est
    if adv == ADV_GRPO:
        return (r - rbar) / (math.sqrt(rbar * (1.0 - rbar)) + std_eps)
    if adv == ADV_DRGRPO:
        return r - rbar
    return r - (c_tot - r) / (n_est - 1)


@njit(cache=True, error_model="numpy")
def _group_grad(pi, counts, wins, n, n_est, c_tot, adv, std_eps, out):
    """Logit gradient of one group: ``(1/n) sum_s (k_s A(1) + (c_s - k_s) A(0)) (e_s - pi)``
    (``wins``: the successes ``k_s`` among the ``counts`` ``c_s``)."""
    S = pi.shape[0]
    a1 = advantage(1.0, c_tot, n_est, adv, std_eps)
    a0 = advantage(0.0, c_tot, n_est, adv, std_eps)
    wsum = 0.0
    for s in range(S):
        out[s] = (wins[s] * a1 + (counts[s] - wins[s]) * a0) / n
        wsum += out[s]
    for s in range(S):
        out[s] -= pi[s] * wsum


@njit(cache=True, error_model="numpy")
def _sigmoid(x):
    """``1 / (1 + e^-x)``, exactly 1 at ``x = +inf``."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    ex = math.exp(x)
    return ex / (1.0 + ex)


@njit(cache=True, error_model="numpy")
def _draw_wins(rng, counts, y, e, wins, has_exec, touched, nt, clear):
    """Successes ``k_s`` of the ``c_s`` rollouts of each drawn type of one group (``touched[:nt]``,
    in increasing type order): ``Binomial(c_s, e)`` for the correct types in that order (with
    execution noise), else ``c_s Y_s``. ``wins`` is written at the drawn types only, and zeroed
    elsewhere with ``clear``."""
    if clear:
        for s in range(counts.shape[0]):
            wins[s] = 0
    for k in range(nt):
        s = touched[k]
        wins[s] = 0
        if y[s] > 0.0:
            wins[s] = rng.binomial(counts[s], e) if has_exec else counts[s]


@njit(cache=True, error_model="numpy")
def _adam_dense(x, m, v, g, lr, b1, b2, eps, wd, t, opt):
    """One Adam / AdamW step (``opt``) of ``x`` with moments ``m``, ``v`` at step ``t``.

    A moment that decays below ``MOMENT_FLOOR`` (a coordinate that has had no gradient for
    thousands of steps) is set to 0 instead of becoming a subnormal number, on which x86
    arithmetic is about a hundred times slower; its step ``lr m / (sqrt(v) + eps)`` is then
    below 1e-290 either way.
    """
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    for j in range(x.shape[0]):
        _adam_coordinate(x, m, v, j, g[j], lr, b1, b2, eps, wd, bc1, bc2, opt)


@njit(cache=True, error_model="numpy", inline="always")
def _adam_coordinate(x, m, v, j, gj, lr, b1, b2, eps, wd, bc1, bc2, opt):
    """Coordinate j of an Adam / AdamW step with gradient ``gj`` and bias corrections ``bc1``, ``bc2``."""
    if opt == OPT_ADAM and wd > 0.0:
        gj -= wd * x[j]
    if opt == OPT_ADAMW and wd > 0.0:
        x[j] -= lr * wd * x[j]
    mj = b1 * m[j] + (1.0 - b1) * gj
    vj = b2 * v[j] + (1.0 - b2) * gj * gj
    if abs(mj) < MOMENT_FLOOR:
        mj = 0.0
    if vj < MOMENT_FLOOR:
        vj = 0.0
    m[j] = mj
    v[j] = vj
    x[j] += lr * (mj / bc1) / (math.sqrt(vj / bc2) + eps)


@njit(cache=True, error_model="numpy")
def _sgd_dense(x, g, lr, wd):
    for j in range(x.shape[0]):
        x[j] += lr * (g[j] - wd * x[j])


@njit(cache=True, error_model="numpy")
def train_steps(rng, data, state, fpar, ipar, step0, n_steps):
    """Run ``n_steps`` GRPO steps from global step ``step0``, updating ``state`` in place.

    Parameters
    ----------
    rng : numpy.random.Generator
        The training noise: batch order (epoch shuffles) and rollout counts, drawn in a
        fixed order that the NumPy twin repeats.
    data : TrainData
        The training problems (read only).
    state : TrainState
        Parameters, optimiser moments, epoch permutation and counters (updated in place).
    fpar : float64 array
        Float hyper-parameters, indexed by the ``F_*`` constants.
    ipar : int64 array
        Integer hyper-parameters, indexed by the ``I_*`` constants.
    step0 : int
        Global index of the first step (sets the warm-up factor ``(t + 1) / warmup``).
    n_steps : int
        Number of steps to run.
    """
    L0, Z, Y, order, lengths, mask, E0 = data
    (beta, V, U, m_beta, v_beta, m_V, v_V, m_U, v_U, t_U, alpha, m_alpha, v_alpha, perm, cursor, counters,
     u_cols, u_ncols, u_on) = state
    D, S = L0.shape
    r = Z.shape[1]
    n = ipar[I_N]
    n_est = ipar[I_NEST]
    Bp = ipar[I_BP]
    adv = ipar[I_ADV]
    opt = ipar[I_OPT]
    zfilter = ipar[I_FILTER]
    warmup = ipar[I_WARMUP]
    bs = fpar[F_BS]
    vs = fpar[F_VS]
    us = fpar[F_US]
    kl = fpar[F_KL]
    ent = fpar[F_ENT]
    std_eps = fpar[F_STD_EPS]
    b1 = fpar[F_B1]
    b2 = fpar[F_B2]
    aeps = fpar[F_AEPS]
    wd = fpar[F_WD]
    drift = fpar[F_DRIFT]
    # without a decoupled baseline every registered advantage sums to zero over the group, so
    # the -pi * sum_s c_s A_s term of the logit gradient vanishes: only drawn types are non-zero
    dense = n_est > n or kl > 0.0 or ent > 0.0
    has_exec = False
    for i in range(D):
        if E0[i] < np.inf:
            has_exec = True
            break
    learn_exec = has_exec and us > 0.0
    kt = np.zeros((Bp, S), dtype=np.int64)
    ke = np.zeros((Bp, S), dtype=np.int64)
    eb = np.ones(Bp)
    ga = np.zeros(Bp)
    ga1 = np.zeros(1)
    ma1 = np.zeros(1)
    va1 = np.zeros(1)
    xa1 = np.zeros(1)
    idx = np.empty(Bp, dtype=np.int64)
    seen = np.full(D, -1, dtype=np.int64)  # the step at which a row was last in the batch
    owner = np.empty(D, dtype=np.int64)  # its first position in that batch
    repeat = np.zeros(Bp, dtype=np.bool_)
    logits = np.empty(S)
    work = np.empty((Bp, S))
    tot = np.empty(Bp)
    pi = np.empty((Bp, S))
    logpi = np.empty((Bp, S))
    lg = np.empty((Bp, S))
    k1 = np.empty(Bp * S, dtype=np.int64)
    k2 = np.empty(Bp * S, dtype=np.int64)
    want_log = kl > 0.0 or ent > 0.0
    lref = np.empty(S)
    pref = np.empty(S)
    ct = np.zeros((Bp, S), dtype=np.int64)
    ce = np.zeros((Bp, S), dtype=np.int64)
    touched = np.empty((Bp, S), dtype=np.int64)
    n_touched = np.zeros(Bp, dtype=np.int64)
    touched_e = np.empty((Bp, S), dtype=np.int64)
    n_touched_e = np.zeros(Bp, dtype=np.int64)
    all_types = np.arange(S)
    G = np.zeros((Bp, S))
    gbeta = np.empty(S)
    gV = np.empty((r, S))
    beta_f = beta.reshape(-1)
    V_f = V.reshape(-1)
    gV_f = gV.reshape(-1)
    mV_f = m_V.reshape(-1)
    vV_f = v_V.reshape(-1)
    for t in range(step0, step0 + n_steps):
        lr = fpar[F_LR]
        if warmup > 0 and t + 1 < warmup:
            lr = lr * (t + 1) / warmup
        for b in range(Bp):
            if cursor[0] == D:
                rng.shuffle(perm)
                cursor[0] = 0
            idx[b] = perm[cursor[0]]
            cursor[0] += 1
        _policy_rows(L0, Z, beta, V, U, idx, True, bs, vs, us, lg, pi, logpi, want_log, k1, k2, tot, u_cols, u_ncols)
        sample_counts(rng, pi, order, idx, n, ct, touched, n_touched, work)
        if n_est > n:
            sample_counts(rng, pi, order, idx, n_est - n, ce, touched_e, n_touched_e, work)
        for b in range(Bp):
            i = idx[b]
            if has_exec:
                eb[b] = _sigmoid(E0[i] + us * alpha[i])
            _draw_wins(rng, ct[b], Y[i], eb[b], kt[b], has_exec, touched[b], n_touched[b], dense)
        if n_est > n:
            for b in range(Bp):
                _draw_wins(rng, ce[b], Y[idx[b]], eb[b], ke[b], has_exec, touched_e[b], n_touched_e[b], dense)
        # group advantages -> logit gradient of each group (G rows are zero outside touched types)
        informative = 0
        for b in range(Bp):
            i = idx[b]
            c_tot = 0.0
            for k in range(n_touched[b]):
                c_tot += kt[b, touched[b, k]]
            if n_est > n:
                for k in range(n_touched_e[b]):
                    c_tot += ke[b, touched_e[b, k]]
            counters[C_TOKENS] += n_est * lengths[i]
            counters[C_GROUPS] += 1.0
            zero_var = c_tot == 0.0 or c_tot == n_est
            if zero_var:
                counters[C_ZERO_VAR] += 1.0
            else:
                informative += 1
            if dense:
                _group_grad(pi[b], ct[b], kt[b], n, n_est, c_tot, adv, std_eps, G[b])
            else:
                a1 = advantage(1.0, c_tot, n_est, adv, std_eps)
                a0 = advantage(0.0, c_tot, n_est, adv, std_eps)
                for k in range(n_touched[b]):
                    s = touched[b, k]
                    G[b, s] = (kt[b, s] * a1 + (ct[b, s] - kt[b, s]) * a0) / n
            if learn_exec:
                a1 = advantage(1.0, c_tot, n_est, adv, std_eps)
                a0 = advantage(0.0, c_tot, n_est, adv, std_eps)
                wins = 0.0
                fails = 0.0
                for k in range(n_touched[b]):
                    s = touched[b, k]
                    if Y[i, s] > 0.0:
                        wins += kt[b, s]
                        fails += ct[b, s] - kt[b, s]
                ga[b] = (wins * a1 * (1.0 - eb[b]) - fails * a0 * eb[b]) / n
        denom = Bp
        if zfilter:
            denom = informative
            if informative == 0:
                if not dense:
                    for b in range(Bp):
                        for k in range(n_touched[b]):
                            G[b, touched[b, k]] = 0.0
                for b in range(Bp):
                    ga[b] = 0.0
                continue
        inv_denom = 1.0 / denom
        if learn_exec:
            for b in range(Bp):
                ga[b] *= inv_denom
        if dense:
            for b in range(Bp):
                for s in range(S):
                    G[b, s] *= inv_denom
        else:
            for b in range(Bp):
                for k in range(n_touched[b]):
                    G[b, touched[b, k]] *= inv_denom
        if kl > 0.0 or ent > 0.0:
            for b in range(Bp):
                i = idx[b]
                for s in range(S):
                    lref[s] = L0[i, s]
                _softmax_row(lref, pref, logits)  # logits reused as log ref
                kl_b = 0.0
                h_b = 0.0
                for s in range(S):
                    kl_b += pi[b, s] * (logpi[b, s] - logits[s])
                    h_b -= pi[b, s] * logpi[b, s]
                for s in range(S):
                    gkl = pi[b, s] * (logpi[b, s] - logits[s] - kl_b)
                    gh = -pi[b, s] * (logpi[b, s] + h_b)
                    G[b, s] += (-kl * gkl + ent * gh) / Bp
        # chain rule to the shared parameters, over the non-zero entries of G
        counters[C_ADAM_T] += 1.0
        tglob = counters[C_ADAM_T]
        if bs > 0.0 or (vs > 0.0 and r > 0):
            for s in range(S):
                gbeta[s] = 0.0
            for j in range(r * S):
                gV_f[j] = 0.0
            for b in range(Bp):
                i = idx[b]
                nb = S if dense else n_touched[b]
                cols = all_types if dense else touched[b]
                for k in range(nb):
                    s = cols[k]
                    g = G[b, s]
                    gbeta[s] += g
                    for q in range(r):
                        gV[q, s] += Z[i, q] * g
        if bs > 0.0:
            for s in range(S):
                gbeta[s] *= bs * mask[s]
            if opt == OPT_SGD:
                _sgd_dense(beta_f, gbeta, lr, wd)
            else:
                _adam_dense(beta_f, m_beta, v_beta, gbeta, lr, b1, b2, aeps, wd, tglob, opt)
        if vs > 0.0 and r > 0:
            for q in range(r):
                for s in range(S):
                    gV[q, s] *= vs * mask[s]
            if opt == OPT_SGD:
                _sgd_dense(V_f, gV_f, lr, wd)
            else:
                _adam_dense(V_f, mV_f, vV_f, gV_f, lr, b1, b2, aeps, wd, tglob, opt)
        if drift > 0.0:
            dstep = drift * lr
            for s in range(S):
                beta_f[s] += dstep * rng.standard_normal()
            for j in range(V_f.size):
                V_f[j] += dstep * rng.standard_normal()
        if us > 0.0:
            lr_u = lr / max(informative, 1) if fpar[F_USHARE] > 0.0 else lr
            # a problem may appear twice in a batch that straddles two epochs: fold its later
            # rows into its first one, so each row gets one optimiser step per batch
            for b in range(Bp):
                i = idx[b]
                if seen[i] != t:
                    seen[i] = t
                    owner[i] = b
                    repeat[b] = False
                else:
                    repeat[b] = True
                    o = owner[i]
                    nb = S if dense else n_touched[b]
                    cols = all_types if dense else touched[b]
                    for k in range(nb):
                        G[o, cols[k]] += G[b, cols[k]]
                    _list_columns(u_cols, u_ncols, u_on, i, G[o], us, mask, cols, nb)
                    ga[o] += ga[b]
            for b in range(Bp):
                if repeat[b]:
                    continue
                i = idx[b]
                nb = S if dense else n_touched[b]
                _list_columns(u_cols, u_ncols, u_on, i, G[b], us, mask, all_types if dense else touched[b], nb)
                if opt != OPT_SGD:
                    t_U[i] += 1
                _step_columns(U[i], m_U[i], v_U[i], G[b], us, mask, u_cols[i], u_ncols[i], lr_u, b1, b2, aeps, wd,
                              t_U[i], opt)
                if learn_exec:
                    ga1[0] = us * ga[b]
                    xa1[0] = alpha[i]
                    if opt == OPT_SGD:
                        _sgd_dense(xa1, ga1, lr_u, wd)
                    else:
                        ma1[0] = m_alpha[i]
                        va1[0] = v_alpha[i]
                        _adam_dense(xa1, ma1, va1, ga1, lr_u, b1, b2, aeps, wd, t_U[i], opt)
                        m_alpha[i] = ma1[0]
                        v_alpha[i] = va1[0]
                    alpha[i] = xa1[0]
            for b in range(Bp):
                ga[b] = 0.0
        # leave G zero for the next step (a folded row's columns in its first row's too)
        if dense:
            G[:, :] = 0.0
        else:
            for b in range(Bp):
                for k in range(n_touched[b]):
                    G[b, touched[b, k]] = 0.0
                if us > 0.0 and repeat[b]:
                    o = owner[idx[b]]
                    for k in range(n_touched[b]):
                        G[o, touched[b, k]] = 0.0


@njit(cache=True, error_model="numpy")
def _list_columns(u_cols, u_ncols, u_on, i, G_row, us, mask, cols, nb):
    """Add to row i's list each column ``s`` of ``cols[:nb]`` whose gradient ``us * G_row[s] * mask[s]``
    is not zero and that is not listed yet."""
    for k in range(nb):
        s = cols[k]
        if us * G_row[s] * mask[s] != 0.0 and not u_on[i, s]:
            u_on[i, s] = True
            u_cols[i, u_ncols[i]] = s
            u_ncols[i] += 1


@njit(cache=True, error_model="numpy")
def _step_columns(x, m, v, G_row, us, mask, cols, ncols, lr, b1, b2, eps, wd, t, opt):
    """The optimiser step of one row of U on its listed columns ``cols[:ncols]``, gradient
    ``us * G_row[s] * mask[s]``: coordinate for coordinate what :func:`_adam_dense` (or
    :func:`_sgd_dense`) does to the whole row, whose other columns it leaves at zero."""
    if opt == OPT_SGD:
        for c in range(ncols):
            s = cols[c]
            x[s] += lr * (us * G_row[s] * mask[s] - wd * x[s])
        return
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    for c in range(ncols):
        s = cols[c]
        _adam_coordinate(x, m, v, s, us * G_row[s] * mask[s], lr, b1, b2, eps, wd, bc1, bc2, opt)


@njit(cache=True, error_model="numpy")
def evaluate(L0, logref, Z, Y, E0, beta, V, U, alpha, use_u, bs, vs, us, p_out, h_out, kl_out):
    """Exact pass rate ``p_i = e_i sum_s pi_is Y_is``, entropy ``H(pi_i)`` and ``KL(pi_i || ref_i)``
    (over response types) of every problem i (``logref``: the reference policy's log-probabilities,
    ``log softmax(L0)``; ``E0``: the execution logits, ``e_i = sigmoid(E0_i + us alpha_i)``;
    ``use_u``: include the per-problem offsets ``U`` and ``alpha``, which only training problems have)."""
    N, S = L0.shape
    blk = 64
    lg = np.empty((blk, S))
    pi = np.empty((blk, S))
    logpi = np.empty((blk, S))
    k1 = np.empty(blk * S, dtype=np.int64)
    k2 = np.empty(blk * S, dtype=np.int64)
    rows = np.arange(N)
    tot = np.empty(blk)
    no_cols = np.zeros((0, S), dtype=np.int32)
    no_count = np.zeros(0, dtype=np.int64)
    for i0 in range(0, N, blk):
        m = min(blk, N - i0)
        _policy_rows(L0, Z, beta, V, U, rows[i0:i0 + m], use_u, bs, vs, us, lg, pi, logpi, True, k1, k2, tot,
                     no_cols, no_count)
        for j in range(m):
            i = i0 + j
            p = 0.0
            h = 0.0
            kl = 0.0
            for s in range(S):
                p += pi[j, s] * Y[i, s]
                h -= pi[j, s] * logpi[j, s]
                kl += pi[j, s] * (logpi[j, s] - logref[i, s])
            if E0[i] < np.inf:
                p *= _sigmoid(E0[i] + us * alpha[i]) if use_u else _sigmoid(E0[i])
            p_out[i] = min(max(p, 0.0), 1.0)
            h_out[i] = max(h, 0.0)
            kl_out[i] = max(kl, 0.0)
