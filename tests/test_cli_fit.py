"""``isosim fit`` through the real CLI entry point (isosim.cli.main)."""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

import isosim.cli
from isosim.cli import fit as cli_fit

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(autouse=True)
def fit_subcommand(monkeypatch):
    monkeypatch.setattr(isosim.cli, "SUBCOMMANDS", ("fit",))


@pytest.fixture(scope="module")
def runs_csv(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("make_example_runs", DOCS / "make_example_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path_factory.mktemp("runs") / "runs.csv"
    module.make_runs().to_csv(path, index=False)
    return path


def run_cli(capsys, *argv):
    code = isosim.cli.main(["fit", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_register_adds_the_fit_subcommand():
    parser = argparse.ArgumentParser()
    cli_fit.register(parser.add_subparsers())
    args = parser.parse_args(["fit", "runs.csv"])
    assert args.func is cli_fit.run
    assert (args.metric, args.bucket, args.n_boot, args.seed, args.json, args.plot) == (
        "avg@4", 0.005, 200, 0, False, None,
    )


def test_json_output_has_the_documented_shape(capsys, runs_csv):
    code, out, err = run_cli(capsys, runs_csv, "--json", "--n-boot", 4, "--seed", 1)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert list(doc) == ["metric", "sigmoid", "ci", "r2", "n_star", "frontier"]
    assert doc["metric"] == "avg@4"
    assert list(doc["sigmoid"]) == list(doc["ci"]) == ["L", "k", "log10_C0", "b"]
    assert all(isinstance(v, float) for v in doc["sigmoid"].values())
    assert all(len(v) == 2 for v in doc["ci"].values())
    assert isinstance(doc["r2"], float)
    assert all(set(r) == {"compute", "n"} and isinstance(r["n"], int) for r in doc["n_star"])
    assert all(set(r) == {"compute", "value", "n", "B_problem"} for r in doc["frontier"])
    again = json.loads(run_cli(capsys, runs_csv, "--json", "--n-boot", 4, "--seed", 1)[1])
    assert again == doc


def test_text_output_has_the_table_and_parameters(capsys, runs_csv):
    code, out, err = run_cli(capsys, runs_csv, "--n-boot", 3, "--bucket", 0.01)
    assert code == 0 and err == ""
    for text in ("n*(C)", "log10_C0", "95% CI", "3/3 bootstrap resamples of runs", "saturation L + b", "bucket 0.01"):
        assert text in out


def test_plot_writes_the_figure(capsys, runs_csv, tmp_path):
    target = tmp_path / "figs" / "fit.png"
    code, _, err = run_cli(capsys, runs_csv, "--n-boot", 0, "--plot", target)
    assert code == 0 and err == ""
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_parquet_input(capsys, runs_csv, tmp_path):
    path = tmp_path / "runs.parquet"
    pd.read_csv(runs_csv).to_parquet(path)
    code, out, _ = run_cli(capsys, path, "--json", "--n-boot", 0)
    assert code == 0 and json.loads(out)["ci"]["L"] == [None, None]


def malformed(tmp_path, runs_csv, name):
    df = pd.read_csv(runs_csv)
    path = tmp_path / f"{name}.csv"
    if name == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x00\xc3\x28")
        return path
    if name == "ragged":
        path.write_text("run,n\na,1\nb,2,3,4\n")
        return path
    if name == "missing-column":
        df = df.drop(columns="B_problem")
    elif name == "single-n":
        df = df.assign(n=8)
    elif name == "constant":
        df = df.assign(**{"avg@4": 0.5})
    elif name == "bad-n":
        df["n"] = df["n"].astype(object)
        df.loc[3, "n"] = "eight"
    df.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "case, match",
    [
        ("binary", "cannot read"),
        ("ragged", "cannot read"),
        ("missing-column", "missing column(s) B_problem"),
        ("single-n", "distinct n"),
        ("constant", "is constant"),
        ("bad-n", "'n' must hold positive integers (row 4: 'eight')"),
    ],
)
def test_bad_files_exit_2_with_one_line(capsys, runs_csv, tmp_path, case, match):
    code, out, err = run_cli(capsys, malformed(tmp_path, runs_csv, case), "--n-boot", 0)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("isosim fit: error: ")
    assert match in err


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--metric", "best@4"], "no metric column 'best@4'; metric columns: 'avg@4'"),
        (["--bucket", "-1"], "--bucket"),
        (["--n-boot", "-2"], "--n-boot"),
        (["--plot", "out.svg"], "--plot"),
    ],
)
def test_bad_options_exit_2_with_one_line(capsys, runs_csv, extra, match):
    code, _, err = run_cli(capsys, runs_csv, *extra)
    assert code == 2 and err.count("\n") == 1 and match in err


def test_missing_file_exits_2_with_one_line(capsys, tmp_path):
    code, _, err = run_cli(capsys, tmp_path / "nope.csv")
    assert code == 2 and err.count("\n") == 1 and "no such file" in err


def test_save_figure_writes_png_and_pdf(tmp_path):
    from isosim.analysis.plotting import new_figure, save_figure

    fig, (ax,) = new_figure()
    ax.plot([1, 2], [1, 2])
    paths = save_figure(fig, tmp_path / "out" / "fig")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert paths[1].read_bytes()[:5] == b"%PDF-"
