import json
import subprocess
import sys

import pandas as pd
import pytest

from isosim.cli import main

FAST = ["--train-size", "300", "--val-size", "30", "--n-strategies", "16", "--rank", "4", "--measure", "exact"]


def test_simulate_json(capsys):
    assert main(["simulate", "--n", "8", "--b-problem", "16", "--budget", "4096", "--json", *FAST]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"config_id", "steps", "compute_rollouts", "final"}
    assert out["steps"] == 32 and out["compute_rollouts"] == 4096
    assert {"avg@4", "best@4", "worst@4"} <= set(out["final"]["val"]) and "train" in out["final"]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_simulate_writes_trace(tmp_path, capsys, suffix):
    out = tmp_path / f"trace{suffix}"
    assert main(["simulate", "--steps", "10", "--out", str(out), "--snapshot-steps", "0,10", *FAST]) == 0
    df = pd.read_parquet(out) if suffix == ".parquet" else pd.read_csv(out)
    assert list(df.columns) == ["config_id", "seed", "step", "compute_rollouts", "compute_tokens", "split",
                                "metric", "value"]
    snaps = out.with_name("trace.snapshots" + suffix)
    assert snaps.exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_simulate_from_config_file(tmp_path, capsys):
    from isosim import SimConfig

    cfg = SimConfig().replace(allocation={"n": 4, "b_problem": 8, "steps": 5, "budget": 0.0},
                              population={"train_size": 100, "val_size": 10, "measure": "exact"},
                              model={"kind": "tabular"})
    path = tmp_path / "c.toml"
    path.write_text(cfg.to_toml())
    assert main(["simulate", "--config", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config_id"] == cfg.config_id()


def test_simulate_validation_bands_and_histogram_flags(capsys):
    args = ["simulate", "--preset", "hard", "--val-mixture", "easy=0.5,very-easy=0.5", "--hist-bins", "4",
            "--steps", "5", "--json", *FAST]
    assert main(args) == 0
    final = json.loads(capsys.readouterr().out)["final"]
    assert {"val/easy", "val/very-easy"} <= set(final)
    assert final["val/very-easy"]["avg@1"] > final["val/easy"]["avg@1"] > final["train"]["avg@1"]
    assert sum(final["train"][f"hist:{i}/4"] for i in range(4)) == pytest.approx(1.0)


def _run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "isosim", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, message", [
    (["simulate", "--n", "0", "--budget", "1e5"], "n must be"),
    (["simulate", "--budget", "100"], "smaller than one step"),
    (["simulate", "--b-problem", "7000", "--budget", "1e7"], "exceeds the training set"),
    (["simulate", "--n", "abc"], "expected an integer"),
    (["simulate", "--preset", "medium", "--budget", "1e5"], "unknown preset"),
    (["simulate", "--val-mixture", "medium=1", "--budget", "1e5"], "unknown band"),
    (["simulate", "--pass-rates", "missing.csv", "--budget", "1e5"], "cannot read"),
])
def test_bad_input_one_line_exit_2(args, message):
    r = _run_cli(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (["sweep", "q1-easy-testing", "--workers", "0"], "expected an integer >= 1"),
    (["sweep", "q1-easy-testing", "--workers", "-3"], "expected an integer >= 1"),
    (["sweep", "q1-easy-testing", "--workers", "two"], "expected an integer"),
    (["sweep", "q1-easy-testing", "--root-seed", "-1"], "expected an integer >= 0"),
    (["sweep", "q1-easy-testing", "--backend", "spark"], "invalid choice"),
    (["reproduce", "--quick", "--workers", "0"], "expected an integer >= 1"),
    (["reproduce", "--quick", "--n-boot", "-5"], "expected an integer >= 0"),
    (["figures", "--quick", "--workers", "0"], "expected an integer >= 1"),
])
def test_bad_executor_input_creates_nothing(tmp_path, args, message):
    """One line on stderr, exit 2, and the output folder is not created."""
    out = tmp_path / "out"
    flag = "--root" if args[0] == "figures" else "--out"
    r = _run_cli(*args, flag, str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr
    assert not out.exists()


def test_sweep_api_checks_its_arguments_before_any_file(tmp_path):
    from isosim import IsosimInputError
    from isosim.experiments.sweep import run_sweep
    from isosim.study.registry import get_spec

    spec = get_spec("q1-easy-testing")
    for kwargs in ({"workers": 0}, {"root_seed": -1}, {"backend": "spark"}):
        with pytest.raises(IsosimInputError):
            run_sweep(spec, tmp_path / "store", progress=False, **kwargs)
        assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("content, message", [("pass_rate\n0.5\n1.3\n", "outside [0, 1]"),
                                              ("pass_rate\n0.5\nNaN\n", "not a finite number"),
                                              ("a;b;c\n\"unclosed\n", "")])
def test_bad_pass_rate_file_exit_2(tmp_path, content, message):
    f = tmp_path / "rates.csv"
    f.write_text(content)
    r = _run_cli("simulate", "--pass-rates", str(f), "--budget", "1e5")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and message in r.stderr
    assert f.read_text() == content  # nothing stored is touched


def test_python_dash_m_and_help():
    r = _run_cli("--help")
    assert r.returncode == 0 and "simulate" in r.stdout and "reproduce" in r.stdout


def test_bench_json_reports_ratios(capsys):
    assert main(["bench", "--json", "--steps", "40", "--no-sweep", "--no-plan"]) == 0
    res = json.loads(capsys.readouterr().out)
    for key in ("numba_rollouts_per_s", "numpy_rollouts_per_s", "speedup", "step_cost_ratio_n2048_n8"):
        assert res[key] > 0
    assert res["trace_rows_m1000"] == res["trace_rows_m10000"]


def test_bench_times_the_planner_per_case():
    from isosim.experiments.bench import plan_histogram, plan_seconds

    for band in ("easy", "hard", "mixture"):
        v = plan_histogram(band, 1000)
        assert v.size == 1000 and v.min() >= 0 and v.max() <= 0.6
    res = plan_seconds([("mixture", 1e4, 300)], b_max=256)
    assert list(res) == ["mixture"] and list(res["mixture"]) == ["1e4"] and res["mixture"]["1e4"]["300"] > 0


def test_bench_times_plans_with_a_calibrated_model_config(monkeypatch):
    """``plan_ensemble_s``: every band and budget on the largest set, each plan reading the model
    config it is given (a file the command line writes with the fixed ensemble; it reads back with
    every member), after one untimed plan."""
    import subprocess

    from isosim.calibrate.config_file import model_config_text, read_model_config
    from isosim.experiments import bench
    from isosim.sim.config import SimConfig

    text = model_config_text(SimConfig(), bench.PLAN_ENSEMBLE, {"metric": "avg@4"})
    calls, read = [], []

    def run(cmd, **kw):
        calls.append(cmd)
        read.append(read_model_config(cmd[cmd.index("--model-config") + 1]))

    monkeypatch.setattr(subprocess, "run", run)
    res = bench.plan_ensemble_seconds(text)
    assert len(calls) == 1 + len(bench.PLAN_BANDS) * len(bench.PLAN_BUDGETS)
    assert all(len(r.members()) == len(bench.PLAN_ENSEMBLE) and r.config == SimConfig() for r in read)
    assert {(b, c, d) for b in res for c in res[b] for d in res[b][c]} == {
        (b, f"{c:.0e}".replace("e+0", "e"), str(bench.PLAN_ENSEMBLE_PROBLEMS))
        for b in bench.PLAN_BANDS for c in bench.PLAN_BUDGETS}


def test_bench_plans_once_untimed_before_the_timed_cases(monkeypatch):
    """The first plan process (the kernels' first load after an install) is not a case's time:
    one more process runs than there are cases, and each case is timed once."""
    import subprocess

    from isosim.experiments import bench

    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    cases = [("easy", 1e5, 50), ("hard", 1e7, 60)]
    res = bench.plan_seconds(cases, b_max=256)
    assert len(calls) == 3 and calls[0] == calls[1] and calls[1] != calls[2]
    assert sorted((b, c, d) for b in res for c in res[b] for d in res[b][c]) == [("easy", "1e5", "50"),
                                                                                 ("hard", "1e7", "60")]


def test_bench_reports_plan_seconds(monkeypatch, capsys):
    """``plan_s`` with its maximum and the load before it, in the JSON and the text report (the
    kernel benchmarks and the timed plans themselves replaced by stand-ins)."""
    from isosim.experiments import bench

    monkeypatch.setattr(bench, "_run_benchmarks", lambda steps, sweep: {})
    times = {"easy": {"1e5": {"2000": 1.5, "100000": 2.5}}}
    ensemble = {"hard": {"1e9": {"100000": 6.5}}, "easy": {"1e5": {"100000": 2.0}}}
    given = []
    monkeypatch.setattr(bench, "plan_seconds", lambda: times)
    monkeypatch.setattr(bench, "plan_ensemble_seconds", lambda text: given.append(text) or ensemble)
    assert main(["bench", "--json", "--no-sweep"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["plan_s"] == times and res["plan_s_max"] == 2.5 and res["plan_load"] >= 0
    assert res["plan_ensemble_s"] == ensemble and res["plan_ensemble_s_max"] == 6.5
    assert "[calibration]" in given[0] or "calibration.ensemble" in given[0]
    assert "plan_s" not in bench.run_benchmarks(plan=False)
    assert "plan_ensemble_s" not in bench.run_benchmarks()  # only with a model config's text


def test_sweep_list_shows_the_builtin_specs_then_the_finding_sweeps(capsys):
    from isosim.study.findings import SCALES, sweep_specs

    assert main(["sweep", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "q1-easy    Q1    20 runs  (q1-easy-testing: 3 runs)"
    assert [line.split()[0] for line in lines[:5]] == ["q1-easy", "q1-hard", "q2-easy", "q3-easy", "q3-hard"]
    assert lines[5].startswith("finding sweeps")
    full, quick = sweep_specs("full"), sweep_specs("quick")
    assert len(lines) == 6 + len(full)
    runs = len(list(full["easy"].runs(0)))
    assert lines[6].split()[:5] == [full["easy"].id, "Q1", str(runs), "runs", quick["easy"].id]
    assert main(["sweep", "--list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0] == {"id": "q1-easy", "group": "built-in", "question": "Q1", "runs": 20, "testing_runs": 3}
    assert {(r["scale"], r["name"]) for r in rows if r["group"] == "finding"} == {
        (s, name) for s in SCALES for name in sweep_specs(s)}


class _Exited(Exception):
    pass


@pytest.fixture
def rates(tmp_path):
    """A pass-rate file of three easy problems: a plan of it takes about a second."""
    path = tmp_path / "rates.csv"
    path.write_text("pass_rate\n0.3\n0.5\n0.4\n")
    return path


def test_the_program_ends_at_once_after_a_plan_with_its_output_written(rates, tmp_path, monkeypatch, capsys):
    """``isosim plan`` sets exit_at_once: the program flushes its output and calls os._exit with
    the plan's exit code; a subcommand without it (simulate) ends through sys.exit."""
    import isosim.cli as cli

    codes = []

    def fake_exit(code):
        codes.append(code)
        raise _Exited

    monkeypatch.setattr(cli, "_exit", fake_exit)  # not os._exit: forked workers end with it
    monkeypatch.setattr(sys, "argv", ["isosim", "plan", "--pass-rates", str(rates), "--budget", "2e3",
                                      "--b-max", "64", "--json"])
    with pytest.raises(_Exited):
        cli.run_main()
    assert codes == [0] and json.loads(capsys.readouterr().out)["n"] >= 2
    monkeypatch.setattr(sys, "argv", ["isosim", "plan", "--pass-rates", str(tmp_path / "missing.csv"),
                                      "--budget", "2e3", "--b-max", "64"])
    with pytest.raises(_Exited):
        cli.run_main()
    assert codes == [0, 2] and capsys.readouterr().err.count("\n") == 1
    monkeypatch.setattr(sys, "argv", ["isosim", "simulate", "--n", "2", "--b-problem", "2", "--steps", "2",
                                      "--train-size", "20", "--val-size", "10", "--json"])
    with pytest.raises(SystemExit) as done:
        cli.run_main()
    assert done.value.code == 0 and codes == [0, 2]


def test_a_plan_run_as_a_program_prints_its_whole_output(rates):
    out = subprocess.run([sys.executable, "-m", "isosim", "plan", "--pass-rates", str(rates), "--budget", "2e3",
                          "--b-max", "64", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == ""
    assert json.loads(out.stdout)["n"] >= 2


@pytest.mark.parametrize("command", [["plan", "--pass-rates", "{rates}", "--budget", "2e3", "--b-max", "64", "--json"],
                                     ["simulate", "--n", "2", "--b-problem", "2", "--steps", "2", "--train-size", "20",
                                      "--val-size", "10", "--json"]])
def test_output_to_a_closed_pipe_ends_quietly(rates, command):
    """A reader that goes away before the output (``isosim ... | head -c 1``): exit code 1 and no
    traceback, with and without exit_at_once."""
    p = subprocess.Popen([sys.executable, "-m", "isosim", *[a.format(rates=rates) for a in command]],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 1 and err == ""
