"""What a new user meets at the command line: device options checked before work, targets printed
only where they apply, readable tables, warnings on fits that do not deserve trust."""
import json

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
