"""TensorBoard event directories, read with TensorBoard's own ``EventAccumulator``.

Each directory that holds ``events.out.tfevents.*`` files is one run (named by its path under
the directory given). Scalars are looked up by tag: by default the tags of the Hugging Face
TensorBoard callback that TRL uses (``eval/reward``, ``train/reward``,
``train/frac_reward_zero_std``, ``train/num_tokens``), then verl's (``val-core/...``,
``critic/score/mean``); ``--log-map role=tag`` (or ``--val-key TAG``) names others. n and
B_problem come from the callback's ``args`` text entry (the run's ``GRPOConfig`` as JSON, read
as in :mod:`isosim.analysis.logs.trl`), or from ``--n`` and ``--b-problem``.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import trl
from ._common import LogFormat, choose_keys, fail, number, require_val, run_table
from ._events import accumulator, text_entries

DEFAULT_TAGS = {"val": ("eval/reward",), "train_reward": ("train/reward", "critic/score/mean"),
                "zero_std_share": ("train/frac_reward_zero_std",), "tokens": ("train/num_tokens",)}


def _run_dirs(path: Path) -> list[Path]:
    if path.is_file():
        return [path.parent]
    return sorted({p.parent for p in path.rglob("events.out.tfevents.*")})


def read(fmt: LogFormat):
    root = fmt.path
    dirs = _run_dirs(root)
    for d in dirs:
        run = root.name if d == root or root.is_file() else f"{root.name}/{d.relative_to(root).as_posix()}"
        yield _read_run(fmt, d, run)


def _read_run(fmt: LogFormat, d: Path, run: str):
    acc = accumulator(d)
    tags = set(acc.Tags().get("scalars", []))
    keys = dict(fmt.keys)
    chosen = choose_keys(d, tags, keys, DEFAULT_TAGS, "tags")
    val_tag = chosen["val"]
    if val_tag is None:
        want = keys.get("val", DEFAULT_TAGS["val"][0])
        shown = sorted(tags)
        fail(d, f"no scalar tag {want!r} for the validation metric (tags: {', '.join(shown[:12]) or 'none'}"
                f"{' and more' if len(shown) > 12 else ''}); choose one with --val-key")
    steps: dict[int, dict] = {}
    for role, tag in chosen.items():
        for ev in acc.Scalars(tag):
            steps.setdefault(int(ev.step), {})[role] = number(d, ev.value, tag, f" at step {ev.step}")
    require_val(d, steps, val_tag, tags)
    args_text = text_entries(d).get("args")
    args = None
    if args_text:
        try:
            args = json.loads(args_text)
        except ValueError:
            fail(d, "its 'args' text entry is not JSON")
    n_over, bp_over = fmt.overrides.get("n", run), fmt.overrides.get("b_problem", run)
    if args is None and (n_over is None or bp_over is None):
        fail(d, "no 'args' text entry (a trainer config) to take n and B_problem from; give --n and --b-problem")
    n, bp, compute_of, used = trl.allocation(d, args, {}, d, n_over, bp_over)
    source = {"run": run, "kind": "tensorboard", "files": [str(p) for p in sorted(d.glob("events.out.tfevents.*"))],
              "keys": {**chosen, **used}, "version": None}
    return run_table(d, run, n, bp, steps, compute_of), source
