"""What every log reader shares: the output columns, the key map, the per-run overrides of n and
B_problem, one-line errors that name the file, and the assembly of one run's table."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import IsosimInputError

#: the columns of a log's runs table, ``val`` renamed to the caller's metric name
COLUMNS = ("run", "n", "B_problem", "step", "compute", "tokens", "val", "train_reward", "zero_std_share")
#: what a ``--log-map role=key`` entry may name
ROLES = ("val", "train_reward", "zero_std_share", "tokens", "step", "run", "n", "B_problem")


def fail(path, message: str):
    """One line naming the file: ``PATH: message``."""
    raise IsosimInputError(f"{path}: {message}")


@dataclass(frozen=True)
class Overrides:
    """``--n`` / ``--b-problem``: one value for every run (key None) or one per run name."""

    n: dict
    b_problem: dict

    def get(self, which: str, run: str):
        table = self.n if which == "n" else self.b_problem
        if run in table:
            return table[run]
        return table.get(None)


@dataclass(frozen=True)
class LogFormat:
    """What a reader is handed: the path, the key map, the overrides, a trainer config file."""

    path: Path
    keys: dict
    overrides: Overrides
    config: Path | None = None


def parse_map(text: str | None, flag: str = "--log-map") -> dict:
    """``role=key,role=key`` (a key may hold ``/``, ``@``, ``-`` and spaces, not ``,`` or ``=``)."""
    if text is None:
        return {}
    out = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        role, sep, key = part.partition("=")
        role, key = role.strip(), key.strip()
        if not sep or not role or not key:
            raise IsosimInputError(f"{flag} takes role=key pairs separated by commas, got {part.strip()!r}")
        if role not in ROLES:
            raise IsosimInputError(f"{flag}: unknown role {role!r}; roles: {', '.join(ROLES)}")
        out[role] = key
    return out


def _positive(value, flag: str) -> int:
    try:
        x = float(str(value).strip())
    except ValueError:
        raise IsosimInputError(f"{flag} takes positive integers, got {value!r}") from None
    if not (math.isfinite(x) and x >= 1 and x == round(x)):
        raise IsosimInputError(f"{flag} takes positive integers, got {value!r}")
    return int(x)


def parse_overrides(value, flag: str) -> dict:
    """``None`` -> {}; an int or ``"4"`` -> {None: 4}; ``"runA=2,runB=4"`` or a dict -> per run."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {k: _positive(v, flag) for k, v in value.items()}
    if isinstance(value, (int, np.integer)):
        return {None: _positive(value, flag)}
    text = str(value)
    if "=" not in text:
        return {None: _positive(text, flag)}
    out = {}
    for part in text.split(","):
        run, sep, v = part.rpartition("=")
        if not sep or not run.strip():
            raise IsosimInputError(f"{flag} takes one integer, or run=integer pairs separated by commas, got {text!r}")
        out[run.strip()] = _positive(v, flag)
    return out


def run_table(path, run: str, n: int, b_problem: int, steps: dict[int, dict], compute_of) -> pd.DataFrame:
    """One run's rows from ``{step: {"val": x, "train_reward": x, ...}}``; ``compute_of(step)``
    gives the training rollouts generated up to and including that step."""
    if not steps:
        fail(path, "holds no logged step")
    rows = []
    for step in sorted(steps):
        rec = steps[step]
        rows.append({"run": run, "n": int(n), "B_problem": int(b_problem), "step": int(step),
                     "compute": float(compute_of(step)), "tokens": rec.get("tokens", np.nan),
                     "val": rec.get("val", np.nan), "train_reward": rec.get("train_reward", np.nan),
                     "zero_std_share": rec.get("zero_std_share", np.nan)})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def number(path, value, key: str, where: str = "") -> float:
    """A finite number from a log entry, or one line naming the file and the key."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        fail(path, f"{key!r}{where} is not a number: {value!r}")
    if not math.isfinite(x):
        fail(path, f"{key!r}{where} is not finite: {value!r}")
    return x


def positive_int(path, value, key: str) -> int:
    """A positive integer from a trainer config, or one line naming the file and the key."""
    x = number(path, value, key)
    if x < 1 or x != round(x):
        fail(path, f"{key!r} must be a positive integer, got {value!r}")
    return int(x)


def require_val(path, steps: dict[int, dict], key: str, available) -> None:
    """Fail unless some step has the validation metric."""
    if not any("val" in rec for rec in steps.values()):
        shown = sorted(str(k) for k in available)
        more = f" and {len(shown) - 12} more" if len(shown) > 12 else ""
        fail(path, f"no evaluation has the validation key {key!r} (keys: {', '.join(shown[:12]) or 'none'}{more}); "
                   "choose one with --val-key")


_CORE = re.compile(r"^val-core/.+/(acc|reward)/mean@\d+$")
#: the roles besides the validation metric that a log may carry
OPTIONAL_ROLES = ("train_reward", "zero_std_share", "tokens")


def core_keys(keys) -> list[str]:
    """The ``val-core/<source>/<acc or reward>/mean@k`` keys (verl's validation metrics) among ``keys``, sorted."""
    return sorted(k for k in keys if _CORE.match(str(k)))


def key_for(available, role: str, keys: dict, defaults: dict):
    """The key of ``role`` among ``available``: the one the user named (``keys``, from --val-key or
    --log-map), if it is there; otherwise the first of the role's ``defaults`` that is there; else None."""
    if role in keys:
        return keys[role] if keys[role] in available else None
    return next((k for k in defaults.get(role, ()) if k in available), None)


def choose_keys(path, available, keys: dict, defaults: dict, what: str, prefix: str = "") -> dict:
    """``{role: key}`` for the validation metric and the optional roles found in ``available``.
    Without a named or default validation key, a single verl ``val-core/...`` key is taken; several
    are an error naming them (``what``: "columns", "tags"; ``prefix`` starts the message). The
    validation role is None when nothing is found (the caller says what it looked for)."""
    val = key_for(available, "val", keys, defaults)
    if val is None and "val" not in keys:
        core = core_keys(available)
        if len(core) > 1:
            fail(path, f"{prefix}several validation {what} ({', '.join(core[:4])}); choose one with --val-key")
        val = core[0] if core else None
    chosen = {"val": val}
    for role in OPTIONAL_ROLES:
        key = key_for(available, role, keys, defaults)
        if key is not None:
            chosen[role] = key
    return chosen
