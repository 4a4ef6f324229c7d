"""The main job end to end at its quick size, and the figures it writes."""
import json

import pytest

from isosim.cli import main
from isosim.study.reproduce import STUDY_Q1, reproduce_specs


def test_reproduce_quick_json_and_figures(quick_reproduction, capsys):
    out, res = quick_reproduction
    assert set(res) == {"easy", "hard", "findings"}
    for preset in ("easy", "hard"):
        fit = res[preset]
        assert fit["metric"] == "avg@4"
        assert {"sigmoid", "ci", "r2", "n_star", "frontier"} <= set(fit)
        spec = reproduce_specs(True)[preset]
        assert all(row["n"] in spec.n for row in fit["n_star"])
        comps = [row["compute"] for row in fit["n_star"]]
        assert comps == sorted(comps) and comps[-1] / comps[0] >= 100  # at least two decades
        if fit["sigmoid"] is not None:
            assert set(fit["sigmoid"]) == set(STUDY_Q1[preset])
    assert [f["id"] for f in res["findings"]] == list(range(1, 13))
    for name in ("frontier-easy", "frontier-hard", "n-star-easy", "n-star-hard"):
        assert (out / "figures" / f"{name}.png").stat().st_size > 1000
        assert (out / "figures" / f"{name}.pdf").exists()
    # a rerun reads the stored sweeps instead of recomputing them, and says the same
    stored = sorted(p.stat().st_mtime_ns for p in out.rglob("*.parquet"))
    assert main(["reproduce", "--quick", "--out", str(out), "--n-boot", "0"]) == 0
    assert sorted(p.stat().st_mtime_ns for p in out.rglob("*.parquet")) == stored
    text = capsys.readouterr().out
    assert "n*" in text and "study" in text and "== the study's twelve findings" in text
    for f in res["findings"]:
        assert f"{f['id']:>3}  {f['verdict']:<13} P = {f['p_holds']:<5.2f} {f['title']}" in text
    json.dumps(res)  # plain JSON all the way down


def test_reproduce_json_reports_levels_per_n(quick_reproduction):
    """``base_value`` and ``per_n`` recomputed from the stored long-format sweep: the best
    validation avg@4 each run reaches, mean and standard error over the replicates of each n."""
    import numpy as np

    from isosim.study.findings import Results

    out, res = quick_reproduction
    results = Results(out / "findings", "quick")
    for preset in ("easy", "hard"):
        raw = results.raw(preset)
        val = raw[(raw["split"] == "val") & (raw["metric"] == "avg@4")]
        assert res[preset]["base_value"] == pytest.approx(val.loc[val["step"] == 0, "value"].mean(), rel=1e-12)
        rows = res[preset]["per_n"]
        assert [r["n"] for r in rows] == sorted(reproduce_specs(True)[preset].n)
        for r in rows:
            best = val[val["n"] == r["n"]].groupby("run")["value"].max().to_numpy()
            assert r["best_value"] == pytest.approx(best.mean(), rel=1e-12)
            assert r["se"] == pytest.approx(best.std(ddof=1) / np.sqrt(len(best)), rel=1e-9)
            assert r["best_value"] > res[preset]["base_value"]  # every n learns something


def test_model_config_is_the_base_of_every_finding_sweep():
    """``isosim reproduce --model-config``: inside :func:`based_on` every finding sweep starts from
    the config's model and algorithm; the ablations that turn the shared path off or down keep
    the model's own per-problem offsets and scale its shared path; outside, the sweeps are the
    defaults' (the same ids and configs as the registry's)."""
    from isosim import SimConfig
    from isosim.study.findings import based_on, sweep_specs
    from isosim.study.registry import get_spec

    default = sweep_specs("quick")
    cfg = SimConfig().replace(model={"shared": 0.1, "local": 480.0, "local_share": True, "prior_scale": 4.0},
                              algo={"adam_eps": 1e-2}, population={"preset": "hard", "train_size": 50})
    with based_on(cfg):
        specs = sweep_specs("quick")
    assert sweep_specs("quick") == default and get_spec("f-easy-quick") == default["easy"]
    assert set(specs) == set(default)
    for name, spec in specs.items():
        assert spec.id == default[name].id
        assert spec.base.algo.adam_eps == 1e-2 and spec.base.model.local_share
        assert spec.base.population.train_size == default[name].base.population.train_size  # population untouched
    assert specs["easy"].base.model == cfg.model
    assert specs["dose-0.5"].base.model.shared == 0.05 and specs["dose-0.5"].base.model.local == 480.0
    defaults = SimConfig().model
    assert default["dose-0.5"].base.model.shared == 0.5 * defaults.shared
    assert default["dose-0.5"].base.model.local == defaults.local
    assert specs["dose-0"].base.model.shared == 0.0


def test_reproduce_refuses_a_bad_model_config_before_writing(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "out"
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nshared = -1\n")
    for arg in (str(tmp_path / "missing.toml"), str(bad)):
        r = subprocess.run([sys.executable, "-m", "isosim", "reproduce", "--quick", "--out", str(out),
                            "--model-config", arg], capture_output=True, text=True)
        assert r.returncode == 2 and r.stdout == ""
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not out.exists()
