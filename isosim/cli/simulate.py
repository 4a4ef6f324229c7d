"""``isosim simulate``: one run of a surrogate, as a table, a file or JSON."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import IsosimInputError
from ._options import add_config_options, config_from_args, nonnegative_int, output_file, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("simulate", help="run one GRPO simulation and print or save its trace",
                       description="Run one GRPO simulation of a surrogate policy.")
    p.add_argument("--seed", type=nonnegative_int, default=0,
                   help="training seed, an integer >= 0 (the data seed is --data-seed)")
    p.add_argument("--out", metavar="FILE", type=output_file(".parquet", ".csv"),
                   help="write the trace to FILE (.parquet or .csv)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_config_options(p)
    p.set_defaults(func=run)


def summary(trace) -> dict:
    t = trace.table
    last = t[t["step"] == t["step"].max()].iloc[0]
    return {
        "config_id": trace.config.config_id(),
        "steps": int(last["step"]),
        "compute_rollouts": int(last["compute_rollouts"]),
        "compute_tokens": float(last["compute_tokens"]),
        "final": {split: trace.final(split) for split in t["split"].unique()},
    }


def run(args: argparse.Namespace) -> int:
    from ..sim.run import simulate

    cfg = config_from_args(args)
    out = Path(args.out) if args.out else None
    if out is not None and out.suffix not in (".parquet", ".csv"):
        raise IsosimInputError(f"--out must end in .parquet or .csv, got {out.name}")
    from ..experiments.progress import note_compiling

    note_compiling()
    trace = simulate(cfg, args.seed)
    if out is not None:
        write_trace(trace, out)
    info = summary(trace)
    if args.json:
        print_json(info)
        return 0
    print(f"config {info['config_id']}: {info['steps']} steps, {info['compute_rollouts']:,} rollouts "
          f"(n={cfg.allocation.n}, B_problem={cfg.allocation.b_problem}, model={cfg.model.kind}, "
          f"preset={cfg.population.preset})")
    print(final_table(info["final"]))
    if out is not None:
        print(f"trace written to {out}")
    return 0


def final_table(final: dict) -> str:
    """The final metrics, one row per split: every column as wide as its longest name or value
    (at least 12), so that long metric names (``best@4:sampled``) and splits (``val/very-easy``)
    stay apart."""
    metrics = [m for m in final["val"] if "@" in m]
    first = max(12, *(len(s) + 2 for s in final))
    widths = [max(12, len(m) + 2) for m in metrics]
    lines = [f"{'split':<{first}}" + "".join(f"{m:>{w}}" for m, w in zip(metrics, widths))]
    for split, vals in final.items():
        lines.append(f"{split:<{first}}" + "".join(f"{vals.get(m, float('nan')):>{w}.4f}"
                                                   for m, w in zip(metrics, widths)))
    return "\n".join(lines)


def write_trace(trace, out: Path) -> None:
    """Write the trace table (and its snapshots beside it, if any), each atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_table(trace.table, out)
    if len(trace.snapshots):
        _write_table(trace.snapshots, out.with_name(out.stem + ".snapshots" + out.suffix))


def _write_table(df, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if path.suffix == ".parquet":
        df.to_parquet(tmp, index=False)
    else:
        df.to_csv(tmp, index=False)
    tmp.replace(path)
