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
import math
import os
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


#: integers are stored and computed with as 64-bit signed integers (NumPy, Numba, Parquet)
INT64_LIMIT = 2**63


def _int_like(text: str) -> int:
    """An integer, also written as ``1e6`` or ``2**20``, that fits a 64-bit signed integer."""
    text = str(text).strip()
    try:
        value = int(text)  # exact for long decimal integers, which float() would round
    except ValueError:
        try:
            number = _number(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not number.is_integer():
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
        value = int(number)
    if value >= INT64_LIMIT:
        raise argparse.ArgumentTypeError(f"expected an integer below 2**63, got {text!r}")
    if value < -INT64_LIMIT:
        raise argparse.ArgumentTypeError(f"expected an integer of at least -2**63, got {text!r}")
    return value


def _float_like(text: str) -> float:
    try:
        return _number(text)
    except (ValueError, OverflowError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def int_range(lo: int, hi: int | None = None):
    """argparse type: an integer in ``[lo, hi]`` (a bad value is a one-line usage error, before any work)."""
    def parse(text: str) -> int:
        value = _int_like(text)
        if value < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        if hi is not None and value > hi:
            raise argparse.ArgumentTypeError(f"expected an integer <= {hi}, got {text!r}")
        return value
    parse.__name__ = f"integer >= {lo}" if hi is None else f"integer in [{lo}, {hi}]"
    return parse


def rollout_budget(text: str) -> float:
    """argparse type: a budget in rollouts, a finite number below 2**63 (the rollout counters' range)."""
    value = _float_like(text)
    if not (math.isfinite(value) and value < INT64_LIMIT):
        raise argparse.ArgumentTypeError(f"expected a finite number of rollouts below 2**63, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0 (a learning rate, a scale)."""
    value = _float_like(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


positive_int = int_range(1)
nonnegative_int = int_range(0)
#: local worker processes or threads: more than this is a typo, not a machine
MAX_WORKERS = 1024


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(_int_like(v) for v in text.split(",") if v.strip())
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _nearest_existing(path: Path) -> Path:
    probe = path.absolute()
    while True:
        try:
            probe.stat()
            return probe
        except FileNotFoundError:
            probe = probe.parent
        except NotADirectoryError:  # a component is a regular file: report that file
            probe = probe.parent


def output_problem(text: str, folder: bool, suffixes: tuple[str, ...] = ()) -> str | None:
    """Why ``text`` cannot be written as an output folder (``folder``) or file, or None.

    A file must not be a folder and must end in one of ``suffixes`` (any, if empty); a folder
    must not be a file. Either may not exist yet: its nearest existing ancestor must then be a
    folder this process can write to (missing folders are created when the work writes)."""
    if not str(text).strip():
        return f"expected a {'folder' if folder else 'file'} path, got {text!r}"
    path = Path(text)
    if suffixes and path.suffix.lower() not in suffixes:
        return f"{text!r} must end in {' or '.join(suffixes)}"
    try:
        base = _nearest_existing(path)
        if base == path.absolute():
            if folder and not base.is_dir():
                return f"{text!r} exists and is not a folder"
            if not folder and base.is_dir():
                return f"{text!r} is a folder, expected a file path"
            base = base if folder else base.parent
        elif not base.is_dir():
            return f"cannot create {text!r}: {str(base)!r} is a file, not a folder"
        if not os.access(base, os.W_OK | os.X_OK):
            return f"cannot write to {text!r}: folder {str(base)!r} is not writable"
    except OSError as exc:
        return f"cannot write to {text!r}: {exc.strerror or exc}"
    return None


def output_dir(text: str) -> str:
    """argparse type: a folder that exists or can be created, and can be written to."""
    problem = output_problem(text, folder=True)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def output_file(*suffixes: str):
    """argparse type: a file path that can be written (its missing folders are created), ending in ``suffixes``."""
    def parse(text: str) -> str:
        problem = output_problem(text, folder=False, suffixes=suffixes)
        if problem:
            raise argparse.ArgumentTypeError(problem)
        return text
    parse.__name__ = "output file"
    return parse


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
    if (section, name) == ("population", "train_size"):
        from ..sim.config import DEFAULT_TRAIN_SIZE

        sizes = ", ".join(f"{v} {k}" for k, v in DEFAULT_TRAIN_SIZE.items())
        return f"{text}: 0 takes the preset's size ({sizes}; 6000 for a mixture)"
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
            elif (section, f.name) == ("population", "seed"):
                kwargs.update(type=nonnegative_int, metavar="INT")
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
    for flag, value in (("--config", args.config), ("--pass-rates", args.pass_rates)):
        if value is not None and not str(value).strip():
            raise IsosimInputError(f"{flag} needs a file path, got {value!r}")
    if args.config is not None:
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
    if args.mixture is not None:  # an empty value is an error, not "no mixture"
        changes.setdefault("population", {}).update(preset="mixture", mixture_weights=parse_mixture(args.mixture))
    if args.val_mixture is not None:
        changes.setdefault("population", {}).update(val_mixture_weights=parse_mixture(args.val_mixture))
    if args.pass_rates is not None:
        from ..sim.population import file_digest

        changes.setdefault("population", {}).update(preset="file", path=str(args.pass_rates),
                                                    data_digest=file_digest(args.pass_rates))
    cfg = cfg.replace(**changes) if changes else cfg
    cfg.validate()
    _check_sizes(cfg)
    if cfg.population.preset == "file":  # read the file now: a bad one fails before any work
        from ..sim.population import load_pass_rates

        load_pass_rates(cfg.population.path)
    return cfg


def _check_sizes(cfg: SimConfig) -> None:
    """What :meth:`SimConfig.validate` leaves to the run (it checks the data seed and the budget
    alone): a run whose rollout count n * B_problem * M fits the 64-bit counters of the kernel
    and the trace."""
    al = cfg.allocation
    steps = al.resolved_steps(cfg.algo)
    if steps * al.rollouts_per_step(cfg.algo) >= INT64_LIMIT:
        raise IsosimInputError(f"n * B_problem * M = {al.rollouts_per_step(cfg.algo)} * {steps} rollouts "
                               "is 2**63 or more")


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
    parser.add_argument("--workers", type=int_range(1, MAX_WORKERS),
                        help=f"worker processes, 1 to {MAX_WORKERS} (default: all cores)")
