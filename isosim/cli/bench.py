"""``isosim bench``: throughput of the kernels, reported as ratios measured in one run."""
from __future__ import annotations

import argparse
import os

from ..errors import IsosimInputError
from ._options import positive_int, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark the simulation kernels (ratios measured in one run)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--steps", type=positive_int, default=400, help="training steps timed per measurement")
    p.add_argument("--no-sweep", action="store_true", help="skip the sweep throughput line")
    p.add_argument("--no-plan", action="store_true", help="skip the planner timings (plan_s, plan_ensemble_s)")
    p.add_argument("--lm", action="store_true", help="benchmark the small-LM path instead (needs the lm extra)")
    p.add_argument("--device", default=None, choices=("cpu", "cuda"), help="torch device for --lm (default cpu)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.lm:
        return _run_lm(args)
    if args.device is not None:
        raise IsosimInputError("--device applies to --lm only (the kernel benchmark runs on the CPU)")
    from ..calibrate.config_file import model_config_text
    from ..experiments.bench import PLAN_ENSEMBLE, run_benchmarks
    from ..sim.config import SimConfig

    ensemble = None if args.no_plan else model_config_text(SimConfig(), PLAN_ENSEMBLE, {"metric": "avg@4"})
    res = run_benchmarks(steps=args.steps, sweep=not args.no_sweep, plan=not args.no_plan, plan_model_config=ensemble)
    if args.json:
        print_json(res)
        return 0
    print(format_benchmark(res, cores=os.cpu_count() or 1))
    return 0


def _run_lm(args: argparse.Namespace) -> int:
    try:
        from ..lm.bench import format_lm_benchmark, lm_benchmark
    except ImportError:
        raise IsosimInputError('isosim bench --lm needs PyTorch: pip install -e ".[lm]"') from None
    device = args.device or "cpu"
    check_device(device)
    res = lm_benchmark(device)
    if args.json:
        print_json(res)
    else:
        print(format_lm_benchmark(res))
    return 0


def check_device(device: str) -> None:
    """Refuse a torch device the host does not have (one line, before any work)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise IsosimInputError("--device cuda: no CUDA device is available (PyTorch "
                               + ("has no CUDA support)" if torch.version.cuda is None else "finds no GPU)"))


#: the n at which the step time has a target against its arithmetic floor
FLOOR_TARGET_N = ("2", "8")


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def format_benchmark(res: dict, cores: int) -> str:
    """The benchmark as text: each target printed beside the one measure it applies to, with
    whether this run met it (the sweep target only where two or more cores can run workers)."""
    lines = ["isosim benchmark (default easy config: strategies model, 6000 + 300 problems, B_problem = 32)",
             "  step time by n (us), beside the arithmetic floor of the same step (one vectorised NumPy pass):"]
    for n, row in res["step_us_by_n"].items():
        ratio = row["ratio_to_floor"]
        target = f" (target <= 3: {_verdict(ratio <= 3)})" if n in FLOOR_TARGET_N else ""
        lines.append(f"    n = {n:>4}: {row['step_us']:7.1f} us, floor {row['floor_us']:6.1f} us, "
                     f"ratio {ratio:.2f}{target}")
    speedup, cost = res["speedup"], res["step_cost_ratio_n2048_n8"]
    mem = res["simulate_peak_rss_mb"]
    lines += [
        f"  numba kernel:  {res['numba_rollouts_per_s']:>14,.0f} rollouts/s  (n = 16)",
        f"  numpy twin:    {res['numpy_rollouts_per_s']:>14,.0f} rollouts/s  (n = 16)",
        f"  speed-up:      {speedup:>14.1f}x   (target >= 30x: {_verdict(speedup >= 30)})",
        f"  step time n=2048 / n=8: {cost:.2f}   (target <= 1.5: {_verdict(cost <= 1.5)})",
        f"  peak memory of one simulate: {mem:.0f} MB (target < 300 MB: {_verdict(mem < 300)})",
        f"  trace rows at M=1000 vs M=10000 (same n_evals): {res['trace_rows_m1000']} vs {res['trace_rows_m10000']}",
    ]
    if "sweep_speedup_2_workers" in res:
        sp = res["sweep_speedup_2_workers"]
        target = (f" (target >= 1.7x: {_verdict(sp >= 1.7)})" if cores >= 2
                  else " (no target: one core cannot run two workers at once)")
        lines.append(f"  sweep: {res['sweep_configs_per_s_1_worker']:.2f} configs/s with 1 worker, "
                     f"{res['sweep_configs_per_s_2_workers']:.2f} with 2: {sp:.2f}x{target}")
    if "plan_s" in res:
        worst = res["plan_s_max"] if "plan_s_max" in res else max(
            s for by_c in res["plan_s"].values() for by_d in by_c.values() for s in by_d.values())
        lines.append(f"  isosim plan, wall seconds with start-up (B_max 65536; load average {res['plan_load']:.1f} before; "
                     f"target <= 3 s for every case: {_verdict(worst <= 3)}):")
        for band, by_c in res["plan_s"].items():
            for c, by_d in by_c.items():
                lines.append(f"    {band:>7} C = {c:>3}: " + ", ".join(f"{t:5.2f} s ({d} problems)" for d, t in by_d.items()))
    if "plan_ensemble_s" in res:
        from ..experiments.bench import PLAN_ENSEMBLE, PLAN_ENSEMBLE_PROBLEMS

        worst = res["plan_ensemble_s_max"]
        lines.append(f"  with a calibrated model config ({len(PLAN_ENSEMBLE)}-member ensemble, {PLAN_ENSEMBLE_PROBLEMS} "
                     f"problems; target <= 3 s for every case: {_verdict(worst <= 3)}):")
        for band, by_c in res["plan_ensemble_s"].items():
            lines.append(f"    {band:>7}: " + ", ".join(f"C = {c} {t:5.2f} s" for c, by_d in by_c.items()
                                                    for t in by_d.values()))
    return "\n".join(lines)
