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
from isosim.errors import IsosimInputError

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
    try:
        code = isosim.cli.main(["fit", *map(str, argv)])
    except SystemExit as exc:  # a bad option value is refused while parsing
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def test_register_adds_the_fit_subcommand():
    parser = argparse.ArgumentParser()
    cli_fit.register(parser.add_subparsers())
    args = parser.parse_args(["fit", "runs.csv"])
    assert args.func is cli_fit.run
    # --metric None: avg@4 for a runs table, the validation key's name for trainers' logs
    assert (args.metric, args.bucket, args.n_boot, args.seed, args.json, args.plot) == (
        None, 0.005, 200, 0, False, None,
    )


def test_json_output_has_the_documented_shape(capsys, runs_csv):
    code, out, err = run_cli(capsys, runs_csv, "--json", "--n-boot", 4, "--seed", 1)
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert list(doc) == ["metric", "sigmoid", "ci", "r2", "warnings", "n_star", "frontier", "n_star_left_out"]
    assert doc["metric"] == "avg@4"
    assert list(doc["sigmoid"]) == list(doc["ci"]) == ["L", "k", "log10_C0", "b"]
    assert all(isinstance(v, float) for v in doc["sigmoid"].values())
    assert all(len(v) == 2 for v in doc["ci"].values())
    assert isinstance(doc["r2"], float)
    assert all(set(r) == {"compute", "n"} and isinstance(r["n"], int) for r in doc["n_star"])
    assert all(set(r) == {"compute", "value", "n", "B_problem"} for r in doc["frontier"])
    assert doc["n_star_left_out"] == []  # every grid point of the example is reached by two or more n
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


# --- n*(C) needs two groups at a grid point -----------------------------------------------------

def scalerl(c, r0, a, c_mid, b=1.0):
    return r0 + (a - r0) / (1 + (c_mid / c) ** b)


def early_run_table():
    """Noiseless runs of n = 2, 8, 32 evaluated from C = 1e3 to 1e6, and one run of n = 1024
    whose first evaluation comes a decade earlier (C = 1e2): below 1e3 only its curve exists,
    and it is the worst curve there."""
    import numpy as np

    curves = {2: (0.1, 0.5, 3e3), 8: (0.1, 0.6, 1e4), 32: (0.1, 0.7, 5e4), 1024: (0.1, 0.8, 3e5)}
    rows = [dict(run=f"r{n}", n=n, B_problem=8, compute=c, **{"avg@4": scalerl(c, *p)})
            for n, p in curves.items() for c in np.logspace(2 if n == 1024 else 3, 6, 40)]
    return pd.DataFrame(rows)


def test_a_lone_group_at_the_edge_is_not_n_star():
    from isosim.analysis.fit import analyse_runs

    df = early_run_table()
    lone = analyse_runs(df, bucket=0, n_boot=0, min_groups=1)  # the old rule: the lone curve wins
    assert lone.n_star["n"].iloc[0] == 1024 and lone.law.k < 0
    fixed = analyse_runs(df, bucket=0, n_boot=0)
    first = fixed.n_star.iloc[0]
    assert first["n"] == 2 and first["compute"] >= 1e3 / 10**0.05  # within half a grid step of the others' start
    assert (fixed.n_star["compute"] >= first["compute"]).all() and fixed.law.k > 0
    left = fixed.too_few_groups
    assert len(left) == 10 and {p["n"] for p in left} == {1024} and {p["groups"] for p in left} == {1}
    assert max(p["compute"] for p in left) < first["compute"]


def test_cli_reports_the_points_it_leaves_out(capsys, tmp_path):
    path = tmp_path / "early.csv"
    early_run_table().to_csv(path, index=False)
    code, out, err = run_cli(capsys, path, "--n-boot", 0, "--bucket", 0)
    assert code == 0 and err == ""
    assert "left out: 10 grid points at C = 100 to 794, reached only by the curve of n = 1024" in out
    code, out, _ = run_cli(capsys, path, "--n-boot", 0, "--bucket", 0, "--json")
    doc = json.loads(out)
    assert [p["n"] for p in doc["n_star_left_out"]] == [1024] * 10 and doc["n_star"][0]["n"] == 2


def test_n_star_raw_counts_groups_not_rows():
    import numpy as np

    from isosim.analysis.n_star import n_star_raw

    index = pd.MultiIndex.from_tuples([("a", 2), ("b", 2), ("c", 8)], names=["run", "n"])
    table = pd.DataFrame([[0.1, 0.2, 0.3], [0.2, 0.1, 0.4], [np.nan, 0.5, np.nan]], index=index, columns=[1, 2, 3])
    out = n_star_raw(table, ["n"], min_groups=2)
    assert out["compute"].tolist() == [2] and out["n"].tolist() == [8]  # two runs of n = 2 are one group
    assert out.attrs["too_few_groups"] == ({"compute": 1, "groups": 1, "n": 2}, {"compute": 3, "groups": 1, "n": 2})
    assert n_star_raw(table, ["n"])["compute"].tolist() == [1, 2, 3]  # the default keeps lone points
    with pytest.raises(IsosimInputError, match="min_groups"):
        n_star_raw(table, ["n"], min_groups=0)


def test_cli_says_where_the_curves_start(capsys, tmp_path, runs_csv):
    code, out, _ = run_cli(capsys, runs_csv, "--n-boot", 0)
    assert code == 0 and "no evaluation at step 0: each curve's starting reward is fitted" in out
    runs = pd.read_csv(runs_csv)
    start = runs.groupby("run", as_index=False).first().assign(step=0)
    start["avg@4"] = 0.25
    path = tmp_path / "with_start.csv"
    pd.concat([start, runs], ignore_index=True).to_csv(path, index=False)
    code, out, _ = run_cli(capsys, path, "--n-boot", 0)
    assert code == 0 and "every curve starts from its runs' reward before training" in out
    some = pd.concat([start[start["n"] == 8], runs], ignore_index=True)
    some.to_csv(path, index=False)
    code, out, _ = run_cli(capsys, path, "--n-boot", 0)
    assert "curves start from the runs' reward before training for n = 8; the others' start is fitted" in out
