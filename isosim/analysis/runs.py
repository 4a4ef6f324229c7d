"""Run logs for the fits: reading them (CSV, TSV, Parquet or an ``isosim sweep`` directory)
and checking them, one :class:`~isosim.errors.IsosimInputError` line per problem.

A runs table has one row per evaluation: ``run``, ``n``, ``B_problem`` (positive integers,
fixed per run), ``compute`` (rollouts, >= 0; or ``step``, compute = step * n * B_problem) and
one column per metric (every column not in :data:`RESERVED`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import IsosimInputError, shown

#: the identifying and compute columns of a runs table; every other column may be a metric
RESERVED = ("run", "n", "B_problem", "compute", "step")


def _fail(message: str):
    raise IsosimInputError(message)


def validate_runs(df: pd.DataFrame, metric: str | None = None) -> pd.DataFrame:
    """Check a runs table and return it with float ``compute`` (from ``step`` if needed).

    Needs ``run``, ``n``, ``B_problem`` (positive integers, fixed per run) and ``compute``
    (rollouts, >= 0) or ``step`` (compute = step * n * B_problem), at least two distinct n,
    and, when ``metric`` is given, a numeric, non-constant metric column (values in [0, 1] for
    an ``@k`` metric; rows without a value are dropped and counted in ``attrs["dropped_rows"]``).
    Every problem is one :class:`IsosimInputError` line.
    """
    if not isinstance(df, pd.DataFrame):
        _fail(f"expected a pandas DataFrame, got {type(df).__name__}")
    need = [c for c in ("run", "n", "B_problem") if c not in df.columns]
    if need or not ({"compute", "step"} & set(df.columns)):
        missing = need + ([] if {"compute", "step"} & set(df.columns) else ["compute (or step)"])
        _fail(f"missing column(s) {', '.join(missing)}; have {_names(df.columns)}")
    if df.empty:
        _fail("the table has no rows")
    d = df.copy()
    if d["run"].isna().any():
        _fail(f"column 'run' is empty on row {int(np.flatnonzero(d['run'].isna())[0]) + 1}")
    for col in ("n", "B_problem"):
        d[col] = _positive_ints(d[col], col)
    src = "compute" if "compute" in d.columns else "step"
    raw = pd.to_numeric(d[src], errors="coerce").astype(float)
    bad = ~np.isfinite(raw) | (raw < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        _fail(f"column {src!r} must hold numbers >= 0 (row {row + 1}: {shown(d[src].iloc[row])})")
    d["compute"] = raw if src == "compute" else raw * d["n"] * d["B_problem"]
    for col in ("n", "B_problem"):
        per_run = d.groupby("run", sort=False)[col].nunique()
        if (per_run > 1).any():
            _fail(f"run {shown(per_run.index[per_run > 1][0])} has several values of {col}")
    if metric is not None:
        d = _metric_column(d, metric)
    require_two_n(d)
    return d


def require_two_n(d: pd.DataFrame, where: str = "") -> None:
    """Fail unless ``d`` holds runs at two or more distinct n (n*(C) needs a choice)."""
    ns = np.unique(d["n"])
    if ns.size < 2:
        got = f"only n={ns[0]}" if ns.size else "none"
        _fail(f"need runs at two or more distinct n{where} to fit n*(C), got {got}")


def _names(cols, limit: int = 12) -> str:
    shown = [repr(str(c))[:40] for c in list(cols)[:limit]]
    more = f" and {len(cols) - limit} more" if len(cols) > limit else ""
    return (", ".join(shown) or "none") + more


def _positive_ints(col: pd.Series, name: str) -> pd.Series:
    num = pd.to_numeric(col, errors="coerce").astype(float)
    bad = ~np.isfinite(num) | (num <= 0) | (num != np.round(num)) | (num > 2**53)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        _fail(f"column {name!r} must hold positive integers (row {row + 1}: {shown(col.iloc[row])})")
    return num.astype(np.int64)


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The columns of a runs table that may hold a metric: all but :data:`RESERVED`."""
    return [str(c) for c in df.columns if c not in RESERVED]


def _metric_column(d: pd.DataFrame, metric: str) -> pd.DataFrame:
    if metric not in d.columns or metric in RESERVED:
        _fail(f"no metric column {metric!r}; metric columns: {_names(metric_columns(d))}")
    vals = pd.to_numeric(d[metric], errors="coerce").astype(float)
    junk = vals.isna() & d[metric].notna()
    if junk.any() or np.isinf(vals).any():
        row = int(np.flatnonzero(junk | np.isinf(vals))[0])
        _fail(f"metric {metric!r} must hold finite numbers (row {row + 1}: {shown(d[metric].iloc[row])})")
    if "@" in metric:  # avg@k, best@k, worst@k: shares of rollouts or problems
        outside = (vals < 0) | (vals > 1)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            _fail(f"metric {metric!r} must lie in [0, 1] (row {row + 1}: {shown(d[metric].iloc[row])})")
    dropped = int(vals.isna().sum())
    d = d.assign(**{metric: vals}).dropna(subset=[metric])
    if d.empty:
        _fail(f"metric {metric!r} has no values")
    # rows without a value are left out; their count is kept for the reports
    d.attrs["dropped_rows"] = int(d.attrs.get("dropped_rows", 0)) + dropped
    if vals.max() == vals.min():
        _fail(f"metric {metric!r} is constant ({vals.max():g}): there is nothing to fit")
    return d.reset_index(drop=True)


def load_runs(path: str | Path, metric: str | None = None, split: str = "val") -> pd.DataFrame:
    """Read runs from CSV (.tsv: tab-separated; .parquet/.pq: Parquet), or the ``split``
    evaluations of an ``isosim sweep`` directory, and :func:`validate_runs` them."""
    p = Path(path)
    if not p.exists():
        _fail(f"cannot read {p}: no such file")
    if p.is_dir():
        if not (p / "manifest.json").is_file():
            _fail(f"cannot read {p}: a directory that is not an isosim sweep (no manifest.json)")
        from ..experiments.store import RunStore
        from ..experiments.sweep import evaluations

        results = RunStore.load(p).read()
        if results.empty:
            _fail(f"{p} holds no finished runs yet")
        return validate_runs(evaluations(results, split=split), metric)
    try:
        if p.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(p)
        else:
            df = pd.read_csv(p, sep="\t" if p.suffix.lower() == ".tsv" else ",")
    except Exception as exc:  # pandas and pyarrow raise many types for unreadable files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        _fail(f"cannot read {p}: {first}")
    df.columns = [str(c).strip() for c in df.columns]
    return validate_runs(df, metric)
