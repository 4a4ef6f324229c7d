"""Q2: with the total batch ``B = n * B_problem`` fixed, which split is best after M steps?

For every evaluated step count M, the best split is the (n, B_problem) whose mean reward
(over replicates) is highest (the raw arg-max :func:`isosim.analysis.n_star.n_star_raw`, with
its tie and edge rules); ``n*(M)`` and ``B_problem*(M)`` are then fitted with the study's
linear-M sigmoid ``log2 y = L / (1 + exp(-k (M - M0))) + b``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import IsosimInputError
from .fit import MLawFit, fit_m_law
from .n_star import n_star_raw


@dataclass(frozen=True)
class FixedBatchResult:
    table: pd.DataFrame  # M, n, B_problem, value
    n_star: MLawFit | None
    b_problem_star: MLawFit | None
    errors: dict


def best_split(evals: pd.DataFrame, metric: str = "avg@4", steps=None) -> pd.DataFrame:
    """Per step M (> 0; only ``steps`` if given): the (n, B_problem) with the highest mean ``metric``."""
    need = {"n", "B_problem", "step", metric}
    if not need <= set(evals.columns):
        raise IsosimInputError(f"Q2 analysis needs columns {', '.join(sorted(need))}")
    if (evals["n"] * evals["B_problem"]).nunique() != 1:
        raise IsosimInputError("Q2 analysis needs one total batch B = n * B_problem across runs")
    keep = evals["step"] > 0
    if steps is not None:
        keep &= evals["step"].isin(list(steps))
    cells = evals[keep].groupby(["n", "B_problem", "step"])[metric].mean().unstack("step")
    best = n_star_raw(cells, ["n", "B_problem"])
    return best.rename(columns={"compute": "M"})[["M", "n", "B_problem", "value"]]


def analyse_fixed_batch(evals: pd.DataFrame, metric: str = "avg@4", steps=None) -> FixedBatchResult:
    table = best_split(evals, metric, steps)
    fits, errors = {}, {}
    for col in ("n", "B_problem"):
        if table[col].nunique() < 2:
            errors[col] = f"{col}*(M) = {table[col].iloc[0]} at every M: nothing to fit"
            fits[col] = None
            continue
        try:
            fits[col] = fit_m_law(table["M"].to_numpy(float), np.log2(table[col].to_numpy(float)))
        except IsosimInputError as exc:
            errors[col], fits[col] = str(exc), None
    return FixedBatchResult(table, fits["n"], fits["B_problem"], errors)
