"""``isosim bench``: throughput of the kernels, reported as ratios measured in one run."""
from __future__ import annotations

import argparse

from ._options import positive_int, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark the simulation kernels (ratios measured in one run)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--steps", type=positive_int, default=400, help="training steps timed per measurement")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep throughput line")
    p.add_argument("--no-plan", action="store_true", help="skip the planner timings (plan_s)")
    p.add_argument("--lm", action="store_true", help="benchmark the small-LM path instead (needs the lm extra)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device for --lm")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.lm:
        return _run_lm(args)
    from ..experiments.bench import run_benchmarks

    res = run_benchmarks(steps=args.steps, sweep=not args.no_sweep, plan=not args.no_plan)
    if args.json:
        print_json(res)
        return 0
    print("isosim benchmark (default easy config: strategies model, 6000 + 300 problems, B_problem = 32)")
    print("  step time by n (us), beside the arithmetic floor of the same step (one vectorised NumPy pass):")
    for n, row in res["step_us_by_n"].items():
        print(f"    n = {n:>4}: {row['step_us']:7.1f} us, floor {row['floor_us']:6.1f} us, "
              f"ratio {row['ratio_to_floor']:.2f} (target <= 3 at n = 2 and 8)")
    print(f"  numba kernel:  {res['numba_rollouts_per_s']:>14,.0f} rollouts/s  (n = 16)")
    print(f"  numpy twin:    {res['numpy_rollouts_per_s']:>14,.0f} rollouts/s  (n = 16)")
    print(f"  speed-up:      {res['speedup']:>14.1f}x   (target >= 30x)")
    print(f"  step time n=2048 / n=8: {res['step_cost_ratio_n2048_n8']:.2f}   (target <= 1.5)")
    print(f"  peak memory of one simulate: {res['simulate_peak_rss_mb']:.0f} MB (target < 300 MB)")
    print(f"  trace rows at M=1000 vs M=10000 (same n_evals): {res['trace_rows_m1000']} vs {res['trace_rows_m10000']}")
    if "sweep_speedup_2_workers" in res:
        print(f"  sweep: {res['sweep_configs_per_s_1_worker']:.2f} configs/s with 1 worker, "
              f"{res['sweep_configs_per_s_2_workers']:.2f} with 2: {res['sweep_speedup_2_workers']:.2f}x (target >= 1.7x)")
    if "plan_s" in res:
        print(f"  isosim plan, wall seconds with start-up (B_max 65536; load average {res['plan_load']:.1f} before; "
              "target <= 3 s):")
        for band, by_c in res["plan_s"].items():
            for c, by_d in by_c.items():
                print(f"    {band:>7} C = {c:>3}: " + ", ".join(f"{s:5.2f} s ({d} problems)" for d, s in by_d.items()))
    return 0


def _run_lm(args: argparse.Namespace) -> int:
    from ..errors import IsosimInputError

    try:
        from ..lm.bench import format_lm_benchmark, lm_benchmark
    except ImportError:
        raise IsosimInputError('isosim bench --lm needs PyTorch: pip install -e ".[lm]"') from None
    res = lm_benchmark(args.device)
    if args.json:
        print_json(res)
    else:
        print(format_lm_benchmark(res))
    return 0
