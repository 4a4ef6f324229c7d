"""CSV exports of W&B or MLflow runs, with a column map.

Three layouts are read (the first that fits):

- *long* (MLflow metric history, ``MlflowClient.get_metric_history`` rows): columns ``key``,
  ``value`` and ``step``, and a run column (``run_id``, ``run`` or ``run_name``) for several runs;
- *one column per run and key* (a W&B panel's "Export CSV"): ``Step`` and ``<run> - <key>``
  columns (the ``__MIN`` / ``__MAX`` columns are ignored);
- *one row per step* (a W&B ``run.history()`` or any table): a step column (``_step``,
  ``step``, ``Step``, ``global_step`` or ``--log-map step=COL``) and one column per key; a run
  column (``--log-map run=COL``, else ``run``, ``Name``, ``run_id``) or the file name as the run.

Keys are found by name: the validation metric ``--val-key`` (or ``--log-map val=KEY``; default
``eval/reward``, ``eval_reward``, or verl's one ``val-core/...`` key), ``train_reward``
(``train/reward``, ``reward``, ``critic/score/mean``), ``zero_std_share``
(``train/frac_reward_zero_std``, ``frac_reward_zero_std``), ``tokens`` (``train/num_tokens``,
``num_tokens``). n and B_problem come from ``--log-map n=COL,B_problem=COL`` (columns, constant
within a run) or ``--n`` / ``--b-problem`` (one value, or ``run=value`` pairs); compute is
step * n * B_problem.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ._common import LogFormat, choose_keys, fail, number, positive_int, require_val, run_table

DEFAULTS = {"val": ("eval/reward", "eval_reward"), "train_reward": ("train/reward", "reward", "critic/score/mean"),
            "zero_std_share": ("train/frac_reward_zero_std", "frac_reward_zero_std"),
            "tokens": ("train/num_tokens", "num_tokens")}
_STEP_COLS = ("_step", "step", "Step", "global_step", "trainer/global_step")
_RUN_COLS = ("run", "Name", "run_id", "run_name")
_WANDB = re.compile(r"^(?P<run>.+?) - (?P<key>.+)$")


def _read_csv(path):
    try:
        df = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    except Exception as exc:  # pandas raises many types for unreadable files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fail(path, f"cannot read it ({first})")
    df.columns = [str(c).strip() for c in df.columns]
    if df.empty:
        fail(path, "has no rows")
    return df


def _long(df: pd.DataFrame, path, keys) -> dict[str, pd.DataFrame] | None:
    low = {c.lower(): c for c in df.columns}
    if not {"key", "value", "step"} <= set(low):
        return None
    run_col = keys.get("run") or next((c for c in _RUN_COLS if c in df.columns), None)
    runs = df[run_col].astype(str) if run_col else pd.Series(path.stem, index=df.index)
    wide = (df.assign(_run=runs).pivot_table(index=["_run", low["step"]], columns=low["key"], values=low["value"],
                                             aggfunc="last").reset_index())
    return {r: g.drop(columns="_run").rename(columns={low["step"]: "step"}) for r, g in wide.groupby("_run")}


def _panel(df: pd.DataFrame, path) -> dict[str, pd.DataFrame] | None:
    if "Step" not in df.columns:
        return None
    cols = [c for c in df.columns if c != "Step" and not c.endswith(("__MIN", "__MAX"))]
    matches = {c: _WANDB.match(c) for c in cols}
    if not cols or not all(matches.values()):
        return None
    out: dict[str, dict] = {}
    for c, m in matches.items():
        out.setdefault(m["run"], {"step": df["Step"]})[m["key"]] = df[c]
    return {r: pd.DataFrame(v) for r, v in out.items()}


def _rows(df: pd.DataFrame, path, keys) -> dict[str, pd.DataFrame]:
    step_col = keys.get("step") or next((c for c in _STEP_COLS if c in df.columns), None)
    if step_col is None or step_col not in df.columns:
        fail(path, f"no step column {keys.get('step', '_step, step, Step or global_step')!r}; "
                   "name it with --log-map step=COL")
    run_col = keys.get("run") or next((c for c in _RUN_COLS if c in df.columns), None)
    if run_col is not None and run_col not in df.columns:
        fail(path, f"no run column {run_col!r}")
    d = df.rename(columns={step_col: "step"}) if step_col != "step" else df
    if run_col is None:
        return {path.stem: d}
    return {str(r): g.drop(columns=run_col) for r, g in d.groupby(run_col, sort=True)}


def read(fmt: LogFormat):
    path, keys = fmt.path, fmt.keys
    df = _read_csv(path)
    runs = _long(df, path, keys) or _panel(df, path) or _rows(df, path, keys)
    for run, table in runs.items():
        yield _one(fmt, path, str(run), table)


def _one(fmt: LogFormat, path, run: str, t: pd.DataFrame):
    keys = fmt.keys
    cols = set(t.columns)
    chosen = choose_keys(path, cols, keys, DEFAULTS, "columns", f"run {run!r}: ")
    val = chosen["val"]
    if val is None:
        want = keys.get("val", DEFAULTS["val"][0])
        fail(path, f"run {run!r}: no column {want!r} for the validation metric; choose one with --val-key")
    steps: dict[int, dict] = {}
    stepv = pd.to_numeric(t["step"], errors="coerce")
    for i, (s, row) in enumerate(zip(stepv, t.itertuples(index=False))):
        if not np.isfinite(s):
            continue
        rec = steps.setdefault(int(s), {})
        values = dict(zip(t.columns, row))
        for role, c in chosen.items():
            v = values.get(c)
            if v is not None and not (isinstance(v, float) and np.isnan(v)) and str(v).strip() != "":
                rec[role] = number(path, v, c, f" (run {run!r}, step {int(s)})")
    require_val(path, steps, val, cols - {"step"})
    alloc = {}
    for role, flag in (("n", "n"), ("B_problem", "b_problem")):
        over = fmt.overrides.get(flag, run)
        if over is not None:
            alloc[role] = (int(over), "--n" if role == "n" else "--b-problem")
            continue
        col = keys.get(role)
        if col is None:
            fail(path, f"run {run!r}: no {role} (give --log-map {role}=COL or --{'n' if role == 'n' else 'b-problem'})")
        if col not in t.columns:
            fail(path, f"run {run!r}: no column {col!r} for {role}")
        vals = pd.to_numeric(t[col], errors="coerce").dropna().unique()
        if len(vals) == 0:
            fail(path, f"run {run!r}: column {col!r} ({role}) is empty")
        if len(vals) > 1:
            fail(path, f"run {run!r}: {role} changes within the run (column {col!r}: {vals[0]:g}, {vals[1]:g})")
        alloc[role] = (positive_int(path, vals[0], col), col)
    n, bp = alloc["n"][0], alloc["B_problem"][0]
    source = {"run": run, "kind": "export", "files": [str(path)],
              "keys": {**chosen, "n": alloc["n"][1], "B_problem": alloc["B_problem"][1]}, "version": None}
    return run_table(path, run, n, bp, steps, lambda s: s * n * bp), source
