"""Trainers' own logs as a runs table: TRL GRPO output directories, verl file-logger JSON lines,
TensorBoard event directories and CSV exports of W&B or MLflow, read into the one table that
:mod:`isosim.analysis.runs` checks and ``isosim fit`` / ``isosim calibrate`` analyse.

Every reader returns the same columns, whichever trainer wrote the log (:data:`COLUMNS`): one row
per logged step of a run,

- ``run``, ``n`` (rollouts per problem), ``B_problem`` (problems per optimiser step),
- ``step`` (optimiser steps), ``compute`` (rollouts generated for training up to and including
  that step; evaluation rollouts are not counted), ``tokens`` (prompt and completion tokens
  seen, where the log has them, else NaN),
- the validation metric (a column named by the caller, ``metric``; NaN on steps without an
  evaluation),
- ``train_reward`` (the mean training reward of the step's batch) and ``zero_std_share`` (the
  share of the step's groups whose n rewards were all equal, so that they carried no signal),
  NaN where the log lacks them.

A bad log is one :class:`~isosim.errors.IsosimInputError` line that names the file and the
missing or inconsistent key. The heavy readers (``tensorboard``, ``yaml``) are imported only
when such a log is read.
"""
from __future__ import annotations

import glob
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import IsosimInputError
from ._common import COLUMNS, ROLES, LogFormat, Overrides, fail, parse_map, parse_overrides

__all__ = ["COLUMNS", "ROLES", "RunLogs", "is_log", "parse_map", "parse_overrides", "read_logs", "log_kind"]


@dataclass(frozen=True)
class RunLogs:
    """The runs read from trainers' logs. ``table``: :data:`COLUMNS` with the validation metric
    column named ``metric``; ``sources``: per run, the files read and the keys each column came
    from (``{"run": ..., "kind": ..., "files": [...], "keys": {...}, "version": ...}``)."""

    table: pd.DataFrame
    metric: str
    sources: list[dict] = field(default_factory=list)

    def evaluations(self) -> pd.DataFrame:
        """The rows with a validation value: ``run, n, B_problem, step, compute, <metric>``, the
        runs table that ``isosim fit`` and ``isosim calibrate`` read."""
        t = self.table
        cols = ["run", "n", "B_problem", "step", "compute", self.metric]
        return t.loc[t[self.metric].notna(), cols].reset_index(drop=True)

    def training(self) -> pd.DataFrame:
        """The rows with a training value: ``run, n, B_problem, step, compute, train_reward,
        zero_std_share``."""
        t = self.table
        cols = ["run", "n", "B_problem", "step", "compute", "train_reward", "zero_std_share"]
        keep = t["train_reward"].notna() | t["zero_std_share"].notna()
        return t.loc[keep, cols].reset_index(drop=True)


def log_kind(path: str | Path) -> str | None:
    """Which trainer's log ``path`` is: ``"trl"`` (a directory with ``trainer_state.json``, or
    checkpoints holding one), ``"verl"`` (a ``.jsonl`` file, or a directory holding exactly one),
    ``"tensorboard"`` (a directory with ``events.out.tfevents.*`` files below it), ``"export"`` (a
    CSV with neither an ``n`` nor a ``B_problem`` column, nor ``run`` with ``compute`` or ``step``), or None (a runs table, an isosim
    sweep folder, or nothing isosim reads)."""
    p = Path(path)
    if p.is_dir():
        if (p / "manifest.json").is_file():
            return None
        if (p / "trainer_state.json").is_file() or any(p.glob("checkpoint-*/trainer_state.json")):
            return "trl"
        if len(list(p.glob("*.jsonl"))) == 1:
            return "verl"
        if next(p.rglob("events.out.tfevents.*"), None) is not None:
            return "tensorboard"
        return None
    if p.suffix.lower() == ".jsonl":
        return "verl"
    if p.name.startswith("events.out.tfevents."):
        return "tensorboard"
    if p.suffix.lower() in (".csv", ".tsv") and p.is_file():
        try:
            head = pd.read_csv(p, sep="\t" if p.suffix.lower() == ".tsv" else ",", nrows=0)
        except Exception:  # unreadable here: the runs-table reader reports it
            return None
        cols = {str(c).strip() for c in head.columns}
        if {"n", "B_problem"} & cols or ("run" in cols and {"compute", "step"} & cols):
            return None  # a runs table (checked, and its mistakes reported, by isosim.analysis.runs)
        return "export"
    return None


def is_log(paths) -> bool:
    """Whether ``paths`` (one path or several, globs allowed) are trainers' logs rather than one
    runs table or sweep folder."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if len(paths) != 1:
        return True
    expanded = _expand(paths, strict=False)
    return len(expanded) != 1 or log_kind(expanded[0]) is not None


def _expand(paths, strict: bool = True) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        text = str(raw)
        if any(ch in text for ch in "*?[") and not Path(text).exists():
            hits = sorted(glob.glob(text))
            if not hits and strict:
                fail(text, "matches no file or directory")
            out += [Path(h) for h in hits]
        else:
            out.append(Path(text))
    return out


def read_logs(paths, metric: str = "val_reward", *, val_key: str | None = None, log_map: dict | None = None,
              n=None, b_problem=None, trainer_config: str | Path | None = None) -> RunLogs:
    """Read trainers' logs into one runs table (:class:`RunLogs`).

    ``paths``: output directories, files or glob patterns, one run each (a CSV export may hold
    several). ``metric``: the name of the validation column. ``val_key``: the log key (TRL
    ``log_history`` key, verl metric, TensorBoard tag or CSV column) that holds the validation
    metric (default: TRL ``eval_reward``; verl the ``val-core/<source>/<acc or reward>/mean@k``
    key when there is one; TensorBoard ``eval/reward``). ``log_map``: ``{role: key}`` for any of
    :data:`ROLES` (``val``, ``train_reward``, ``zero_std_share``, ``tokens``, and for CSV exports
    ``step``, ``run``, ``n``, ``B_problem``). ``n``, ``b_problem``: an int for every run or
    ``{run: int}``, which take precedence over the trainer's config. ``trainer_config``: the
    trainer's config file (verl: its YAML or JSON) for a single run.
    """
    from . import exports, tensorboard, trl, verl

    if not metric or not str(metric).strip():
        raise IsosimInputError("the validation metric needs a column name")
    keys = dict(log_map or {})
    for role in keys:
        if role not in ROLES:
            raise IsosimInputError(f"unknown log-map role {role!r}; roles: {', '.join(ROLES)}")
    if val_key is not None:
        keys["val"] = val_key
    files = _expand([paths] if isinstance(paths, (str, Path)) else list(paths))
    if not files:
        raise IsosimInputError("no log given")
    if trainer_config is not None and len(files) != 1:
        raise IsosimInputError("a trainer config file goes with one run's log; give each run its own folder")
    over = Overrides(parse_overrides(n, "--n"), parse_overrides(b_problem, "--b-problem"))
    readers = {"trl": trl.read, "verl": verl.read, "tensorboard": tensorboard.read, "export": exports.read}
    parts, sources = [], []
    for path in files:
        if not path.exists():
            fail(path, "no such file or directory")
        kind = log_kind(path)
        if kind is None:
            fail(path, "not a log isosim reads: a TRL output directory (trainer_state.json), a verl .jsonl log, "
                       "a TensorBoard event directory, or a CSV export")
        fmt = LogFormat(path=path, keys=keys, overrides=over, config=Path(trainer_config) if trainer_config else None)
        for table, source in readers[kind](fmt):
            parts.append(table)
            sources.append(source)
    table = pd.concat(parts, ignore_index=True)
    dup = table["run"].astype(str)
    names = [s["run"] for s in sources]
    if len(set(names)) != len(names):
        seen = sorted({x for x in names if names.count(x) > 1})
        raise IsosimInputError(f"two logs have the same run name {seen[0]!r}: give their folders different names")
    table = table.assign(run=dup).rename(columns={"val": metric})
    for col in ("compute", "tokens", metric, "train_reward", "zero_std_share"):
        table[col] = pd.to_numeric(table[col], errors="coerce").astype(float)
    table = table.astype({"step": np.int64, "n": np.int64, "B_problem": np.int64})
    table = table.sort_values(["run", "step"], kind="stable").reset_index(drop=True)
    order = ["run", "n", "B_problem", "step", "compute", "tokens", metric, "train_reward", "zero_std_share"]
    return RunLogs(table[order], metric, sources)


def zero_signal_summary(logs: RunLogs) -> pd.DataFrame:
    """Per run: ``run, n, B_problem, steps, zero_std_share`` (the mean logged share over the run's
    training steps; NaN where the log has none)."""
    t = logs.training()
    if t.empty:
        return pd.DataFrame(columns=["run", "n", "B_problem", "steps", "zero_std_share"])
    g = t.groupby("run", sort=True)
    return pd.DataFrame({"n": g["n"].first(), "B_problem": g["B_problem"].first(),
                         "steps": g["step"].max(), "zero_std_share": g["zero_std_share"].mean()}
                        ).reset_index().astype({"zero_std_share": float}).replace({np.inf: np.nan})
