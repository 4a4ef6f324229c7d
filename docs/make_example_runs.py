"""Write docs/example_runs.csv: synthetic RL logs whose n*(C) follows a known sigmoid.

Each n = 2^3 ... 2^10 has a ScaleRL reward curve R_n(C) = R0 + D_n / (1 + (C_mid,n / C)^B).
The C_mid,n grow with n and the D_n are chosen so that consecutive curves cross where the
true law log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b passes log2 n + 1/2; n = 1024
never overtakes n = 512, so n* saturates. Two seeds per n (B_problem = 32) log avg@4 with
Gaussian noise every few steps up to 1e7 rollouts.

    python docs/make_example_runs.py [OUT.csv]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit

TRUE_LAW = {"L": 6.09, "k": 4.75, "log10_C0": 5.84, "b": 2.73}
LOG2_N = np.arange(3, 11)
B_PROBLEM = 32
R0, B, D_FIRST, MID_LEAD = 0.30, 2.0, 0.10, 0.3
C_MAX, EVALS, NOISE, SEEDS = 1e7, 150, 0.004, (0, 1)


def true_log2_n_star(log10_C):
    L, k, x0, b = TRUE_LAW.values()
    return L * expit(k * (np.asarray(log10_C) - x0)) + b


def crossing(j: float) -> float:
    """log10 C where the true law equals j + 1/2."""
    L, k, x0, b = TRUE_LAW.values()
    frac = (j + 0.5 - b) / L
    return x0 + np.log(frac / (1 - frac)) / k


def curves() -> tuple[np.ndarray, np.ndarray]:
    """(log10 C_mid, D) per n: n_j and n_j+1 cross where the law passes log2 n_j + 1/2."""
    top = TRUE_LAW["L"] + TRUE_LAW["b"]
    cross = np.array([crossing(j) if j + 0.5 < top else np.nan for j in LOG2_N])
    last = int(np.flatnonzero(~np.isnan(cross))[-1])
    cross[last + 1:] = cross[last] + 0.2 * np.arange(1, LOG2_N.size - last)
    log_mid = cross - MID_LEAD
    amp = [D_FIRST]
    for j in range(1, LOG2_N.size):
        if j - 1 > last:
            amp.append(amp[-1] * 0.99)
            continue
        s_prev = expit(B * np.log(10) * (cross[j - 1] - log_mid[j - 1]))
        s_next = expit(B * np.log(10) * (cross[j - 1] - log_mid[j]))
        amp.append(amp[-1] * s_prev / s_next)
    return log_mid, np.array(amp)


def make_runs(seed: int = 2026) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    log_mid, amp = curves()
    rows = []
    for j, log2_n in enumerate(LOG2_N):
        n = int(2**log2_n)
        last_step = int(C_MAX // (n * B_PROBLEM))
        every = max(1, last_step // EVALS)
        steps = np.arange(every, last_step + 1, every)
        log_c = np.log10(steps * n * B_PROBLEM)
        mean = R0 + amp[j] * expit(B * np.log(10) * (log_c - log_mid[j]))
        for s in SEEDS:
            noisy = mean + rng.normal(0.0, NOISE, size=steps.size)
            for step, value in zip(steps, noisy):
                rows.append((f"n{n}-s{s}", n, B_PROBLEM, int(step), round(float(value), 5)))
    return pd.DataFrame(rows, columns=["run", "n", "B_problem", "step", "avg@4"])


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else Path(__file__).with_name("example_runs.csv")
    df = make_runs()
    df.to_csv(out, index=False)
    print(f"wrote {len(df)} evaluations of {df['run'].nunique()} runs to {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
