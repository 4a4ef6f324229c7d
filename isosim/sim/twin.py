"""Plain NumPy twins of :mod:`isosim.sim.kernels`, vectorised over the batch.

Same arguments, same math, same random draws in the same order; used by the tests
(kernel == twin) and by ``isosim bench`` (the speed-up of the Numba kernel).
"""
from __future__ import annotations

import numpy as np

from .kernels import (
    ADV_DRGRPO,
    ADV_GRPO,
    C_ADAM_T,
    C_GROUPS,
    C_TOKENS,
    C_ZERO_VAR,
    DIRECT_MAX_N,
    F_AEPS,
    F_B1,
    F_B2,
    F_BS,
    F_DRIFT,
    F_ENT,
    F_KL,
    F_LR,
    F_STD_EPS,
    F_US,
    F_USHARE,
    F_VS,
    F_WD,
    I_ADV,
    I_BP,
    I_FILTER,
    I_N,
    I_NEST,
    I_OPT,
    I_WARMUP,
    OPT_ADAM,
    OPT_ADAMW,
    OPT_SGD,
)


def _softmax(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mx = logits.max(axis=1, keepdims=True)
    w = np.exp(logits - mx)
    tot = w.sum(axis=1, keepdims=True)
    return w / tot, logits - (mx + np.log(tot))


def multinomial(rng: np.random.Generator, pi: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """Multinomial counts of each row of ``pi``, visiting types in ``order`` (rows aligned)."""
    B, S = pi.shape
    ps = np.take_along_axis(pi, order, axis=1)
    tail = np.cumsum(ps[:, ::-1], axis=1)[:, ::-1]
    q = np.clip(np.divide(ps, tail, out=np.zeros_like(ps), where=tail > 0), 0.0, 1.0)
    sorted_counts = np.zeros((B, S), dtype=np.int64)
    rem = np.full(B, n, dtype=np.int64)
    for j in range(S - 1):
        if not rem.any():
            break
        sorted_counts[:, j] = rng.binomial(rem, q[:, j])
        rem -= sorted_counts[:, j]
    sorted_counts[:, S - 1] += rem
    out = np.empty_like(sorted_counts)
    np.put_along_axis(out, order, sorted_counts, axis=1)
    return out


def draw_direct(rng: np.random.Generator, pi: np.ndarray, m: int) -> np.ndarray:
    """Counts of ``m`` inverse-CDF draws from each row of ``pi``: ``u * cdf[-1]`` with
    ``u ~ U(0, 1)``, the first type whose running sum exceeds it (rows in turn)."""
    B, S = pi.shape
    cdf = np.cumsum(pi, axis=1)
    u = rng.random((B, m)) * cdf[:, -1:]
    pos = (cdf[:, None, :] <= u[:, :, None]).sum(axis=2)
    last = S - 1 - np.argmax(pi[:, ::-1] > 0, axis=1)
    pos = np.minimum(pos, last[:, None])
    out = np.zeros((B, S), dtype=np.int64)
    np.add.at(out, (np.repeat(np.arange(B), m), pos.reshape(-1)), 1)
    return out


def sample_counts(rng: np.random.Generator, pi: np.ndarray, order: np.ndarray, n: int) -> np.ndarray:
    """Multinomial counts: inverse CDF for ``n <= min(DIRECT_MAX_N, S / 2)``, conditional binomials
    otherwise."""
    direct = n <= DIRECT_MAX_N and 2 * n <= pi.shape[1]
    return draw_direct(rng, pi, n) if direct else multinomial(rng, pi, order, n)


def _adam(x, m, v, g, lr, b1, b2, eps, wd, t, opt):
    if opt == OPT_ADAM and wd > 0:
        g = g - wd * x
    if opt == OPT_ADAMW and wd > 0:
        x -= lr * wd * x
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    t = np.asarray(t, float)
    bc1 = 1 - b1**t
    bc2 = 1 - b2**t
    x += lr * (m / bc1) / (np.sqrt(v / bc2) + eps)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))


def draw_wins(rng: np.random.Generator, counts: np.ndarray, y: np.ndarray, e: np.ndarray, has_exec: bool) -> np.ndarray:
    """Successes among the counts: ``Binomial(c_s, e_b)`` for the correct types with counts,
    row by row in increasing type order (with execution noise), else ``c_s Y_s``."""
    wins = np.where(y > 0, counts, 0)
    if has_exec:
        sel = (counts > 0) & (y > 0)
        wins = np.zeros_like(counts)
        wins[sel] = rng.binomial(counts[sel], np.broadcast_to(e[:, None], counts.shape)[sel])
    return wins


def train_steps(rng, data, state, fpar, ipar, step0, n_steps):
    """The twin of :func:`isosim.sim.kernels.train_steps` (same arguments, same draws)."""
    L0, Z, Y, order, lengths, mask, E0 = data
    beta, V, U, m_beta, v_beta, m_V, v_V, m_U, v_U, t_U, alpha, m_alpha, v_alpha, perm, cursor, counters = state[:16]
    has_exec = bool(np.any(E0 < np.inf))
    D, S = L0.shape
    n, n_est, Bp = int(ipar[I_N]), int(ipar[I_NEST]), int(ipar[I_BP])
    adv, opt, zfilter, warmup = ipar[I_ADV], ipar[I_OPT], ipar[I_FILTER], ipar[I_WARMUP]
    bs, vs, us, kl, ent = fpar[F_BS], fpar[F_VS], fpar[F_US], fpar[F_KL], fpar[F_ENT]
    b1, b2, aeps, wd = fpar[F_B1], fpar[F_B2], fpar[F_AEPS], fpar[F_WD]
    for t in range(step0, step0 + n_steps):
        lr = fpar[F_LR] * ((t + 1) / warmup if warmup > 0 and t + 1 < warmup else 1.0)
        idx = np.empty(Bp, dtype=np.int64)
        for b in range(Bp):
            if cursor[0] == D:
                rng.shuffle(perm)
                cursor[0] = 0
            idx[b] = perm[cursor[0]]
            cursor[0] += 1
        logits = L0[idx] + bs * beta[None, :] + vs * (Z[idx] @ V) + us * U[idx]
        pi, logpi = _softmax(logits)
        ct = sample_counts(rng, pi, order[idx], n)
        ce = sample_counts(rng, pi, order[idx], n_est - n) if n_est > n else np.zeros_like(ct)
        y = Y[idx]
        e = _sigmoid(E0[idx] + us * alpha[idx]) if has_exec else np.ones(Bp)
        kt = draw_wins(rng, ct, y, e, has_exec)
        ke = draw_wins(rng, ce, y, e, has_exec) if n_est > n else np.zeros_like(ct)
        c_tot = (kt + ke).sum(axis=1)
        counters[C_TOKENS] += float(np.sum(n_est * lengths[idx]))
        counters[C_GROUPS] += Bp
        zero_var = (c_tot == 0) | (c_tot == n_est)
        counters[C_ZERO_VAR] += zero_var.sum()
        rbar = (c_tot / n_est)[:, None]
        if adv == ADV_GRPO:
            a1, a0 = (1 - rbar) / (np.sqrt(rbar * (1 - rbar)) + fpar[F_STD_EPS]), (0 - rbar) / (np.sqrt(rbar * (1 - rbar)) + fpar[F_STD_EPS])
        elif adv == ADV_DRGRPO:
            a1, a0 = 1 - rbar, 0 - rbar
        else:
            a1, a0 = 1 - (c_tot[:, None] - 1) / (n_est - 1), 0 - c_tot[:, None] / (n_est - 1)
        G = (kt * a1 + (ct - kt) * a0) / n
        learn_exec = has_exec and us > 0
        if learn_exec:
            wins = (kt * (y > 0)).sum(axis=1)
            fails = ((ct - kt) * (y > 0)).sum(axis=1)
            ga = (wins * a1[:, 0] * (1 - e) - fails * a0[:, 0] * e) / n
        if n_est > n or kl > 0 or ent > 0:  # otherwise sum_s c_s A_s = 0 and the pi term vanishes
            G -= pi * G.sum(axis=1, keepdims=True)
        denom = Bp
        if zfilter:
            denom = int((~zero_var).sum())
            if denom == 0:
                continue
        G /= denom
        if learn_exec:
            ga = ga * (1.0 / denom)
        if kl > 0 or ent > 0:
            _, logref = _softmax(L0[idx])
            klv = (pi * (logpi - logref)).sum(axis=1, keepdims=True)
            h = -(pi * logpi).sum(axis=1, keepdims=True)
            G += (-kl * pi * (logpi - logref - klv) + ent * (-pi * (logpi + h))) / Bp
        counters[C_ADAM_T] += 1
        tglob = counters[C_ADAM_T]
        if bs > 0:
            gb = bs * G.sum(axis=0) * mask
            if opt == OPT_SGD:
                beta += lr * (gb - wd * beta)
            else:
                _adam(beta, m_beta, v_beta, gb, lr, b1, b2, aeps, wd, tglob, opt)
        if vs > 0 and Z.shape[1] > 0:
            gv = vs * (Z[idx].T @ G) * mask[None, :]
            if opt == OPT_SGD:
                V += lr * (gv - wd * V)
            else:
                _adam(V, m_V, v_V, gv, lr, b1, b2, aeps, wd, tglob, opt)
        if fpar[F_DRIFT] > 0:
            beta += fpar[F_DRIFT] * lr * rng.standard_normal(beta.shape)
            V += fpar[F_DRIFT] * lr * rng.standard_normal(V.shape)
        if us > 0:
            lr_u = lr / max(int((~zero_var).sum()), 1) if fpar[F_USHARE] > 0 else lr
            rows, inv = np.unique(idx, return_inverse=True)
            gu = np.zeros((len(rows), S))
            np.add.at(gu, inv, G)
            gu *= us * mask[None, :]
            if opt == OPT_SGD:
                U[rows] += lr_u * (gu - wd * U[rows])
            else:
                t_U[rows] += 1
                x, m, v = U[rows], m_U[rows], v_U[rows]
                _adam(x, m, v, gu, lr_u, b1, b2, aeps, wd, t_U[rows][:, None], opt)
                U[rows], m_U[rows], v_U[rows] = x, m, v
            if learn_exec:
                gal = np.zeros(len(rows))
                np.add.at(gal, inv, ga)
                gal *= us
                if opt == OPT_SGD:
                    alpha[rows] += lr_u * (gal - wd * alpha[rows])
                else:
                    x, m, v = alpha[rows], m_alpha[rows], v_alpha[rows]
                    _adam(x, m, v, gal, lr_u, b1, b2, aeps, wd, t_U[rows], opt)
                    alpha[rows], m_alpha[rows], v_alpha[rows] = x, m, v


def evaluate(L0, logref, Z, Y, E0, beta, V, U, alpha, use_u, bs, vs, us, p_out, h_out, kl_out):
    logits = L0 + bs * beta[None, :] + vs * (Z @ V)
    if use_u:
        logits = logits + us * U
    pi, logpi = _softmax(logits)
    p = (pi * Y).sum(axis=1)
    finite = E0 < np.inf
    if finite.any():
        a = E0 + us * alpha if use_u else E0
        p = np.where(finite, p * _sigmoid(np.where(finite, a, 0.0)), p)
    p_out[:] = np.clip(p, 0, 1)
    h_out[:] = np.maximum(-(pi * logpi).sum(axis=1), 0)
    kl_out[:] = np.maximum((pi * (logpi - logref)).sum(axis=1), 0)
