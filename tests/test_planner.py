"""``isosim plan``: constraints, the JSON shape, the reasoning, --verify and bad input."""
import argparse
import json
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from isosim.cli import plan as plan_cli
from isosim.errors import IsosimInputError
from isosim.plan.planner import allocations_stage1, allocations_stage2, plan, zero_signal_share


def _run(argv):
    """Parse and run ``isosim plan`` with its own parser (the module's register/run)."""
    parser = argparse.ArgumentParser()
    plan_cli.register(parser.add_subparsers())
    args = parser.parse_args(["plan", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def rates(tmp_path_factory):
    rng = np.random.default_rng(0)
    p = rng.beta(0.7, 1.3, 300)
    path = tmp_path_factory.mktemp("plan") / "rates.csv"
    pd.DataFrame({"correct": rng.binomial(16, p), "samples": 16}).to_csv(path, index=False)
    return path


def _is_pow2(x: int) -> bool:
    return x >= 1 and x & (x - 1) == 0


def test_json_shape_and_constraints(rates, capsys):
    budget, b_max = 2.0e5, 1024
    assert _run(["--pass-rates", str(rates), "--budget", str(budget), "--b-max", str(b_max), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"n", "B_problem", "M", "predicted", "alternatives", "n_star_curve"} <= set(out)
    assert set(out["predicted"]) == {"avg@4"} and 0 <= out["predicted"]["avg@4"] <= 1
    for a in [out, *out["alternatives"]]:
        n, bp, m = a["n"], a["B_problem"], a["M"]
        assert _is_pow2(n) and n >= 2 and _is_pow2(bp)
        assert n * bp <= b_max and n * bp * m <= budget and m == math.floor(budget / (n * bp)) and bp <= 300
    best = out["predicted"]["avg@4"]
    assert out["alternatives"] and all(a["predicted"]["avg@4"] <= best for a in out["alternatives"])
    curve = out["n_star_curve"]
    assert [set(c) >= {"compute", "n"} for c in curve] and curve[-1]["compute"] == pytest.approx(budget)
    assert all(a["compute"] < b["compute"] for a, b in zip(curve, curve[1:]))
    assert out["confidence"]["level"] in ("high", "medium", "low")
    assert out["mechanism"] in ("sharpening", "coverage") and out["verify"] is None


def test_text_report(rates, capsys):
    assert _run(["--pass-rates", str(rates), "--budget", "5e4", "--b-max", "256", "--metric", "worst@4"]) == 0
    text = capsys.readouterr().out
    assert "recommended: n = " in text and "reasoning: With n = " in text and "no signal" in text
    assert "worst@4" in text and "n*(C)" in text


def test_plan_api_reasoning_and_zero_signal():
    values = np.random.default_rng(1).beta(0.5, 3.0, 200)
    p = plan(values, 3e4, 512, "best@4")
    assert p.zero_signal_start == pytest.approx(np.mean(values**p.best.n + (1 - values) ** p.best.n))
    assert 0 <= p.best.zero_signal_end <= 1
    assert p.best.predicted["best@4"] >= p.ranked[-1].predicted["best@4"]
    assert f"n = {p.best.n}" in p.reasoning()
    assert zero_signal_share([0.0, 1.0, 0.5], 2) == pytest.approx((1 + 1 + 0.5) / 3)


def test_allocation_grids_respect_the_constraints():
    bp0, stage1 = allocations_stage1(d=100, budget=1e5, b_max=512)
    assert bp0 == 32 and [n for n, _ in stage1] == [2, 4, 8, 16]
    stage2 = allocations_stage2([2, 16], bp0, d=100, budget=1e5, b_max=512)
    assert {(2, 16), (2, 64), (16, 16)} <= set(stage2)
    assert (2, 128) not in stage2 and (16, 64) not in stage2
    bp0, stage1 = allocations_stage1(d=5, budget=6, b_max=4)
    assert bp0 == 2 and stage1 == [(2, 2)]


def test_verify_reports_the_simulated_ranking():
    values = np.random.default_rng(2).beta(1.0, 1.0, 120)
    p = plan(values, 2e4, 256, verify=True, seeds=1)
    v = p.verification
    assert v is not None and v.seeds == 1 and len(v.simulated) == min(3, len(p.ranked))
    assert v.ranking_holds == (int(np.argmax(v.simulated)) == 0)
    assert p.to_json()["verify"]["ranking_holds"] == v.ranking_holds


@pytest.mark.parametrize("content, argv, message", [
    ("pass_rate\n", ["--budget", "1e5", "--b-max", "64"], "no problems"),
    ("pass_rate\n0.3\n1.3\n", ["--budget", "1e5", "--b-max", "64"], "outside [0, 1]"),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1", "--b-max", "64"], "below one step"),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1e5", "--b-max", "1"], "B_max"),
])
def test_bad_input_raises(tmp_path, content, argv, message):
    path = tmp_path / "rates.csv"
    path.write_text(content)
    with pytest.raises(IsosimInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _run(["--pass-rates", str(path), *argv])


@pytest.mark.parametrize("content, argv", [
    ("pass_rate\n", ["--budget", "1e5", "--b-max", "64"]),
    ("pass_rate\n0.3\n1.3\n", ["--budget", "1e5", "--b-max", "64"]),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1", "--b-max", "64"]),
    ("pass_rate\n0.3\n0.5\n", ["--budget", "1e5", "--b-max", "1"]),
])
def test_bad_input_through_the_real_cli(tmp_path, content, argv):
    """One line on stderr, exit code 2 (needs "plan" in isosim.cli.SUBCOMMANDS)."""
    path = tmp_path / "rates.csv"
    path.write_text(content)
    r = subprocess.run([sys.executable, "-m", "isosim", "plan", "--pass-rates", str(path), *argv],
                       capture_output=True, text=True)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("isosim plan: error:") and "Traceback" not in r.stderr
