"""Command-line flags for every :class:`~isosim.sim.config.SimConfig` field.

Each field becomes ``--field-name`` (``--model`` for ``model.kind``, ``--data-seed``
for ``population.seed``); ``--config FILE`` (TOML or JSON) gives the starting point
and flags override it; ``--mixture hard=0.5,easy=0.5`` and ``--pass-rates FILE`` set
the population.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from ..errors import IsosimInputError
from ..sim import advantages
from ..sim.config import _SECTION_TYPES, SimConfig
from ..sim.models import MODELS

_RENAMES = {("model", "kind"): "model", ("population", "seed"): "data-seed"}
_SKIP = {("population", "mixture_weights"), ("population", "val_mixture_weights"), ("population", "path"), ("population", "data_digest")}


def _flag(section: str, name: str) -> str:
    return "--" + _RENAMES.get((section, name), name.replace("_", "-"))


def _dest(section: str, name: str) -> str:
    return f"cfg__{section}__{name}"


def _parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _number(text: str) -> float:
    """A number, also written as ``1e6`` or ``2**20``."""
    if "**" in text:
        base, _, exp = text.partition("**")
        return float(base) ** float(exp)
    return float(text)


def _int_like(text: str) -> int:
    try:
        value = _number(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def _float_like(text: str) -> float:
    try:
        return _number(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type: a bad value is a one-line usage error, before any work)."""
    value = _int_like(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    value = _int_like(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _advantage(text: str) -> str:
    """A registered advantage's name, also given by an alias (``scale_rewards=none``, ``std``, ...)."""
    try:
        return advantages.get(text).name
    except IsosimInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _help(section: str, name: str, default: Any) -> str:
    text = f"{section}.{name} (default {default!r})"
    if (section, name) == ("algo", "advantage"):
        aliases = "; ".join(f"{a.name}: {', '.join(a.aliases)}" for a in advantages.ADVANTAGES.values())
        return f"{text}: one of {', '.join(advantages.NAMES)}, or an alias ({aliases})"
    if (section, name) == ("model", "kind"):
        return f"{text}: " + ", ".join(f"{m} (knobs: {', '.join(mod.KNOBS)})" for m, mod in MODELS.items())
    return text


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE", help="starting config (TOML or JSON); flags override it")
    parser.add_argument("--mixture", metavar="BAND=SHARE,...", help="mixture of bands, e.g. hard=0.5,easy=0.5")
    parser.add_argument("--val-mixture", metavar="BAND=SHARE,...",
                        help="validation bands, when they differ from training, e.g. easy=0.5,very-easy=0.5")
    parser.add_argument("--pass-rates", metavar="FILE", help="population matching a file of per-problem pass rates")
    defaults = SimConfig()
    for section, cls in _SECTION_TYPES.items():
        group = parser.add_argument_group(f"{section} options")
        for f in dataclasses.fields(cls):
            if (section, f.name) in _SKIP:
                continue
            default = getattr(getattr(defaults, section), f.name)
            kwargs: dict[str, Any] = {"dest": _dest(section, f.name), "default": None}
            if isinstance(default, bool):
                kwargs.update(type=_parse_bool, metavar="BOOL")
            elif isinstance(default, tuple):
                kwargs.update(type=_int_tuple, metavar="K,K")
            elif isinstance(default, int):
                kwargs.update(type=_int_like, metavar="INT")
            elif isinstance(default, float):
                kwargs.update(type=_float_like, metavar="X")
            elif (section, f.name) == ("algo", "advantage"):
                kwargs.update(type=_advantage, metavar="NAME")
            else:
                kwargs.update(type=str, metavar="STR")
            group.add_argument(_flag(section, f.name), help=_help(section, f.name, default), **kwargs)


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """The validated config the flags describe."""
    if args.config:
        path = Path(args.config)
        if not path.is_file():
            raise IsosimInputError(f"config file not found: {path}")
        text = path.read_text()
        cfg = SimConfig.from_json(text) if path.suffix == ".json" else SimConfig.from_toml(text)
    else:
        cfg = SimConfig()
    changes: dict[str, dict[str, Any]] = {}
    for key, value in vars(args).items():
        if key.startswith("cfg__") and value is not None:
            _, section, name = key.split("__")
            changes.setdefault(section, {})[name] = value
    alloc = changes.get("allocation", {})
    if "steps" in alloc and "budget" not in alloc:
        alloc["budget"] = 0.0
    elif "budget" in alloc and "steps" not in alloc:
        alloc["steps"] = 0
    if args.mixture:
        changes.setdefault("population", {}).update(preset="mixture", mixture_weights=parse_mixture(args.mixture))
    if args.val_mixture:
        changes.setdefault("population", {}).update(val_mixture_weights=parse_mixture(args.val_mixture))
    if args.pass_rates:
        from ..sim.population import file_digest

        changes.setdefault("population", {}).update(preset="file", path=str(args.pass_rates),
                                                    data_digest=file_digest(args.pass_rates))
    cfg = cfg.replace(**changes) if changes else cfg
    return cfg.validate()


def parse_mixture(text: str) -> tuple[tuple[str, float], ...]:
    out = []
    for part in text.split(","):
        if "=" not in part:
            raise IsosimInputError(f"mixture entries look like band=share, got {part!r}")
        band, share = part.split("=", 1)
        try:
            out.append((band.strip(), float(share)))
        except ValueError:
            raise IsosimInputError(f"mixture share of {band.strip()!r} is not a number: {share!r}") from None
    return tuple(out)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=None, sort_keys=False, default=float))


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """``--backend``, ``--address`` and ``--workers``: where the runs of a sweep execute."""
    parser.add_argument("--backend", default="local", choices=("local", "dask", "ray"),
                        help="local processes (default), or a Dask / Ray cluster")
    parser.add_argument("--address", help="scheduler address of a running Dask or Ray cluster")
    parser.add_argument("--workers", type=positive_int, help="worker processes (default: all cores)")
