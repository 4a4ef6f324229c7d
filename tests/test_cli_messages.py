"""What a new user meets at the command line: device options checked before work, targets printed
only where they apply, readable tables, warnings on fits that do not deserve trust."""

import numpy as np
import pandas as pd
import pytest

from isosim.cli import main


def _one_line_error(capsys, args, message):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    return err


def test_bench_device_without_lm_is_refused(capsys):
    _one_line_error(capsys, ["bench", "--device", "cuda"], "--device applies to --lm only")
    _one_line_error(capsys, ["bench", "--device", "cpu", "--no-sweep"], "--device applies to --lm only")


def test_bench_lm_cuda_without_a_gpu_is_one_line(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    _one_line_error(capsys, ["bench", "--lm", "--device", "cuda"], "no CUDA device")


def _bench_result(ratio_64=5.0, speedup=7.5):
    return {"step_us_by_n": {"2": {"step_us": 30.0, "floor_us": 20.0, "ratio_to_floor": 1.5},
                             "8": {"step_us": 40.0, "floor_us": 10.0, "ratio_to_floor": 4.0},
                             "64": {"step_us": 50.0, "floor_us": 10.0, "ratio_to_floor": ratio_64}},
            "numba_rollouts_per_s": 1e6, "numpy_rollouts_per_s": 1e6 / speedup, "speedup": speedup,
            "step_cost_ratio_n2048_n8": 1.2, "simulate_peak_rss_mb": 340.0, "trace_rows_m1000": 220,
            "trace_rows_m10000": 220, "sweep_configs_per_s_1_worker": 1.0, "sweep_configs_per_s_2_workers": 1.5,
            "sweep_speedup_2_workers": 1.5}


def test_bench_prints_each_target_only_where_it_applies():
    from isosim.cli.bench import format_benchmark

    lines = format_benchmark(_bench_result(), cores=2).splitlines()
    by_n = {ln.split(":")[0].split("=")[1].strip(): ln for ln in lines if ln.strip().startswith("n =")}
    assert by_n["2"].endswith("(target <= 3: met)")
    assert by_n["8"].endswith("(target <= 3: not met)")
    assert "target" not in by_n["64"]
    text = "\n".join(lines)
    assert "(target >= 30x: not met)" in text and "(target <= 1.5: met)" in text
    assert "(target < 300 MB: not met)" in text and "(target >= 1.7x: not met)" in text
    one_core = format_benchmark(_bench_result(), cores=1)
    assert "1.7x" not in one_core and "no target" in one_core
    assert "calibrated model config" not in text
    planned = {**_bench_result(), "plan_s": {"easy": {"1e5": {"100000": 1.5}}}, "plan_s_max": 1.5, "plan_load": 0.2,
               "plan_ensemble_s": {"hard": {"1e5": {"100000": 2.5}, "1e9": {"100000": 6.5}}},
               "plan_ensemble_s_max": 6.5}
    lines = format_benchmark(planned, cores=2).splitlines()
    head = next(i for i, ln in enumerate(lines) if "calibrated model config" in ln)
    assert lines[head].endswith("target <= 3 s for every case: not met):")
    assert lines[head + 1].split() == ["hard:", "C", "=", "1e5", "2.50", "s,", "C", "=", "1e9", "6.50", "s"]


def test_simulate_table_keeps_long_names_apart():
    import re

    from isosim.cli.simulate import final_table

    metrics = ["avg@1", "worst@4", "avg@1:sampled", "worst@4:sampled"]
    final = {split: {m: 0.5 for m in metrics} for split in ("train", "val", "val/very-easy")}
    lines = final_table(final).splitlines()
    assert lines[0].split() == ["split", *metrics]
    assert [ln.split()[0] for ln in lines[1:]] == ["train", "val", "val/very-easy"]
    # every column ends at the same place on every line (right-aligned under its name)
    ends = [[m.end() for m in re.finditer(r"\S+", ln)][1:] for ln in lines]
    assert all(e == ends[0] for e in ends)
    # a short table keeps its 12-character columns
    assert final_table({"train": {"avg@1": 1.0}, "val": {"avg@1": 0.5}}).splitlines()[1] == f"{'train':<12}{1.0:>12.4f}"


def test_trace_curve_has_the_documented_columns(small_cfg):
    from isosim import simulate

    curve = simulate(small_cfg.replace(allocation={"steps": 5}), 0).curve("avg@4", "val")
    assert list(curve.columns) == ["step", "compute_rollouts", "compute_tokens", "value"]
    assert curve["step"].is_monotonic_increasing and len(curve) >= 2


def test_error_texts_show_plain_numbers(tmp_path, capsys):
    from isosim.errors import shown

    assert shown(np.float64("nan")) == "nan" and shown(np.int64(-100)) == "-100" and shown("x") == "'x'"
    bad = tmp_path / "runs.csv"
    pd.DataFrame({"run": ["a", "b"], "n": [2, -100], "B_problem": [8, 8], "compute": [1.0, 2.0],
                  "avg@4": [0.1, 0.2]}).to_csv(bad, index=False)
    err = _one_line_error(capsys, ["fit", str(bad), "--n-boot", "0"], "(row 2: -100)")
    assert "np." not in err


def test_huge_integer_message_names_the_side(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--pass-rates", "x.csv", "--budget", "1e6", "--b-max", "1e30"])
    err = capsys.readouterr().err
    assert "below 2**63" in err and "-2**63" not in err


def test_train_size_help_says_what_zero_means(capsys):
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "0 takes the preset's size (6000 easy, 5000 hard" in out


def test_store_names_a_changed_setting_of_the_same_sweep(tmp_path):
    from isosim.errors import IsosimInputError
    from isosim.experiments.store import RunStore

    spec = {"id": "f-easy-quick", "question": "Q1", "base": {"model": {"shared": 0.06}}}
    RunStore.open(tmp_path / "s", spec, 0)
    other = {**spec, "base": {"model": {"shared": 1.0}}}
    with pytest.raises(IsosimInputError, match=r"sweep f-easy-quick with other settings \(a different base\)"):
        RunStore.open(tmp_path / "s", other, 0)
    with pytest.raises(IsosimInputError, match="a different sweep"):
        RunStore.open(tmp_path / "s", {**spec, "id": "q1-easy"}, 0)


def test_calibrate_api_reads_a_pass_rate_path_and_refuses_junk(tmp_path):
    from isosim.calibrate.calibration import check_pass_rates
    from isosim.errors import IsosimInputError

    path = tmp_path / "rates.csv"
    pd.DataFrame({"pass_rate": [0.2, 0.5]}).to_csv(path, index=False)
    assert check_pass_rates(str(path)).tolist() == [0.2, 0.5]
    with pytest.raises(IsosimInputError):
        check_pass_rates(str(tmp_path / "missing.csv"))
    with pytest.raises(IsosimInputError, match="pass rates must be numbers"):
        check_pass_rates(["a", "b"])


class _Stop(Exception):
    pass


def test_lm_validate_without_scale_takes_the_devices_scale_and_says_so(tmp_path, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    import isosim.lm.validate as validate

    seen = {}

    def fake_run_validate(out, config, device, **kwargs):
        seen.update(config=config, device=device)
        raise _Stop

    monkeypatch.setattr(validate, "run_validate", fake_run_validate)
    with pytest.raises(_Stop):
        main(["lm", "validate", "--out", str(tmp_path / "lm")])
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert seen["device"] == expected
    from isosim.lm.protocol import SCALES

    scale = "full" if expected == "cuda" else "medium"
    assert seen["config"] == SCALES[scale]()
    err = capsys.readouterr().err
    assert f"no --scale given: {scale}" in err and f"{expected} device found" in err
    with pytest.raises(_Stop):  # an explicit scale says nothing
        main(["lm", "validate", "--quick", "--out", str(tmp_path / "lm")])
    assert "no --scale given" not in capsys.readouterr().err


def test_progress_without_a_terminal_is_a_line_every_few_percent(capsys):
    from isosim.experiments.progress import LOG_STEP, progress_bar

    with progress_bar(200, "sweep x", None) as bar:  # pytest's captured stderr is not a terminal
        for _ in range(200):
            bar.update()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("sweep x:   0% 0/200") and lines[-1].startswith("sweep x: 100% 200/200")
    assert len(lines) == round(1 / LOG_STEP) + 1 and "\r" not in "".join(lines)
    with progress_bar(200, "sweep x", False) as bar:  # --quiet
        bar.update(200)
    assert capsys.readouterr().err == ""


def test_first_compilation_is_announced(capsys, monkeypatch):
    import subprocess
    import sys

    import isosim.sim.run as run
    from isosim.experiments.progress import note_compiling

    monkeypatch.setattr(run, "kernels_cached", lambda: False)
    assert note_compiling() and "compiling the simulation kernels" in capsys.readouterr().err
    assert note_compiling(False) and capsys.readouterr().err == ""
    monkeypatch.setattr(run, "kernels_cached", lambda: True)
    assert not note_compiling() and capsys.readouterr().err == ""
    # an empty Numba cache is seen as cold
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, "-c", "from isosim.sim.run import kernels_cached; print(kernels_cached())"],
                             capture_output=True, text=True, env={**os.environ, "NUMBA_CACHE_DIR": cache})
    assert out.stdout.strip() == "False", out.stderr


def _n_star_table():
    return pd.DataFrame({"compute": [1e4, 1e5, 1e6, 1e7], "n": [4, 8, 64, 256], "value": [0.1, 0.2, 0.3, 0.4]})


def _analysis(**law):
    from types import SimpleNamespace

    from isosim.analysis.fit import ScalingLawFit

    params = {"L": 6.0, "k": 2.0, "log10_C0": 5.5, "b": 2.0, "r2": 0.95, **law}
    return SimpleNamespace(law=ScalingLawFit(**params), n_star=_n_star_table(),
                           runs=pd.DataFrame({"n": [4, 8, 64, 256]}))


def test_fit_warns_on_a_law_not_to_trust():
    from isosim.analysis.fit import law_bounds, law_warnings

    assert law_warnings(_analysis()) == []
    L_max = law_bounds(_n_star_table())["L"][1]
    assert L_max == pytest.approx(60.0)  # ten times the span of log2 n* (2 to 8)
    warnings = law_warnings(_analysis(r2=0.535, L=18.25, ci={"L": (3.16, L_max)}))
    text = " | ".join(warnings)
    assert "R^2 0.535 is below" in text
    assert "L: its interval reaches the fit's bound 60" in text
    assert "n* is not determined beyond C = 1e+07" in text and "largest n measured (256)" in text
    assert len(warnings) == 3


def _runs_csv(tmp_path, **change):
    from isosim.analysis.runs import load_runs

    df = pd.read_csv("docs/example_runs.csv")
    df = df[df["n"].isin([64, 128, 256, 512])]
    for row, value in change.items():
        df.loc[df.index[int(row[1:])], "avg@4"] = value
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    return path, load_runs


def test_fit_refuses_a_rate_outside_0_1_and_counts_rows_without_a_value(tmp_path, capsys):
    path, _ = _runs_csv(tmp_path, r4=1.7)
    _one_line_error(capsys, ["fit", str(path), "--n-boot", "0"], "must lie in [0, 1] (row 5: 1.7)")
    path, _ = _runs_csv(tmp_path, r4=np.nan, r9=np.nan)
    assert main(["fit", str(path), "--n-boot", "0"]) == 0
    assert "2 rows without a avg@4 value left out" in capsys.readouterr().out


def _calibration(rmse=0.05, noise=0.01, knobs=None, agree=(1.0, 1.0)):
    from isosim import SimConfig
    from isosim.calibrate.calibration import Calibration

    knobs = knobs or {"lr": 0.01, "prior_scale": 3.0, "skill_link": 0.4}
    cal = Calibration(metric="avg@1", knobs=knobs, ensemble=(knobs, knobs, knobs, knobs), fit_rmse=rmse,
                      pilot_noise_sd=noise, base=SimConfig(), train=np.full(8, 0.3), val=np.full(8, 0.3),
                      b_problem=8, pilot_budget=1e4, pilot_ns=(2, 16))
    curve = pd.DataFrame({"compute": [1e4, 2e4], "n": [32, 32], "n_low": [64, 64], "n_high": [64, 64],
                          "agree": list(agree)})
    return cal, curve


def test_calibrate_judges_its_fit_against_the_noise():
    cal, curve = _calibration(rmse=0.0508, noise=0.00965)
    assert not cal.within_noise
    (warning,) = cal.warnings(curve)
    assert "misses the pilots by 5.3 times their noise" in warning
    cal, curve = _calibration(rmse=0.011, noise=0.01)
    assert cal.within_noise and cal.warnings(curve) == []
    assert cal.to_json(curve)["warnings"] == [] and cal.to_json(curve)["within_noise"] is True


def test_calibrate_names_a_knob_at_its_edge_and_an_ensemble_that_disagrees():
    cal, curve = _calibration(rmse=0.01, knobs={"lr": 1.0, "prior_scale": 3.0, "skill_link": 0.0},
                              agree=(1.0, 0.0))
    text = " | ".join(cal.to_json(curve)["warnings"])
    assert "lr = 1 is at the top of its range [0.0001, 1]" in text
    assert "skill_link = 0 is at the bottom of its range" in text
    assert "disagrees with the best fit at 1 of 2 budgets (from C = 2e+04: 0% of its 4 members pick n* = 32" in text


def test_calibrate_report_says_outside_the_noise():
    from isosim.cli.calibrate import report

    cal, curve = _calibration(rmse=0.0508, noise=0.00965)
    cal = cal.__class__(**{**cal.__dict__, "details": {"evaluations": 40, "ensemble_rmse": [0.05] * 4}})
    text = report(cal, curve, "pilots.csv", None, 1.0, 1.0)
    assert "5.3 times the pilots' noise sd" in text and "outside the noise" in text
    assert "fit within it" not in text and "warning: the best fit misses the pilots" in text
