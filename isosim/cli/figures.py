"""``isosim figures``: run the finding sweeps that are missing, then draw every finding's figure."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import IsosimInputError
from ._options import add_executor_options, output_dir, output_problem, print_json

DEFAULT_OUT = {"full": "isosim-out/figures", "quick": "isosim-out/figures-quick"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figures", help="draw the twelve finding figures (running missing finding sweeps)",
                       description="Run the finding sweeps that are not stored yet (resumable), then draw every "
                                   "finding's figure (isosim.study.findings) and write findings.json (the "
                                   "verdicts and their evidence) beside the figures; --only draws some figures and "
                                   "leaves findings.json.")
    p.add_argument("--quick", action="store_true", help="the reduced sweeps that CI runs")
    p.add_argument("--root", default="isosim-out/findings", metavar="DIR", type=output_dir, help="finding sweeps (default %(default)s)")
    p.add_argument("--out", metavar="DIR", type=output_dir,
                   help=f"figures (default {DEFAULT_OUT['full']}, quick: {DEFAULT_OUT['quick']})")
    p.add_argument("--only", metavar="N,...", help="only these findings' figures, by number, e.g. 1,3")
    add_executor_options(p)
    p.add_argument("--json", action="store_true", help="print the written paths and the findings as JSON")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (by default a bar shows on stderr when it is a terminal; --json turns it off)")
    p.set_defaults(func=run)


def _only(text: str | None, known: set[int]) -> set[int] | None:
    """The finding numbers of ``--only``; an unknown number is an error, not skipped."""
    if text is None:
        return None
    try:
        ids = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise IsosimInputError(f"--only takes figure numbers like 1,3, got {text!r}") from None
    if not ids or not ids <= known:
        raise IsosimInputError(f"--only {text!r}: choose finding numbers from {min(known)} to {max(known)}")
    return ids


def run(args: argparse.Namespace) -> int:
    from ..experiments.progress import quiet_flag
    from ..study.findings import FINDINGS, Results
    from ..study.reproduce import draw_and_check

    only = _only(args.only, {f.id for f in FINDINGS})
    chosen = [f for f in FINDINGS if only is None or f.id in only]
    scale = "quick" if args.quick else "full"
    out = Path(args.out or DEFAULT_OUT[scale])
    problem = output_problem(str(out), folder=True)  # the default --out is checked here, before any sweep
    if problem:
        raise IsosimInputError(f"--out: {problem}")
    results = Results(Path(args.root), scale, progress=quiet_flag(args.json or args.quiet), workers=args.workers,
                      backend=args.backend, address=args.address)
    results.ensure(sorted({name for f in chosen for name in f.sweeps}))
    paths, findings = draw_and_check(results, {f.id for f in chosen}, out, args.workers)
    written = [str(p) for p in paths]
    if only is None:  # a partial run leaves the full findings.json as it was
        out.mkdir(parents=True, exist_ok=True)
        (out / "findings.json").write_text(json.dumps(findings, indent=1) + "\n")
    if args.json:
        print_json({"figures": written, "findings": findings})
    else:
        print("\n".join(written))
        for f in findings:
            print(f"finding {f['id']:>2}: {f['verdict']:<12} (P = {f['p_holds']:.2f})  {f['title']}")
    return 0
