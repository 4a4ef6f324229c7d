"""``isosim fit FILE``: the IsoCompute frontier and the n*(C) scaling law of a user's runs."""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import IsosimInputError
from . import _logs
from ._options import nonnegative_int, output_file

if TYPE_CHECKING:  # the analysis stack (scipy, pandas) loads only when the command runs
    from ..analysis.fit import RunsAnalysis, ScalingLawFit

DESCRIPTION = """\
Fit the IsoCompute workflow to RL logs (CSV or Parquet, one row per evaluation with columns
run, n, B_problem, compute or step, and metric columns): record-breaking points, one ScaleRL
sigmoid per n, the compute-optimal envelope n*(C), and
log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b with bootstrap CIs over runs."""


def register(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "fit", help="fit the frontier and the n*(C) scaling law to run logs", description=DESCRIPTION
    )
    parser.add_argument("file", metavar="FILE", nargs="+",
                        help="CSV or Parquet (.parquet, .pq) run logs, or trainers' logs: TRL output directories, verl "
                             ".jsonl logs, TensorBoard event directories, W&B / MLflow CSV exports (one per run; globs)")
    parser.add_argument("--metric", default=None,
                        help="metric column to fit (default: avg@4; for trainers' logs, the validation key's name)")
    parser.add_argument(
        "--bucket", type=float, default=0.005, metavar="W",
        help="reward bucket width for record-breaking points; 0 keeps every improvement (default: 0.005)",
    )
    parser.add_argument("--n-boot", type=nonnegative_int, default=200, metavar="N", help="bootstrap resamples (default: 200)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--plot", metavar="OUT.png", type=output_file(".png", ".pdf"), help="write the frontier and n*(C) figure (.png or .pdf)")
    _logs.add_log_options(parser, ("--n", "--log-n"), ("--b-problem", "--log-b-problem"))
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    if not (math.isfinite(args.bucket) and args.bucket >= 0):
        raise IsosimInputError(f"--bucket must be a number >= 0, got {args.bucket}")
    if args.n_boot < 0:
        raise IsosimInputError(f"--n-boot must be >= 0, got {args.n_boot}")
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".pdf"):
        raise IsosimInputError(f"--plot must name a .png or .pdf file, got {args.plot}")
    from ..analysis.fit import analyse_runs
    from ..analysis.logs import is_log
    from ..analysis.runs import load_runs, validate_runs

    logs = None
    if is_log(args.file):
        logs = _logs.read(args.file, args, args.metric)
        metric = logs.metric
        runs = validate_runs(logs.evaluations(), metric)
    else:
        metric = "avg@4" if args.metric is None else args.metric
        runs = load_runs(args.file[0], metric=metric)
    result = analyse_runs(runs, metric, args.bucket, args.n_boot, args.seed)
    if args.plot:
        _plot(result, Path(args.plot))
    source = " ".join(args.file)
    if args.json:
        out = result.to_json()
        if logs is not None:
            out["runs"] = _logs.summary(logs)
        print(json.dumps(out, indent=2))
    else:
        text = report(result, source)
        if logs is not None:
            head, _, rest = text.partition("\n")
            text = "\n".join([head, *_logs.report_lines(logs), rest])
        print(text)
    return 0


def _plot(result: RunsAnalysis, path: Path) -> None:
    from ..analysis.plotting import new_figure, plot_frontier, plot_n_star, save_figure, set_style

    set_style()
    fig, (left, right) = new_figure(ncols=2)
    plot_frontier(result.runs.assign(value=result.runs[result.metric]), result.frontier, ax=left)
    left.set_ylabel(result.metric)
    plot_n_star(result.n_star, result.law, ax=right)
    save_figure(fig, path, formats=(path.suffix.lstrip(".").lower(),))


def _ci(fit: ScalingLawFit, name: str) -> str:
    lo, hi = fit.ci.get(name, (math.nan, math.nan))
    return "n/a" if not (math.isfinite(lo) and math.isfinite(hi)) else f"[{lo:.3g}, {hi:.3g}]"


def _left_out(points) -> list[str]:
    """One line per lone n: the grid points n*(C) leaves out because only that n's curve reaches them."""
    by_n: dict[int, list[float]] = {}
    for p in points:
        by_n.setdefault(int(p["n"]), []).append(float(p["compute"]))
    return [f"  left out: {len(cs)} grid point{'s' if len(cs) > 1 else ''} at C = {min(cs):.3g}"
            + (f" to {max(cs):.3g}" if len(cs) > 1 else "")
            + f", reached only by the curve of n = {n} (n* needs two or more n to compare)"
            for n, cs in sorted(by_n.items())]


def report(result: RunsAnalysis, source: str = "") -> str:
    """The human-readable summary: the n*(C) table and the fitted law with its CIs."""
    runs, law, boot = result.runs, result.law, result.bootstrap
    lines = [
        f"isosim fit {source}".rstrip(),
        f"  metric {result.metric}, bucket {result.bucket:g}: {runs['run'].nunique()} runs, "
        f"n in {{{', '.join(str(n) for n in sorted(runs['n'].unique()))}}}, "
        f"{len(result.records)} record-breaking points of {len(runs)}",
    ]
    if result.skipped:
        lines.append(
            "  no curve for n = " + ", ".join(str(k[0]) for k in result.skipped)
            + " (too few record-breaking points, or none above the reward before training)"
        )
    fitted = sorted(k[0] for k in result.curves)
    measured = [n for n in fitted if (n,) in result.measured_start]
    if measured == fitted:
        lines.append("  every curve starts from its runs' reward before training (evaluations at step 0)")
    elif measured:
        lines.append("  curves start from the runs' reward before training for n = " + ", ".join(map(str, measured))
                     + "; the others' start is fitted (no evaluation at step 0)")
    else:
        lines.append("  no evaluation at step 0: each curve's starting reward is fitted")
    lines += ["", "n*(C): the n whose fitted ScaleRL curve tops the envelope", ""]
    lines.append(f"  {'compute':>10}  {'log10 C':>7}  {'n*':>5}  {'fit n*':>7}  {'reward':>7}")
    for c, n, v in zip(result.n_star["compute"], result.n_star["n"], result.n_star["value"]):
        x = math.log10(c)
        lines.append(f"  {c:>10.3g}  {x:>7.2f}  {n:>5d}  {2 ** float(law.predict(x)):>7.1f}  {v:>7.4f}")
    lines += _left_out(result.too_few_groups)
    how = "no bootstrap"
    if boot is not None:
        how = f"{boot.level:.0%} CI, {boot.n_ok}/{boot.n_boot} bootstrap resamples of {boot.mode}"
    lines += [
        "",
        "log2 n*(C) = L / (1 + exp(-k (log10 C - log10 C0))) + b",
        "",
        f"  {'param':<9} {'value':>8}  {how}",
    ]
    for name, value in law.params().items():
        lines.append(f"  {name:<9} {value:>8.3f}  {_ci(law, name)}")
    from ..analysis.fit import law_warnings

    warnings = law_warnings(result)
    beyond = any(w.startswith("the law saturates") for w in warnings)
    lines += [
        "",
        f"  R^2 {law.r2:.3f}; saturation L + b = {law.saturation:.2f} "
        + ("(beyond the n measured: n* not determined past the largest C)" if beyond
           else f"(n* -> {2 ** law.saturation:.0f})"),
    ]
    dropped = int(runs.attrs.get("dropped_rows", 0))
    if dropped:
        lines.append(f"  {dropped} row{'s' if dropped > 1 else ''} without a {result.metric} value left out")
    lines += [f"  warning: {w}" for w in warnings]
    return "\n".join(lines)
