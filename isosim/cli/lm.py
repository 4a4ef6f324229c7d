"""``isosim lm validate``: a small GPT trained by real GRPO, measured n*(C) against the surrogate's.

Needs PyTorch (the ``lm`` extra); torch is imported only when the command runs.
"""
from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace

from ..errors import IsosimInputError
from ._options import MAX_WORKERS, int_range, output_dir, positive_float, positive_int, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lm", help="small-LM validation: real GRPO on a tiny GPT vs the surrogate's n*(C)",
                       description="Train a small GPT from scratch on a chained modular-arithmetic task, run a Q1 "
                                   "grid (B_problem fixed) and a fixed-batch grid (n * B_problem fixed) of real GRPO "
                                   "runs on easy and hard subsets, and compare the measured n*(C) and n*(M) with the "
                                   "ones isosim's surrogate predicts (needs torch).")
    acts = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    acts.required = True
    v = acts.add_parser("validate", help="measured vs predicted n*(C) (writes JSON lines, figures, a report)")
    v.add_argument("--quick", action="store_true", help="tiny model, few budgets (under 3 minutes on 2 CPU cores); "
                                                        "the same as --scale quick")
    v.add_argument("--scale", default=None,
                   choices=("quick", "medium", "study", "study-b32", "study-lr", "study-crossover", "study-confirm",
                            "study-replicate", "study-reseed", "full"),
                   help="configuration: quick (CI, minutes), medium (2 CPU cores, about 27 minutes of idle cores with "
                        "--workers 2: n 2..64, 2 seeds, C up to 2^19, intervals and held-out scores), study (2 CPU cores, "
                        "about 35 minutes on idle cores with --workers 2: easy only, B_problem 8, n 8/32/128, 4 seeds, C up "
                        "to 2^21, checkpointed), study-b32 (the study with B_problem 32 and lr 1.2e-3), study-lr (the "
                        "study with lr 1.2e-3, C up to 2^20, about 17 minutes of idle cores with --workers 2), "
                        "study-crossover (lr 8.5e-4, n 8/32, 8 seeds, C 2^14 to 2^20, fresh seeds; about 27 minutes), "
                        "study-confirm (study-crossover with 16 seeds, C 2^15 to 2^20, fresh seeds; about 50 minutes), "
                        "study-replicate (study-confirm with fresh seeds, its shift test from 2^17), "
                        "study-reseed (study-crossover's base model, 16 new training seeds, test from 2^17) "
                        "or full (one GPU); default: full where a CUDA device is found, medium otherwise")
    v.add_argument("--max-budget", type=int, default=None, metavar="C",
                   help="largest budget C_max (the configuration's times a power of 2; the smallest evaluated budget "
                        "stays); with a study scale (study, study-b32, study-lr, study-crossover, study-confirm, "
                        "study-replicate, study-reseed) a larger C_max on the same --out continues the checkpointed runs")
    v.add_argument("--lr", type=positive_float, default=None, metavar="LR",
                   help="GRPO learning rate of every run (default: the configuration's; study 6e-4); a run with "
                        "another rate is another configuration, so give it its own --out")
    v.add_argument("--seeds", type=positive_int, default=None, metavar="K",
                   help="training seeds per n (default: the configuration's); with a checkpointed scale more seeds "
                        "on the same --out train only the new ones, fewer report the first K")
    v.add_argument("--workers", type=int_range(1, MAX_WORKERS), default=1,
                   help=f"processes training the Q1 runs in parallel, 1 to {MAX_WORKERS}, one torch thread each "
                        "(CPU only; default 1)")
    v.add_argument("--device", default=None, choices=("cpu", "cuda"),
                   help="torch device (default: cuda where PyTorch finds a GPU, else cpu)")
    v.add_argument("--out", default="isosim-out/lm", metavar="DIR", type=output_dir,
                   help="results, base model, figures and report (default ./isosim-out/lm/); reused when rerun")
    v.add_argument("--json", action="store_true", help="print the result as JSON")
    v.add_argument("--quiet", action="store_true",
                   help="no progress bar (by default a bar shows on stderr when it is a terminal; --json turns it off)")
    v.add_argument("--threads", type=int_range(1, MAX_WORKERS), default=1,
                   help=f"torch CPU threads, 1 to {MAX_WORKERS} (default 1)")
    v.add_argument("--calibrate", action="store_true",
                   help="also score the surrogate calibrated on the two pilots (isosim calibrate) in the held-out "
                        "table (about a minute per subset)")
    v.set_defaults(func=run)


#: what each scale costs, as the default-scale line says it
SCALE_NOTES = {"medium": "sized for 2 CPU cores (about 27 minutes of idle cores with --workers 2)",
               "full": "sized for one GPU"}


def default_scale(device: str) -> str:
    """The scale a run without ``--scale`` or ``--quick`` takes: the GPU configuration on a GPU,
    the medium one (sized for 2 CPU cores) on a CPU."""
    return "full" if device == "cuda" else "medium"


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def run(args: argparse.Namespace) -> int:
    try:
        import torch
    except ImportError:
        raise IsosimInputError('PyTorch is not installed: pip install -e ".[lm]"') from None
    if args.device == "cuda" and not torch.cuda.is_available():
        raise IsosimInputError("--device cuda: no CUDA device is available")
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() and args.workers == 1 else "cpu"
    if args.threads < 1:
        raise IsosimInputError("--threads must be >= 1")
    if args.quick and args.scale not in (None, "quick"):
        raise IsosimInputError(f"--quick and --scale {args.scale} disagree: give one of them")
    if args.workers > 1 and args.device != "cpu":
        raise IsosimInputError("--workers applies to --device cpu only")
    torch.set_num_threads(args.threads)
    # `kill PID` stops the run as Ctrl-C does: the worker processes go with it (journalled runs stay)
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _validate(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _validate(args: argparse.Namespace) -> int:
    from ..experiments.progress import quiet_flag
    from ..lm.protocol import SCALES
    from ..lm.validate import run_validate

    log = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else (lambda s: print(s, flush=True))
    scale = "quick" if args.quick else (args.scale or default_scale(args.device))
    if not args.quick and args.scale is None:
        print(f"lm validate: no --scale given: {scale}, {SCALE_NOTES[scale]} ({args.device} device found; "
              "--quick for a check of about 2 minutes, --scale to choose)", file=sys.stderr, flush=True)
    cfg = SCALES[scale]()
    if args.lr is not None:
        cfg = replace(cfg, grpo=replace(cfg.grpo, lr=args.lr))
    if args.seeds is not None:
        cfg = replace(cfg, seeds=args.seeds)
    if args.max_budget is not None:
        from ..lm.protocol import with_max_budget

        try:
            cfg = with_max_budget(cfg, args.max_budget)
        except ValueError as e:
            raise IsosimInputError(f"--max-budget: {e}") from None
    calibrated = None
    if args.calibrate:
        from ..lm.heldout import calibrated_surrogate

        calibrated = calibrated_surrogate(cfg)
    res = run_validate(args.out, config=cfg, device=args.device, log=log,
                       progress=quiet_flag(args.json or args.quiet), workers=args.workers, calibrated=calibrated)
    if args.json:
        print_json(res.to_json())
        return 0
    print()
    print((res.out / "report.md").read_text(), end="")
    print(f"results, figures and report in {args.out}/")
    return 0
