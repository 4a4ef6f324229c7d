"""``isosim theory``: write the closed forms and their derivations as a document, or draw the
theory figures (``--figures DIR``)."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import IsosimInputError
from ._options import output_problem


def register(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "theory",
        help="write the closed forms and derivations (Markdown or LaTeX), or draw the theory figures",
        description="Render every closed form of isosim.theory (sympy expressions in LaTeX) "
        "with its derivation as one Markdown (default) or LaTeX document; with --figures DIR, "
        "draw the seven theory figures instead (each closed form beside a Monte Carlo or "
        "simulator check, PNG and PDF).",
    )
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", dest="fmt", action="store_const", const="markdown",
                     help="Markdown with $...$ math (default)")
    fmt.add_argument("--latex", dest="fmt", action="store_const", const="latex",
                     help="a standalone LaTeX article")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help="write the document to FILE instead of stdout ('-' = stdout)")
    parser.add_argument("--figures", metavar="DIR", default=None,
                        help="draw the theory figures into DIR (created if missing; "
                        "paper_figures/theory regenerates the committed ones); the document is then "
                        "written only with --out")
    parser.add_argument("--only", metavar="N,...", default=None,
                        help="with --figures: only these figures, by number or name (e.g. 1,4 or signal)")
    parser.add_argument("--quick", action="store_true",
                        help="with --figures: smaller Monte Carlo samples and populations (a few seconds each)")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bar (by default a bar shows on stderr when it is a terminal)")
    parser.set_defaults(func=run, fmt="markdown")
    return parser


def _check_out_file(out: str) -> None:
    """A file path that can be written: missing folders are created when it is (as ``simulate --out``)."""
    problem = output_problem(out, folder=False)  # a folder, a path under a file, an unwritable folder
    if problem:
        raise IsosimInputError(f"--out: {problem}")


def _only(text: str | None) -> list[str] | None:
    if text is None:
        return None
    keys = [k.strip() for k in text.split(",") if k.strip()]
    if not keys:
        raise IsosimInputError(f"--only takes figure numbers or names like 1,4, got {text!r}")
    return keys


def _write_document(fmt: str, out: str | None) -> None:
    from ..theory import document

    text = document(fmt)
    if out in (None, "-"):
        sys.stdout.write(text)
        return
    try:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise IsosimInputError(f"cannot write --out {out!r}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({text.count(chr(10))} lines, {fmt})", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    fmt = getattr(args, "fmt", None) or "markdown"
    out = getattr(args, "out", None)
    fig_dir = getattr(args, "figures", None)
    if out not in (None, "-"):
        _check_out_file(out)
    if fig_dir is None:
        if getattr(args, "only", None) is not None or getattr(args, "quick", False):
            raise IsosimInputError("--only and --quick go with --figures DIR")
        _write_document(fmt, out)
        return 0

    # every input is checked before anything is drawn or created
    problem = output_problem(fig_dir, folder=True)
    if problem:
        raise IsosimInputError(f"--figures: {problem}")
    from ..experiments.progress import progress_bar, quiet_flag, write_above
    from ..theory.figures import select, write_figure

    chosen = select(_only(getattr(args, "only", None)))
    if out is not None:
        _write_document(fmt, out)
    os.makedirs(fig_dir, exist_ok=True)
    with progress_bar(len(chosen), "theory figures", quiet_flag(getattr(args, "quiet", False)),
                      unit="figure") as bar:
        for fig in chosen:
            bar.set_postfix_str(fig.stem)
            paths = write_figure(fig, fig_dir, quick=getattr(args, "quick", False))
            with write_above(bar):
                print("\n".join(str(p) for p in paths), flush=True)
            bar.update()
    print(f"wrote {len(chosen)} theory figure(s), PNG and PDF, to {fig_dir}", file=sys.stderr)
    return 0
