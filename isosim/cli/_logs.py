"""The options of ``isosim fit`` and ``isosim calibrate`` that read trainers' logs (TRL, verl,
TensorBoard, W&B or MLflow CSV exports), and the lines that report what was read."""
from __future__ import annotations

import argparse
import math


def add_log_options(parser: argparse.ArgumentParser, n_flags=("--log-n",), bp_flags=("--log-b-problem",)) -> None:
    g = parser.add_argument_group(
        "trainers' logs", "read TRL output directories, verl .jsonl logs, TensorBoard event directories or "
                          "W&B / MLflow CSV exports instead of a runs table (one path or glob per run)")
    g.add_argument("--val-key", metavar="KEY",
                   help="the log key of the validation metric (default: TRL eval_reward, TensorBoard eval/reward, "
                        "verl's val-core/<source>/<acc or reward>/mean@k)")
    g.add_argument("--log-map", metavar="ROLE=KEY,...",
                   help="log keys (TensorBoard tags, CSV columns) by role: val, train_reward, zero_std_share, tokens, "
                        "and for CSV exports step, run, n, B_problem")
    g.add_argument(*n_flags, dest="log_n", metavar="N|RUN=N,...",
                   help="rollouts per problem of every run (or per run), instead of the trainer's config")
    g.add_argument(*bp_flags, dest="log_b_problem", metavar="B|RUN=B,...",
                   help="problems per optimiser step of every run (or per run), instead of the trainer's config")
    g.add_argument("--trainer-config", metavar="FILE",
                   help="the trainer's config of a single verl run (YAML or JSON), when it is not beside the log")


def read(paths, args: argparse.Namespace, metric: str | None):
    """``RunLogs`` from the command's paths and log options; the validation column is named
    ``metric``, or, when None, after the validation key all runs share (else ``val_reward``)."""
    from ..analysis.logs import parse_map, read_logs

    logs = read_logs(paths, metric or "val_reward", val_key=args.val_key, log_map=parse_map(args.log_map),
                     n=args.log_n, b_problem=args.log_b_problem, trainer_config=args.trainer_config)
    if metric is None:
        keys = {s["keys"].get("val") for s in logs.sources}
        if len(keys) == 1 and None not in keys and next(iter(keys)) not in logs.table.columns:
            from ..analysis.logs import RunLogs

            name = next(iter(keys))
            logs = RunLogs(logs.table.rename(columns={"val_reward": name}), name, logs.sources)
    return logs


def summary(logs) -> list[dict]:
    """One dict per run: what was read and from which keys (``--json``'s ``runs``)."""
    t = logs.table
    out = []
    for src in logs.sources:
        r = t[t["run"] == src["run"]]
        ev = r[r[logs.metric].notna()]
        z = r["zero_std_share"].dropna()
        out.append({"run": src["run"], "trainer": src["kind"], "n": int(r["n"].iloc[0]),
                    "B_problem": int(r["B_problem"].iloc[0]), "steps": int(r["step"].max()),
                    "compute": float(r["compute"].max()), "evaluations": int(len(ev)),
                    "zero_std_share": float(z.mean()) if len(z) else None,
                    "keys": src["keys"], "files": src["files"]})
    return out


def report_lines(logs) -> list[str]:
    """The text report's lines on the logs read."""
    lines = [f"  read {len(logs.sources)} trainer log{'s' if len(logs.sources) != 1 else ''}: "
             f"validation metric {logs.metric!r} from {sorted({s['keys'].get('val') for s in logs.sources})[0]!r}"
             + (" (and others)" if len({s['keys'].get('val') for s in logs.sources}) > 1 else "")]
    lines.append(f"    {'run':<24} {'trainer':<11} {'n':>5} {'B_problem':>9} {'steps':>6} {'compute':>10} "
                 f"{'evals':>5} {'zero-signal':>11}")
    for s in summary(logs):
        z = s["zero_std_share"]
        lines.append(f"    {s['run'][:24]:<24} {s['trainer']:<11} {s['n']:>5} {s['B_problem']:>9} {s['steps']:>6} "
                     f"{s['compute']:>10.4g} {s['evaluations']:>5} {('%.3f' % z) if z is not None and math.isfinite(z) else '-':>11}")
    return lines
