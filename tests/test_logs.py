"""Trainers' logs into `isosim fit` and `isosim calibrate`: real TRL GRPO runs made here (a tiny
random Qwen2 and a word-level tokenizer built locally, offline, on CPU), the TensorBoard events
their callback writes and events of TensorBoard's own writer, W&B and MLflow CSV layouts, verl's
file-logger format, and bad logs (one line naming the file, exit code 2, nothing written)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from isosim.analysis.logs import read_logs
from isosim.cli import main
from isosim.errors import IsosimInputError

ROOT = Path(__file__).resolve().parent.parent
NS = (2, 4, 8)
B_PROBLEM, STEPS = 4, 40


def _curve(n: int, compute: float) -> float:
    """A reward curve whose small-n version rises first and the large-n one ends higher: n* grows."""
    return 0.2 + (0.2 + 0.03 * n) * (1 - np.exp(-compute / (150.0 * n)))


def _maker():
    spec = importlib.util.spec_from_file_location("make_trl_runs", ROOT / "docs" / "make_trl_runs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def trl_runs(tmp_path_factory):
    """Three real GRPOTrainer runs (n = 2, 4, 8; 4 prompts a step; 40 steps; evaluated at the
    start and every 4 steps) and the base model's pass rates: made once for this file."""
    pytest.importorskip("trl")
    mk = _maker()
    mk.offline()
    out = tmp_path_factory.mktemp("trl")
    dirs = [mk.make_run(out / f"n{n}", n, seed=0, steps=STEPS, b_problem=B_PROBLEM) for n in NS]
    rates = mk.base_pass_rates(out / "pass_rates.csv", seed=0, problems=64)
    return dirs, rates


def _history(d: Path):
    return json.loads((d / "trainer_state.json").read_text())["log_history"]


def test_trl_runs_are_read_with_n_b_problem_and_compute_exact(trl_runs):
    dirs, _ = trl_runs
    logs = read_logs(dirs, "avg@1")
    t = logs.table
    for d, n in zip(dirs, NS):
        r = t[t["run"] == d.name]
        assert set(r["n"]) == {n} and set(r["B_problem"]) == {B_PROBLEM}
        assert np.array_equal(r["compute"].to_numpy(), r["step"].to_numpy() * n * B_PROBLEM)
        hist = _history(d)
        evals = {e["step"]: e["eval_reward"] for e in hist if "eval_reward" in e}
        got = r.dropna(subset=["avg@1"]).set_index("step")["avg@1"].to_dict()
        assert got == pytest.approx(evals) and 0 in got and max(got) == STEPS
        zero = {e["step"]: e["frac_reward_zero_std"] for e in hist if "frac_reward_zero_std" in e}
        assert r.dropna(subset=["zero_std_share"]).set_index("step")["zero_std_share"].to_dict() == pytest.approx(zero)
        assert logs.sources[dirs.index(d)]["keys"]["n"] == "num_generations"


def test_fit_json_reads_trl_output_directories(trl_runs, capsys, tmp_path):
    dirs, _ = trl_runs
    plot = tmp_path / "fit.png"
    rc = main(["fit", *map(str, dirs), "--json", "--n-boot", "0", "--bucket", "0", "--plot", str(plot)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["metric"] == "eval_reward" and plot.is_file()
    runs = {r["run"]: r for r in out["runs"]}
    for d, n in zip(dirs, NS):
        assert (runs[d.name]["n"], runs[d.name]["B_problem"], runs[d.name]["steps"]) == (n, B_PROBLEM, STEPS)
        assert runs[d.name]["compute"] == STEPS * n * B_PROBLEM and runs[d.name]["trainer"] == "trl"
    logged = {(n, B_PROBLEM, s * n * B_PROBLEM) for n in NS for s in range(0, STEPS + 1, 4)}
    assert out["frontier"] and all((p["n"], p["B_problem"], p["compute"]) in logged for p in out["frontier"])
    assert {p["n"] for p in out["n_star"]} <= set(NS)


def test_calibrate_json_reads_trl_output_directories(trl_runs, capsys, tmp_path):
    dirs, rates = trl_runs
    out_file = tmp_path / "calib.toml"
    rc = main(["calibrate", *map(str, dirs), "--pass-rates", str(rates), "--n", "2,4,8", "--json",
               "--out", str(out_file), "--workers", "1"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out_file.is_file()
    assert sorted(out["pilot_n"]) == list(NS) and out["B_problem"] == B_PROBLEM
    assert out["pilot_budget"] == STEPS * max(NS) * B_PROBLEM
    assert {(r["n"], r["compute"]) for r in out["runs"]} == {(n, STEPS * n * B_PROBLEM) for n in NS}
    zero = {z["n"]: z for z in out["zero_signal"]}
    assert set(zero) == set(NS)
    for n in NS:
        logged = np.mean([e["frac_reward_zero_std"] for e in _history(dirs[NS.index(n)]) if "frac_reward_zero_std" in e])
        assert zero[n]["logged"] == pytest.approx(logged) and 0 <= zero[n]["surrogate"] <= 1
        assert zero[n]["steps"] == STEPS
    # with larger groups fewer agree, in the surrogate as in the pass rates
    assert zero[8]["base"] < zero[2]["base"]


def test_tensorboard_events_of_the_trl_callback_match_the_trainer_state(trl_runs):
    pytest.importorskip("tensorboard")
    dirs, _ = trl_runs
    d = dirs[1]
    tb = read_logs([d / "runs"], "avg@1")
    st = read_logs([d], "avg@1").table
    t = tb.table
    assert set(t["n"]) == {NS[1]} and set(t["B_problem"]) == {B_PROBLEM}
    assert tb.sources[0]["keys"]["val"] == "eval/reward"
    a = t.dropna(subset=["avg@1"]).set_index("step")["avg@1"]
    b = st.dropna(subset=["avg@1"]).set_index("step")["avg@1"]
    assert a.to_dict() == pytest.approx(b.to_dict(), rel=1e-6)  # TensorBoard stores float32
    assert np.array_equal(t["compute"], t["step"] * NS[1] * B_PROBLEM)


def test_tensorboard_writer_events_with_a_tag_map(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(0)
    for n in (4, 16):
        w = SummaryWriter(str(tmp_path / f"tb-n{n}"))
        for step in range(0, 61, 3):
            w.add_scalar("val/accuracy", _curve(n, step * n * 8) + rng.normal(0, 0.002), step)
            w.add_scalar("train/acc", 0.3, step)
        w.close()
    rc = main(["fit", str(tmp_path / "tb-n4"), str(tmp_path / "tb-n16"), "--log-map",
               "val=val/accuracy,train_reward=train/acc", "--n", "tb-n4=4,tb-n16=16", "--b-problem", "8",
               "--json", "--n-boot", "0"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    runs = {r["run"]: r for r in json.loads(captured.out)["runs"]}
    assert (runs["tb-n4"]["n"], runs["tb-n16"]["n"]) == (4, 16)
    assert runs["tb-n16"]["compute"] == 60 * 16 * 8 and runs["tb-n16"]["keys"]["val"] == "val/accuracy"


def _as_exports(trl_dirs, tmp_path):
    """The TRL runs' logs as a W&B panel export and an MLflow metric-history export."""
    logs = read_logs(trl_dirs, "eval_reward").table
    panel = pd.DataFrame({"Step": sorted(set(logs["step"]))})
    long = []
    for run, g in logs.groupby("run"):
        v = g.set_index("step")["eval_reward"]
        panel[f"{run} - eval/reward"] = panel["Step"].map(v)
        panel[f"{run} - eval/reward__MIN"] = panel[f"{run} - eval/reward"]
        for s, x in v.dropna().items():
            long.append({"run_id": run, "key": "eval_reward", "value": x, "step": s, "timestamp": 0})
    panel.to_csv(tmp_path / "wandb.csv", index=False)
    pd.DataFrame(long).to_csv(tmp_path / "mlflow.csv", index=False)
    return logs


def test_wandb_and_mlflow_exports_give_the_same_table(trl_runs, tmp_path):
    dirs, _ = trl_runs
    ref = _as_exports(dirs, tmp_path)
    ns = ",".join(f"{d.name}={n}" for d, n in zip(dirs, NS))
    cols = ["run", "n", "B_problem", "step", "compute", "eval_reward"]
    want = ref.dropna(subset=["eval_reward"])[cols].reset_index(drop=True)
    for f in ("wandb.csv", "mlflow.csv"):
        got = read_logs([tmp_path / f], "eval_reward", n=ns, b_problem=B_PROBLEM).evaluations()
        pd.testing.assert_frame_equal(got[cols], want, check_dtype=False)


def _verl_tracking():
    """verl's own tracking module, loaded without verl's package init (which needs Ray), or None."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "utils" / "tracking.py"
    try:
        s = importlib.util.spec_from_file_location("_verl_tracking", path)
        mod = importlib.util.module_from_spec(s)
        s.loader.exec_module(mod)
        return mod
    except Exception:
        return None


def _write_verl(path: Path, n: int, bp: int, tokens_scale: float = 1.0):
    """A verl run's file log (verl's FileLogger where it imports, else its documented format:
    one {"step", "data"} object per line) and its config."""
    rows = []
    for step in range(0, 61):
        data = {}
        if step % 3 == 0:
            data["val-core/gsm8k/acc/mean@4"] = _curve(n, step * n * bp)
            data["val-aux/gsm8k/acc/best@4/mean"] = 0.5
        if step > 0:
            data.update({"critic/score/mean": 0.3, "prompt_length/mean": 100.0, "response_length/mean": 300.0,
                         "perf/total_num_tokens": 400.0 * n * bp * tokens_scale})
        rows.append((step, data))
    mod = _verl_tracking()
    if mod is not None:
        os.environ["VERL_FILE_LOGGER_PATH"] = str(path)
        try:
            logger = mod.FileLogger("p", "e")
            for step, data in rows:
                logger.log(data, step)
            logger.finish()
        finally:
            del os.environ["VERL_FILE_LOGGER_PATH"]
    else:
        path.write_text("".join(json.dumps({"step": s, "data": d}) + "\n" for s, d in rows))
    path.with_suffix(".yaml").write_text(
        f"data:\n  train_batch_size: {bp}\nactor_rollout_ref:\n  rollout:\n    n: {n}\n")


def test_verl_file_logs_and_configs(tmp_path, capsys):
    pytest.importorskip("yaml")
    for n in (4, 16):
        _write_verl(tmp_path / f"verl-n{n}.jsonl", n, 8)
    capsys.readouterr()  # verl's FileLogger prints where it writes
    rc = main(["fit", str(tmp_path / "verl-n4.jsonl"), str(tmp_path / "verl-n16.jsonl"), "--json", "--n-boot", "0"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    out = json.loads(captured.out)
    runs = {r["run"]: r for r in out["runs"]}
    assert out["metric"] == "val-core/gsm8k/acc/mean@4"
    assert (runs["verl-n16"]["n"], runs["verl-n16"]["B_problem"], runs["verl-n16"]["compute"]) == (16, 8, 60 * 16 * 8)
    assert runs["verl-n4"]["keys"]["n"] == "actor_rollout_ref.rollout.n"


def _fails(capsys, argv, *needles, written=()):
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    for p in written:
        assert not Path(p).exists()
    return err


def test_bad_logs_fail_in_one_line_naming_the_file_and_key(trl_runs, tmp_path, capsys):
    dirs, rates = trl_runs
    plot, toml = tmp_path / "f.png", tmp_path / "c.toml"
    # no validation metric under the chosen key
    _fails(capsys, ["fit", *map(str, dirs), "--val-key", "eval_accuracy", "--plot", str(plot)],
           "trainer_state.json", "'eval_accuracy'", written=[plot])
    _fails(capsys, ["calibrate", *map(str, dirs), "--pass-rates", str(rates), "--val-key", "nope", "--out", str(toml)],
           "'nope'", written=[toml])
    # a directory without trainer_state.json
    (tmp_path / "empty" / "checkpoint-3").mkdir(parents=True)
    (tmp_path / "empty" / "runs").mkdir()
    _fails(capsys, ["fit", str(dirs[0]), str(tmp_path / "empty")], "empty", "not a log")
    # a trainer config that does not match the state
    bad = tmp_path / "mismatch"
    bad.mkdir()
    state = json.loads((dirs[0] / "trainer_state.json").read_text())
    state["train_batch_size"] = 999
    (bad / "trainer_state.json").write_text(json.dumps(state))
    (bad / "training_args.bin").write_bytes((dirs[0] / "training_args.bin").read_bytes())
    _fails(capsys, ["fit", str(bad), str(dirs[1])], "mismatch/trainer_state.json", "train_batch_size 999",
           "per_device_train_batch_size")
    # no config at all and no --n
    nocfg = tmp_path / "nocfg"
    nocfg.mkdir()
    (nocfg / "trainer_state.json").write_text(json.dumps(state))
    _fails(capsys, ["fit", str(nocfg), str(dirs[1])], "nocfg", "training_args.bin", "--n")
    # n changing within a run (CSV export with an n column)
    pd.DataFrame({"_step": [1, 2, 3, 4], "eval/reward": [0.1, 0.2, 0.3, 0.4], "num_generations": [4, 4, 8, 8]}
                 ).to_csv(tmp_path / "hist.csv", index=False)
    _fails(capsys, ["fit", str(tmp_path / "hist.csv"), "--log-map", "n=num_generations", "--b-problem", "8"],
           "hist.csv", "n changes within the run", "'num_generations'")
    # a verl config that does not match its log
    _write_verl(tmp_path / "v.jsonl", 8, 16, tokens_scale=0.5)
    capsys.readouterr()
    _fails(capsys, ["fit", str(tmp_path / "v.jsonl"), str(dirs[0]), "--plot", str(plot)], "v.jsonl",
           "perf/total_num_tokens", "not this run's", written=[plot])
    # an unreadable trainer_state.json
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "trainer_state.json").write_text("{")
    _fails(capsys, ["fit", str(broken), str(dirs[0])], "broken/trainer_state.json", "JSON")


def test_training_args_are_read_without_running_the_pickle(tmp_path):
    """A training_args.bin whose pickle would run code on load is read as data: nothing runs."""
    import pickle
    import zipfile

    from isosim.analysis.logs.trl import read_training_args

    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    payload = pickle.dumps({"num_generations": 4, "hook": Boom()})
    with zipfile.ZipFile(tmp_path / "training_args.bin", "w") as z:
        z.writestr("training_args/data.pkl", payload)
    args = read_training_args(tmp_path / "training_args.bin")
    assert args["num_generations"] == 4 and not (tmp_path / "ran").exists()
    with pytest.raises(IsosimInputError, match="x.bin: is not a torch.save"):
        (tmp_path / "x.bin").write_bytes(b"not a zip")
        read_training_args(tmp_path / "x.bin")


def test_importing_isosim_loads_no_log_reader_dependency():
    import subprocess

    code = ("import sys, isosim, isosim.analysis.logs, isosim.cli.fit, isosim.cli.calibrate; "
            "print(sorted(m for m in ('trl', 'transformers', 'tensorboard', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
