"""n*(C): the compute-optimal group at each compute C, under one tie rule and one edge rule.

A *group* is an allocation key: ``(n,)`` or ``(n, B_problem)``. With a value R_g(C) of a
reward metric for each group g at compute points C,

    n*(C) = argmax_{g in G(C)} R_g(C),      R*(C) = max_{g in G(C)} R_g(C),

where G(C) is the set of groups that have a value at C. Two versions differ only in where
R_g(C) comes from:

* :func:`n_star_raw` -- the *raw* arg-max: R_g(C) are given numbers (measured evaluations,
  best-so-far values, mean-field curves interpolated at grid points), one row per group and
  one column per C, NaN where g has no value at C.
* :func:`n_star_envelope` -- the *fitted* arg-max: R_g(C) is g's fitted ScaleRL curve
  (:class:`isosim.analysis.frontier.ScaleRLFit`), so R*(C) is the upper envelope
  max_g R_g(C) of the fitted curves and n*(C) the group on top of it.
  (:func:`isosim.analysis.frontier.compute_optimal` runs it from raw evaluations:
  record-breaking points, one curve per group, then this.)

On noiseless curves the two agree: the envelope of exact fits is the raw arg-max of the
curves themselves (tests/test_n_star.py).

**Tie rule.** Among groups with equal R_g(C) (equal floats), the smallest key wins, keys
compared lexicographically in group order: the smaller n, then the smaller B_problem. (The
rows are sorted by key and the first maximum is taken: what ``np.argmax`` and pandas
``idxmax`` on sorted rows give, and what every earlier caller did.)

**Edge rule.** A group competes at C only where it has a finite value there: for the raw
version, where the caller gives one (NaN, +-inf: no value); for the fitted version, where
C lies in the group's compute range [c_min, c_max] widened by ``slack_decades`` in log10 C
(a curve is never extrapolated further). Nothing is filled in: a group without a value at
C is left out at C, not scored 0 or held at a neighbouring value (callers that want a
held or interpolated value supply it: :func:`isosim.plan.predict.curve_at`, the best-so-far
values of :func:`isosim.lm.compare.n_star`). A point at which none competes is dropped from
the table. A point at which fewer than ``min_groups`` groups compete is dropped too, and
listed in the table's ``attrs["too_few_groups"]`` (one dict per point: compute, the number
of groups that competed, the key of the best of them). With the default ``min_groups=1`` a point at which a
single group competes has that group as n*. That lone winner is an artefact of coverage,
not a comparison: at the edges of the compute range, where one group's runs reach further
than the others' (one n evaluated earlier, or run longer), it "wins" unopposed. The
``isosim fit`` pipeline (:func:`isosim.analysis.fit.analyse_runs`) therefore asks for
``min_groups=2``; callers whose groups all cover every point (the planner's held
mean-field curves, the fixed-batch cells) keep the default.
"""
from __future__ import annotations

from typing import Hashable, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from ..errors import IsosimInputError

__all__ = ["FittedCurve", "argmax_rows", "best_key", "n_star_envelope", "n_star_raw"]


class FittedCurve(Protocol):
    """What :func:`n_star_envelope` reads of a fitted curve R_g(C) (a ScaleRL fit,
    :class:`isosim.analysis.frontier.ScaleRLFit`, is one): its value at compute values and the
    compute range ``[c_min, c_max]`` it was fitted on."""

    c_min: float
    c_max: float

    def predict(self, compute) -> np.ndarray: ...


def argmax_rows(values) -> tuple[np.ndarray, np.ndarray]:
    """Per column of a (groups, points) array: ``(best, ok)``, the row of the largest finite
    entry (the first such row on ties, so rows sorted by key give the tie rule) and whether
    the column has a finite entry at all (``best`` is 0 where it has none)."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise IsosimInputError(f"expected a (groups, points) array, got shape {v.shape}")
    finite = np.isfinite(v)
    ok = finite.any(axis=0)
    if v.shape[0] == 0:
        return np.zeros(v.shape[1], dtype=np.intp), ok
    return np.argmax(np.where(finite, v, -np.inf), axis=0), ok


def best_key(values: Mapping[Hashable, float]):
    """The key of ``values`` with the largest finite value, ties to the smallest key (None
    when no value is finite): n* at a single compute point."""
    keys = sorted(values)
    best, ok = argmax_rows(np.array([values[k] for k in keys], dtype=float).reshape(len(keys), 1))
    return keys[int(best[0])] if ok[0] else None


def n_star_raw(table: pd.DataFrame, group: Sequence[str] | None = None, *, runner_up: bool = False,
               min_groups: int = 1) -> pd.DataFrame:
    """The raw arg-max n*(C) = argmax_g R_g(C) over given values.

    ``table``: one row per group (the index: its key, one level per group column, e.g.
    ``n`` or ``n, B_problem``; further levels such as ``run`` are allowed), one column per
    compute C (in the order wanted in the output), the value R_g(C), NaN where g has no
    value at C. ``group``: the index levels that make the key (default: all of them); rows
    are sorted by them (then by any other level) before the arg-max, so ties go to the
    smallest key. Returns ``compute, value`` and the ``group`` columns of the winner, one row
    per column of ``table`` at which at least ``min_groups`` distinct keys have a value (the
    others are dropped; those with some value are listed in ``attrs["too_few_groups"]``, a
    tuple of dicts ``{compute, groups, <group columns of the best there>}``). With
    ``runner_up``, also ``runner_up_<g>`` for each group column and ``runner_up_value``: the
    best of the other rows by the same rule (NaN where the winner competed alone).
    """
    if isinstance(min_groups, bool) or not isinstance(min_groups, (int, np.integer)) or min_groups < 1:
        raise IsosimInputError(f"min_groups must be an integer >= 1, got {min_groups!r}")
    if not isinstance(table, pd.DataFrame):
        raise IsosimInputError(f"expected a pandas DataFrame, got {type(table).__name__}")
    names = list(table.index.names)
    group = names if group is None else list(group)
    if not group or any(g is None or g not in names for g in group):
        raise IsosimInputError(f"group {group} must name levels of the table's index {names}")
    if isinstance(table.index, pd.MultiIndex):
        t = table.sort_index(level=group, sort_remaining=True)
    else:
        t = table.sort_index(kind="stable")
    vals = t.to_numpy(dtype=float)
    compute = t.columns.to_numpy()
    cols = np.arange(vals.shape[1])
    best, ok = argmax_rows(vals)
    levels = {g: t.index.get_level_values(g).to_numpy() for g in group}
    if vals.shape[0] == 0:
        extra = [*(f"runner_up_{g}" for g in group), "runner_up_value"] if runner_up else []
        empty = pd.DataFrame(columns=["compute", "value", *group, *extra])
        empty.attrs["too_few_groups"] = ()
        return empty
    codes = pd.MultiIndex.from_arrays([levels[g] for g in group]).factorize()[0]
    finite = np.isfinite(vals)
    groups = np.array([np.unique(codes[finite[:, j]]).size for j in cols], dtype=int)
    enough = ok & (groups >= min_groups)
    few = ok & ~enough
    lone = tuple({"compute": _plain(compute[j]), "groups": int(groups[j]),
                  **{g: _plain(levels[g][best[j]]) for g in group}} for j in np.flatnonzero(few))
    out = {"compute": compute, "value": vals[best, cols]}
    out.update((g, levels[g][best]) for g in group)
    if runner_up:
        rest = vals.copy()
        rest[best, cols] = np.nan
        second, ok2 = argmax_rows(rest)
        for g in group:
            out[f"runner_up_{g}"] = np.where(ok2, levels[g][second], np.nan)
        out["runner_up_value"] = np.where(ok2, rest[second, cols], np.nan)
    table_out = pd.DataFrame(out)[enough].reset_index(drop=True)
    table_out.attrs["too_few_groups"] = lone
    return table_out


def _plain(x):
    """A NumPy scalar as the Python number it holds (other values unchanged)."""
    return x.item() if isinstance(x, np.generic) else x


def n_star_envelope(
    fits: Mapping[tuple, FittedCurve],
    grid,
    group: Sequence[str] = ("n",),
    slack_decades: float = 0.0,
    *,
    min_groups: int = 1,
) -> pd.DataFrame:
    """The fitted arg-max: n*(C) on top of the upper envelope max_g R_g(C) of fitted curves.

    ``fits``: ``{key: curve}`` with keys tuples of the ``group`` values and :class:`FittedCurve`
    curves (``predict(C)``, ``c_min`` and ``c_max``).
    g competes at C when c_min / 10^s <= C <= c_max * 10^s (s = ``slack_decades``, to a
    relative 1e-9), then :func:`n_star_raw` on the table of R_g(C) (``min_groups``: the
    fewest groups that must compete at a point, see the module docstring). Columns: compute,
    value, the group columns and, when grouped by both n and B_problem, M = C / (n B_problem).
    """
    group = list(group)
    keys = sorted(fits)
    if any(len(k) != len(group) for k in keys):
        raise IsosimInputError(f"fit keys must be tuples of the group values {group}")
    grid = np.asarray(grid, dtype=float)
    widen = 10.0**slack_decades
    table = np.full((len(keys), grid.size), np.nan)
    for i, key in enumerate(keys):
        f = fits[key]
        ok = (grid >= f.c_min / widen * (1 - 1e-9)) & (grid <= f.c_max * widen * (1 + 1e-9))
        table[i, ok] = f.predict(grid[ok])
    index = pd.MultiIndex.from_tuples(keys, names=group) if keys else pd.MultiIndex.from_arrays(
        [[] for _ in group], names=group)
    out = n_star_raw(pd.DataFrame(table, index=index, columns=pd.Index(grid)), group, min_groups=min_groups)
    if "n" in group and "B_problem" in group:
        out["M"] = out["compute"] / (out["n"] * out["B_problem"])
    return out
