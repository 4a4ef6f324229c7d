"""Numba kernels: the GRPO training loop and the exact evaluation of a policy.

Policy of problem i (see :mod:`isosim.sim.models`)::

    logits_i = L0_i + bs * beta + vs * z_i V + us * u_i,   pi_i = softmax(logits_i)

One step, for each of the B_problem problems of the batch:

* counts ``c ~ Multinomial(n, pi_i)`` drawn as conditional binomials (see
  :func:`_multinomial`), so a step costs O(B_problem * S) whatever n is;
  with a decoupled baseline ``n_est - n`` more rollouts are drawn for the baseline;
* rewards ``r_s = Y[i, s]``, group mean ``rbar = c_correct / n_est`` and advantages
  ``A_s = (r_s - rbar) / (std + eps)`` (grpo), ``r_s - rbar`` (drgrpo) or
  ``r_s - (c_correct - r_s) / (n_est - 1)`` (rloo);
* logit gradient ``g_i = (1 / n) sum_s c_s A_s (e_s - pi_i)`` averaged over the
  groups of the batch (over the non-zero-variance ones with the filter), plus
  ``-kl * grad KL(pi_i || ref_i) + ent * grad H(pi_i)``;
* chain rule to ``beta``, ``V``, ``u`` and an SGD / Adam / AdamW ascent step;
  ``u`` rows use lazy Adam (a row's moments move only when its problem is sampled).

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



class TrainData(NamedTuple):
    """The training problems as the kernel reads them (never written; one row per problem)."""

    base_logits: np.ndarray  # (D, S) float64: L0_i, the reference policy's logits
    features: np.ndarray  # (D, r) float64: z_i, the embedding the shared V acts through (r may be 0)
    rewards: np.ndarray  # (D, S) float64 0/1: Y[i, s] = 1 if response type s solves problem i
    order: np.ndarray  # (D, S) int64: problem i's types by decreasing base probability (sampling order)
    lengths: np.ndarray  # (D,) float64: tokens of one response to problem i (compute in tokens)
    learn_mask: np.ndarray  # (S,) float64: 1 for the types whose logits learn, 0 for fixed ones


class TrainState(NamedTuple):
    """The learned parameters, the optimiser state and the data order; updated in place.

    All parameters start at zero, which is the reference policy."""

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
    perm: np.ndarray  # (D,) int64: this epoch's order of the training problems
    cursor: np.ndarray  # (1,) int64: next position in perm; D starts a new epoch (reshuffle)
    counters: np.ndarray  # (4,) float64: C_TOKENS, C_ZERO_VAR, C_GROUPS, C_ADAM_T below


# indices into the float hyper-parameter vector fpar: learning rate (after the LR rule, before warm-up),
# the path scales of beta / V / U, the std epsilon, KL and entropy coefficients, Adam's beta1, beta2, eps,
# and the weight decay
F_LR, F_BS, F_VS, F_US, F_STD_EPS, F_KL, F_ENT, F_B1, F_B2, F_AEPS, F_WD = range(11)
# indices into the integer hyper-parameter vector ipar: n (rollouts in the update), n_est (rollouts in
# the baseline, >= n), B_problem, the advantage's code, the optimiser's code, the zero-variance filter
# (0/1) and the warm-up steps
I_N, I_NEST, I_BP, I_ADV, I_OPT, I_FILTER, I_WARMUP = range(7)
# indices into TrainState.counters: tokens sampled, groups with zero reward variance, groups, global
# Adam step (the optimiser step count of the shared parameters)
C_TOKENS, C_ZERO_VAR, C_GROUPS, C_ADAM_T = range(4)


@njit(cache=True, error_model="numpy")
def _logits_row(L0, Z, beta, V, U, i, urow, bs, vs, us, out):
    S = L0.shape[1]
    r = Z.shape[1]
    for s in range(S):
        acc = 0.0
        for k in range(r):
            acc += Z[i, k] * V[k, s]
        x = L0[i, s] + bs * beta[s] + vs * acc
        if urow >= 0:
            x += us * U[urow, s]
        out[s] = x


@njit(cache=True, error_model="numpy")
def _softmax_row(logits, pi, logpi):
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
    for s in range(S):
        pi[s] = pi[s] / tot
        logpi[s] = logits[s] - lz


@njit(cache=True, error_model="numpy")
def _multinomial(rng, pi, order, idx, n, out):
    """Counts of ``n`` draws from each row of ``pi`` as conditional binomials.

    Row b visits its response types in the fixed order ``order[idx[b]]`` (the
    problem's types by decreasing base probability), position-major over the rows,
    the order the NumPy twin uses:
    ``c_(j) ~ Binomial(n - sum_{l<j} c_(l), pi_(j) / sum_{l>=j} pi_(l))``.
    Any fixed order gives exact multinomial counts; visiting likely types first
    means a row's draws are used up after a few binomials, after which no more
    random numbers are consumed.
    """
    B, S = pi.shape
    out[:, :] = 0
    rem = np.full(B, n, dtype=np.int64)
    tail = np.empty((B, S))
    for b in range(B):
        acc = 0.0
        for j in range(S - 1, -1, -1):
            acc += pi[b, order[idx[b], j]]
            tail[b, j] = acc
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
def advantage(r, c_tot, n_est, adv, std_eps):
    """Advantage of a rollout with reward ``r`` in a group with ``c_tot`` correct of ``n_est``."""
    rbar = c_tot / n_est
    if adv == ADV_GRPO:
        return (r - rbar) / (math.sqrt(rbar * (1.0 - rbar)) + std_eps)
    if adv == ADV_DRGRPO:
        return r - rbar
    return r - (c_tot - r) / (n_est - 1)


@njit(cache=True, error_model="numpy")
def _group_grad(pi, y, counts, n, n_est, c_tot, adv, std_eps, out):
    """Logit gradient of one group: ``(1/n) sum_s c_s A_s (e_s - pi)``."""
    S = pi.shape[0]
    wsum = 0.0
    for s in range(S):
        out[s] = counts[s] * advantage(y[s], c_tot, n_est, adv, std_eps) / n
        wsum += out[s]
    for s in range(S):
        out[s] -= pi[s] * wsum


@njit(cache=True, error_model="numpy")
def _adam_dense(x, m, v, g, lr, b1, b2, eps, wd, t, opt):
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    for j in range(x.shape[0]):
        gj = g[j]
        if opt == OPT_ADAM and wd > 0.0:
            gj -= wd * x[j]
        if opt == OPT_ADAMW and wd > 0.0:
            x[j] -= lr * wd * x[j]
        m[j] = b1 * m[j] + (1.0 - b1) * gj
        v[j] = b2 * v[j] + (1.0 - b2) * gj * gj
        x[j] += lr * (m[j] / bc1) / (math.sqrt(v[j] / bc2) + eps)


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
    L0, Z, Y, order, lengths, mask = data
    beta, V, U, m_beta, v_beta, m_V, v_V, m_U, v_U, t_U, perm, cursor, counters = state
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
    idx = np.empty(Bp, dtype=np.int64)
    seen = np.full(D, -1, dtype=np.int64)  # the step at which a row was last in the batch
    owner = np.empty(D, dtype=np.int64)  # its first position in that batch
    repeat = np.zeros(Bp, dtype=np.bool_)
    logits = np.empty(S)
    pi = np.empty((Bp, S))
    logpi = np.empty((Bp, S))
    lref = np.empty(S)
    pref = np.empty(S)
    ct = np.zeros((Bp, S), dtype=np.int64)
    ce = np.zeros((Bp, S), dtype=np.int64)
    G = np.empty((Bp, S))
    gbeta = np.empty(S)
    gV = np.empty((r, S))
    beta_f = beta.reshape(-1)
    V_f = V.reshape(-1)
    gV_f = gV.reshape(-1)
    mV_f = m_V.reshape(-1)
    vV_f = v_V.reshape(-1)
    b1 = fpar[F_B1]
    b2 = fpar[F_B2]
    aeps = fpar[F_AEPS]
    wd = fpar[F_WD]
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
        for b in range(Bp):
            _logits_row(L0, Z, beta, V, U, idx[b], idx[b], bs, vs, us, logits)
            _softmax_row(logits, pi[b], logpi[b])
        _multinomial(rng, pi, order, idx, n, ct)
        if n_est > n:
            _multinomial(rng, pi, order, idx, n_est - n, ce)
        # group advantages -> logit gradient of each group
        informative = 0
        for b in range(Bp):
            i = idx[b]
            c_tot = 0.0
            for s in range(S):
                c_tot += (ct[b, s] + ce[b, s]) * Y[i, s]
            counters[C_TOKENS] += n_est * lengths[i]
            counters[C_GROUPS] += 1.0
            zero_var = c_tot == 0.0 or c_tot == n_est
            if zero_var:
                counters[C_ZERO_VAR] += 1.0
            else:
                informative += 1
            _group_grad(pi[b], Y[i], ct[b], n, n_est, c_tot, adv, fpar[F_STD_EPS], G[b])
        denom = Bp
        if zfilter:
            denom = informative
            if informative == 0:
                continue
        for b in range(Bp):
            for s in range(S):
                G[b, s] /= denom
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
        # chain rule to the shared parameters
        counters[C_ADAM_T] += 1.0
        tglob = counters[C_ADAM_T]
        if bs > 0.0:
            for s in range(S):
                acc = 0.0
                for b in range(Bp):
                    acc += G[b, s]
                gbeta[s] = bs * acc * mask[s]
            if opt == OPT_SGD:
                _sgd_dense(beta_f, gbeta, lr, wd)
            else:
                _adam_dense(beta_f, m_beta, v_beta, gbeta, lr, b1, b2, aeps, wd, tglob, opt)
        if vs > 0.0 and r > 0:
            for k in range(r):
                for s in range(S):
                    acc = 0.0
                    for b in range(Bp):
                        acc += Z[idx[b], k] * G[b, s]
                    gV[k, s] = vs * acc * mask[s]
            if opt == OPT_SGD:
                _sgd_dense(V_f, gV_f, lr, wd)
            else:
                _adam_dense(V_f, mV_f, vV_f, gV_f, lr, b1, b2, aeps, wd, tglob, opt)
        if us > 0.0:
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
                    for s in range(S):
                        G[owner[i], s] += G[b, s]
            for b in range(Bp):
                if repeat[b]:
                    continue
                i = idx[b]
                for s in range(S):
                    gbeta[s] = us * G[b, s] * mask[s]
                if opt == OPT_SGD:
                    _sgd_dense(U[i], gbeta, lr, wd)
                else:
                    t_U[i] += 1
                    _adam_dense(U[i], m_U[i], v_U[i], gbeta, lr, b1, b2, aeps, wd, t_U[i], opt)


@njit(cache=True, error_model="numpy")
def evaluate(L0, Z, Y, beta, V, U, use_u, bs, vs, us, p_out, h_out, kl_out):
    """Exact pass rate, entropy and KL to the reference policy of every problem."""
    N, S = L0.shape
    logits = np.empty(S)
    pi = np.empty(S)
    logpi = np.empty(S)
    pref = np.empty(S)
    lref = np.empty(S)
    for i in range(N):
        _logits_row(L0, Z, beta, V, U, i, i if use_u else -1, bs, vs, us, logits)
        _softmax_row(logits, pi, logpi)
        for s in range(S):
            lref[s] = L0[i, s]
        _softmax_row(lref, pref, logits)
        p = 0.0
        h = 0.0
        kl = 0.0
        for s in range(S):
            p += pi[s] * Y[i, s]
            h -= pi[s] * logpi[s]
            kl += pi[s] * (logpi[s] - logits[s])
        p_out[i] = min(max(p, 0.0), 1.0)
        h_out[i] = max(h, 0.0)
        kl_out[i] = max(kl, 0.0)
