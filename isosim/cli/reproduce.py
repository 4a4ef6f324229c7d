"""``isosim reproduce``: the study's Q1 in simulation, its frontier and n*(C) fits, the twelve
findings, and figures."""
from __future__ import annotations

import argparse

from ._options import add_executor_options, nonnegative_int, output_dir, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("reproduce", help="the main job: Q1 on easy and hard, n*(C) fits, the twelve findings",
                       description="Run the study's Q1 in simulation (easy and hard presets, B_problem = 32, n over "
                                   "powers of two), fit the compute-optimal n*(C), check the twelve findings "
                                   "(paper_figures/FINDINGS.md) from their sweeps and write figures.")
    p.add_argument("--quick", action="store_true", help="the reduced finding sweeps that CI runs (a few minutes)")
    p.add_argument("--out", default="isosim-out", metavar="DIR", type=output_dir, help="results and figures (default ./isosim-out/)")
    p.add_argument("--json", action="store_true", help='print {"easy": <fit json>, "hard": <fit json>, "findings": [{"id", "title", "verdict" '
                        '(holds / fails / inconclusive), "holds", "p_holds", "compared", "evidence", ...}]}')
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (by default a bar shows on stderr when it is a terminal; --json turns it off)")
    add_executor_options(p)
    p.add_argument("--n-boot", type=nonnegative_int, help="bootstrap resamples for the CIs (default 200, quick 50)")
    p.add_argument("--model-config", metavar="FILE",
                   help="run every sweep with the [model] and [algo] of this config (TOML, as `isosim simulate "
                        "--config` and `isosim calibrate` write it) instead of the defaults; use another --out")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..experiments.progress import quiet_flag
    from ..study.reproduce import report, run_reproduce

    model_config = None
    if args.model_config is not None:
        from ..calibrate.config_file import read_model_config

        model_config = read_model_config(args.model_config).config
    results = run_reproduce(args.out, quick=args.quick, workers=args.workers, backend=args.backend,
                            address=args.address, progress=quiet_flag(args.json or args.quiet), n_boot=args.n_boot,
                            model_config=model_config)
    if args.json:
        print_json(results.to_json())
        return 0
    print(report(results))
    print(f"figures and sweep results in {args.out}/")
    return 0
