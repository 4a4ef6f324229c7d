"""verl runs: the file logger's JSON lines and the run's config.

**The log.** verl's ``file`` logger (``trainer.logger=[...,"file"]``) writes one JSON object per
``log`` call, ``{"step": s, "data": {metric: value, ...}}``, to ``$VERL_FILE_LOGGER_PATH`` or
``<project>/<experiment>.jsonl``. Step 0 holds the validation before training, step s >= 1 the
metrics of training iteration s (and its validation, every ``trainer.test_freq``). Read:
``val-core/<data source>/<acc or reward>/mean@k`` (the validation metric: the one such key, or
``--val-key``), ``critic/score/mean`` (the training reward), and, to check the config against the
log, ``perf/total_num_tokens``, ``prompt_length/mean`` and ``response_length/mean``.

**The config.** ``actor_rollout_ref.rollout.n`` (n) and ``data.train_batch_size`` (prompts per
iteration: B_problem), from a YAML or JSON file (nested, or with dotted keys): ``--trainer-config``,
or beside the log ``<log name>.yaml`` / ``.yml`` / ``.json``, ``config.yaml`` or
``.hydra/config.yaml``. compute(s) = s * n * B_problem.

**The check.** ``perf/total_num_tokens`` is the number of tokens in the iteration's batch, so
``total / (prompt_length/mean + response_length/mean)`` is the number of rollouts in it; a step
where that differs from n * B_problem by more than 2% means the config is not this run's.
"""
from __future__ import annotations

import json
from pathlib import Path

from ._common import LogFormat, core_keys, fail, number, positive_int, require_val, run_table


def _log_file(path: Path) -> Path:
    if path.is_dir():
        found = sorted(path.glob("*.jsonl"))
        if len(found) != 1:
            fail(path, f"holds {len(found)} .jsonl logs; name one")
        return found[0]
    return path


def _config_file(fmt: LogFormat, log: Path) -> Path | None:
    if fmt.config is not None:
        if not fmt.config.is_file():
            fail(fmt.config, "no such file")
        return fmt.config
    folder = log.parent
    for cand in (log.with_suffix(".yaml"), log.with_suffix(".yml"), log.with_suffix(".json"),
                 folder / "config.yaml", folder / ".hydra" / "config.yaml"):
        if cand.is_file():
            return cand
    return None


def read_config(path: Path) -> dict:
    text = path.read_text()
    if path.suffix.lower() == ".json":
        try:
            cfg = json.loads(text)
        except ValueError as exc:
            fail(path, f"is not JSON ({exc})")
    else:
        try:
            import yaml
        except ImportError:
            fail(path, "reading a YAML config needs PyYAML (pip install 'isosim[logs]')")
        try:
            cfg = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            fail(path, f"is not YAML ({str(exc).splitlines()[0]})")
    if not isinstance(cfg, dict):
        fail(path, "does not hold a config (a mapping)")
    return cfg


def config_value(cfg: dict, dotted: str):
    """``cfg["a"]["b"]["c"]`` for ``"a.b.c"``, or ``cfg["a.b.c"]`` (a flattened config)."""
    if dotted in cfg:
        return cfg[dotted]
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def read(fmt: LogFormat):
    log = _log_file(fmt.path)
    run = log.stem
    steps: dict[int, dict] = {}
    raw: dict[int, dict] = {}
    keys_seen: set = set()
    try:
        lines = log.read_text().splitlines()
    except OSError as exc:
        fail(log, f"cannot read it ({exc.strerror or exc})")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            fail(log, f"line {i + 1} is not JSON")
        if not isinstance(obj, dict) or "step" not in obj or not isinstance(obj.get("data"), dict):
            fail(log, f"line {i + 1} is not a file-logger record {{'step': s, 'data': {{...}}}}")
        step = int(number(log, obj["step"], "step", f" on line {i + 1}"))
        raw.setdefault(step, {}).update(obj["data"])
        keys_seen |= set(obj["data"])
    keys = dict(fmt.keys)
    if "val" not in keys:
        core = core_keys(keys_seen)
        if len(core) > 1:
            fail(log, f"several validation keys ({', '.join(core[:4])}); choose one with --val-key")
        keys["val"] = core[0] if core else "val-core/<source>/acc/mean@k"
    keys.setdefault("train_reward", "critic/score/mean")
    if "zero_std_share" in fmt.keys:
        keys["zero_std_share"] = fmt.keys["zero_std_share"]
    for step, data in raw.items():
        rec = steps.setdefault(step, {})
        for role in ("val", "train_reward", "zero_std_share", "tokens"):
            key = keys.get(role)
            if key in data and data[key] is not None:
                rec[role] = number(log, data[key], key, f" at step {step}")
    require_val(log, steps, keys["val"], {k for k in keys_seen if str(k).startswith("val-")} or keys_seen)
    n_over, bp_over = fmt.overrides.get("n", run), fmt.overrides.get("b_problem", run)
    cfg_file = _config_file(fmt, log)
    used = {}
    if cfg_file is None and (n_over is None or bp_over is None):
        fail(log, "no config beside it (<name>.yaml, config.yaml or .hydra/config.yaml) to take "
                  "actor_rollout_ref.rollout.n and data.train_batch_size from; give --trainer-config, or --n and "
                  "--b-problem")
    if cfg_file is not None:
        cfg = read_config(cfg_file)
        vals = {}
        for key in ("actor_rollout_ref.rollout.n", "data.train_batch_size"):
            v = config_value(cfg, key)
            if v is None:
                fail(cfg_file, f"the config has no {key!r}")
            vals[key] = positive_int(cfg_file, v, key)
        n, bp = vals["actor_rollout_ref.rollout.n"], vals["data.train_batch_size"]
        used = {"n": "actor_rollout_ref.rollout.n", "B_problem": "data.train_batch_size"}
        _check_tokens(log, cfg_file, raw, n * bp)
    if n_over is not None:
        n, used["n"] = n_over, "--n"
    if bp_over is not None:
        bp, used["B_problem"] = bp_over, "--b-problem"
    steps = {s: r for s, r in steps.items() if r}
    source = {"run": run, "kind": "verl", "files": [str(log)] + ([str(cfg_file)] if cfg_file else []),
              "keys": {**{k: v for k, v in keys.items() if v}, **used}, "version": None}
    yield run_table(log, run, n, bp, steps, lambda s: s * n * bp), source


def _check_tokens(log: Path, cfg_file: Path, raw: dict, rollouts: int) -> None:
    for step in sorted(raw):
        d = raw[step]
        if not all(k in d for k in ("perf/total_num_tokens", "prompt_length/mean", "response_length/mean")):
            continue
        per = float(d["prompt_length/mean"]) + float(d["response_length/mean"])
        if per <= 0:
            continue
        implied = float(d["perf/total_num_tokens"]) / per
        if abs(implied / rollouts - 1) > 0.02:
            fail(log, f"step {step}: perf/total_num_tokens implies {implied:.0f} rollouts a step, but "
                      f"{cfg_file.name} gives {rollouts} (actor_rollout_ref.rollout.n x data.train_batch_size): "
                      "the config is not this run's")
