"""The model config file a calibration writes, and reading it back with its ensemble.

The file is a complete :class:`~isosim.sim.config.SimConfig` in TOML, so every command that
takes a config reads it (``isosim simulate --config``, ``SimConfig.from_toml``): the best
fit's knobs sit in its ``[model]`` and ``[algo]`` sections, ``[population]`` names the
pass-rate file, ``[allocation]`` is the predicted compute-optimal allocation at the budget.
The calibration itself (the ensemble, the fit's RMSE, the pilots' noise, the metric) follows
as a ``[calibration]`` table written on comment lines that start with ``#@ ``: TOML readers
skip them, :func:`read_model_config` strips the prefix and reads them as TOML. A file whose
``[calibration]`` is an ordinary table is read the same way.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomli_w

from ..errors import IsosimInputError, shown
from ..sim.config import SimConfig, parse_text
from . import knobs as K

#: the prefix of the comment lines that hold the calibration table
PREFIX = "#@ "


@dataclass(frozen=True)
class ModelConfigFile:
    """A model config read back: ``config`` (the best fit), ``ensemble`` (knob sets, the best
    first; empty for a plain config) and the rest of the ``[calibration]`` table (``info``)."""

    config: SimConfig
    ensemble: tuple[dict[str, float], ...]
    info: dict

    def members(self) -> list[SimConfig]:
        """One config per ensemble member (the best fit alone for a plain config)."""
        if not self.ensemble:
            return [self.config]
        return [K.apply(self.config, m) for m in self.ensemble]


def model_config_text(config: SimConfig, ensemble, info: dict) -> str:
    """The file's text: ``config`` as TOML, then ``[calibration]`` (``info`` and the ensemble)
    on ``#@ `` comment lines."""
    head = ("# isosim calibrate: the surrogate fitted to pilot runs (docs/calibrate.md).\n"
            "# [model] and [algo] hold the best fit. The ensemble of knob sets that fit within the pilots'\n"
            f"# noise is the [calibration] table on the '{PREFIX.strip()}' lines below: TOML readers skip them,\n"
            "# `isosim plan --model-config` reads them.\n")
    table = tomli_w.dumps({"calibration": {**info, "ensemble": [dict(m) for m in ensemble]}})
    tail = "".join(f"{PREFIX}{line}\n" if line else "#@\n" for line in table.splitlines())
    return head + config.to_toml() + "\n" + tail


def read_model_config(path: str | Path) -> ModelConfigFile:
    """Read a model config (a calibration's output, or any SimConfig TOML/JSON, sections left
    out taking their defaults) and its ensemble; the model and algo sections of the config and
    of every member are validated. Every problem is one :class:`IsosimInputError` line."""
    p = Path(path)
    if not str(path).strip():
        raise IsosimInputError(f"--model-config needs a file path, got {str(path)!r}")
    if not p.is_file():
        raise IsosimInputError(f"model config not found: {p}")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise IsosimInputError(f"cannot read {p}: {exc}") from None
    fmt = "json" if p.suffix.lower() == ".json" else "toml"
    data = parse_text(text, fmt, "model config")
    cal = data.pop("calibration", None)
    if cal is None and fmt == "toml":
        lines = [line[len(PREFIX):] if line.startswith(PREFIX) else "" for line in text.splitlines()
                 if line.startswith(PREFIX) or line.strip() == "#@"]
        if lines:
            cal = parse_text("\n".join(lines), "toml", "calibration table").get("calibration")
    config = SimConfig.from_dict(data)
    ensemble = _ensemble(cal, p)
    for c in (config, *(K.apply(config, m) for m in ensemble)):  # what a model config is read for
        c.model.validate()
        c.algo.validate()
    info = {k: v for k, v in (cal or {}).items() if k != "ensemble"}
    return ModelConfigFile(config, ensemble, info)


def _ensemble(cal, path: Path) -> tuple[dict[str, float], ...]:
    if cal is None:
        return ()
    if not isinstance(cal, dict) or not isinstance(cal.get("ensemble", []), list):
        raise IsosimInputError(f"{path}: [calibration] must be a table with an ensemble list")
    out = []
    for i, m in enumerate(cal.get("ensemble", [])):
        if not isinstance(m, dict) or not m:
            raise IsosimInputError(f"{path}: ensemble member {i + 1} must be a table of knob values")
        unknown = [k for k in m if k not in K.KNOBS]
        if unknown:
            raise IsosimInputError(f"{path}: ensemble member {i + 1} has unknown knob(s) {', '.join(unknown)}")
        vals = {}
        for k, v in m.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
                raise IsosimInputError(f"{path}: ensemble member {i + 1}: {k} must be a finite number, got {shown(v)}")
            vals[k] = float(v)
        out.append(vals)
    return tuple(out)
