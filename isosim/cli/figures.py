"""``isosim figures``: run the finding sweeps that are missing, then every paper figure script."""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from ..errors import IsosimInputError
from ._options import add_executor_options, print_json


def default_scripts() -> Path:
    """``paper_figures/`` of the source checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "paper_figures"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figures", help="regenerate every paper figure (running missing finding sweeps)",
                       description="Run the finding sweeps that are not stored yet (resumable), then every "
                                   "paper_figures/fig*.py script, and write findings.json (the verdicts and their "
                                   "evidence) beside the figures; --only draws some figures and leaves findings.json.")
    p.add_argument("--quick", action="store_true", help="the reduced sweeps that CI runs")
    p.add_argument("--root", default="isosim-out/findings", metavar="DIR", help="finding sweeps (default %(default)s)")
    p.add_argument("--out", metavar="DIR", help="figures (default paper_figures/figures, quick: isosim-out/figures-quick)")
    p.add_argument("--scripts", metavar="DIR", help="figure scripts (default: paper_figures/ of this checkout)")
    p.add_argument("--only", metavar="N,...", help="only these figure numbers, e.g. 1,3")
    add_executor_options(p)
    p.add_argument("--json", action="store_true", help="print the written paths and the findings as JSON")
    p.set_defaults(func=run)


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"isosim_paper_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _only(text: str | None) -> set[int] | None:
    if not text:
        return None
    try:
        return {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise IsosimInputError(f"--only takes figure numbers like 1,3, got {text!r}") from None


def run(args: argparse.Namespace) -> int:
    from ..experiments.findings import FINDINGS, Results, check_findings

    scripts_dir = Path(args.scripts) if args.scripts else default_scripts()
    scripts = {int(s.name[3:5]): s for s in sorted(scripts_dir.glob("fig[0-9][0-9]_*.py"))}
    if not scripts:
        raise IsosimInputError(f"no figure scripts (fig<NN>_*.py) in {scripts_dir}: run from a source checkout "
                               "or pass --scripts")
    only = _only(args.only)
    if only is not None:
        scripts = {i: s for i, s in scripts.items() if i in only}
        if not scripts:
            raise IsosimInputError(f"no figure numbered {args.only} in {scripts_dir}")
    scale = "quick" if args.quick else "full"
    out = Path(args.out) if args.out else (Path("isosim-out/figures-quick") if args.quick else scripts_dir / "figures")
    results = Results(Path(args.root), scale, progress=not args.json, workers=args.workers, backend=args.backend,
                      address=args.address)
    results.ensure(sorted({name for f in FINDINGS if f.id in scripts for name in f.sweeps}))
    sys.path.insert(0, str(scripts_dir))
    written = []
    try:
        for path in scripts.values():
            written += [str(p) for p in _load(path).make(results, out)]
    finally:
        sys.path.remove(str(scripts_dir))
    findings = check_findings(results, ids=set(scripts))
    if only is None:  # a partial run leaves the full findings.json as it was
        out.mkdir(parents=True, exist_ok=True)
        (out / "findings.json").write_text(json.dumps(findings, indent=1) + "\n")
    if args.json:
        print_json({"figures": written, "findings": findings})
    else:
        print("\n".join(written))
        for f in findings:
            print(f"finding {f['id']:>2}: {'holds' if f['holds'] else 'does not hold'}  {f['title']}")
    return 0
