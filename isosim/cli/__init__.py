"""The ``isosim`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a function
``run(args) -> int``. User mistakes raise :class:`isosim.errors.IsosimInputError`
and end here as one line on stderr with exit code 2.

A subcommand whose work is all done when ``run`` returns (its files closed, its worker pools
joined, no thread left) may also set ``exit_at_once=True``: the ``isosim`` program then ends
with ``os._exit`` after flushing its output, skipping the interpreter's teardown of the modules
it loaded (about 0.2-0.3 s after pandas and Numba, a tenth of a plan's wall time).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from ..errors import IsosimInputError

#: how an exit_at_once subcommand ends the process (``os._exit``: no interpreter teardown)
_exit = os._exit

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
    return _run(build_parser().parse_args(argv))


def _run(args: argparse.Namespace) -> int:
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
    """The ``isosim`` program: :func:`main` on the command line, then its exit code (at once, after
    flushing stdout and stderr, for a subcommand that sets ``exit_at_once``). Output to a pipe
    whose reader has gone ends the program quietly with exit code 1, as Python's documentation
    advises, instead of with a traceback."""
    args = build_parser().parse_args()
    try:
        code = _run(args)
    except BrokenPipeError:  # the reader of stdout went away (``isosim plan ... | head``): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so that no later flush fails again
        code = 1
    if getattr(args, "exit_at_once", False):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):  # a reader that closed the pipe; a closed stream
                pass
        _exit(code)
    sys.exit(code)
