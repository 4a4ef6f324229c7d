"""The ``isosim`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a function
``run(args) -> int``. User mistakes raise :class:`isosim.errors.IsosimInputError`
and end here as one line on stderr with exit code 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import IsosimInputError

#: subcommand modules, in the order ``isosim --help`` lists them
SUBCOMMANDS = ("reproduce", "figures", "simulate", "sweep", "fit", "plan", "calibrate", "theory", "lm", "bench")


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in one line (exit code 2, as argparse does)."""

    def error(self, message: str):  # pragma: no cover - exercised through the CLI tests
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action, arg_strings):
        # argparse (3.11) drops a '--' given as a value (--model=--) and hands the option an empty list
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one value, got '--'")
        return super()._get_values(action, arg_strings)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="isosim", description="isosim: how to split an RL sampling budget into n, B_problem and M, "
                                                  "studied with bandit surrogate models of GRPO.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"isosim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IsosimInputError as exc:
        print(f"isosim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, FileExistsError, PermissionError) as exc:
        print(f"isosim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:  # sizes that parse as valid but do not fit in memory (e.g. --train-size 1e12)
        print(f"isosim {args.command}: error: not enough memory for these sizes", file=sys.stderr)
        return 2


def run_main() -> None:
    sys.exit(main())
