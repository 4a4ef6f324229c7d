"""``isosim theory``: write the closed forms and their derivations as a document."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import IsosimInputError


def register(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "theory",
        help="write the closed forms and derivations (Markdown or LaTeX)",
        description="Render every closed form of isosim.theory (sympy expressions in LaTeX) "
        "with its derivation as one Markdown (default) or LaTeX document.",
    )
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", dest="fmt", action="store_const", const="markdown",
                     help="Markdown with $...$ math (default)")
    fmt.add_argument("--latex", dest="fmt", action="store_const", const="latex",
                     help="a standalone LaTeX article")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help="write to FILE instead of stdout ('-' = stdout)")
    parser.set_defaults(func=run, fmt="markdown")
    return parser


def run(args: argparse.Namespace) -> int:
    from ..theory import document

    fmt = getattr(args, "fmt", None) or "markdown"
    text = document(fmt)
    out = getattr(args, "out", None)
    if out in (None, "-"):
        sys.stdout.write(text)
        return 0
    parent = os.path.dirname(os.path.abspath(out))
    if os.path.isdir(out):
        raise IsosimInputError(f"--out {out!r} is a directory, expected a file path")
    if not os.path.isdir(parent):
        raise IsosimInputError(f"--out {out!r}: directory {parent!r} does not exist")
    try:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise IsosimInputError(f"cannot write --out {out!r}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({text.count(chr(10))} lines, {fmt})", file=sys.stderr)
    return 0
