"""``isosim reproduce``: its model config, its bad input and the order of its analyses. Its
end-to-end run at the quick size (the JSON, the figures, a rerun that reads the stored sweeps) is
tested in ``test_findings.py``, the one file whose tests read the session's quick reproduction."""




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


def test_analyses_are_handed_out_longest_first_and_reported_in_order(monkeypatch, tmp_path):
    """The fourteen analyses after the sweeps go to the worker processes longest first (the
    measured ANALYSIS_SECONDS), each once, and the reproduction reports them in their own order."""
    import isosim.study.reproduce as rp
    from isosim.study.findings import FINDINGS

    class Stored:  # the sweeps, already run
        def __init__(self, *args, **kwargs):
            pass

        def ensure(self):
            pass

    handed = []

    def in_order(fn, items, workers):
        handed.extend(items)
        return [fn(x) for x in items]

    monkeypatch.setattr(rp, "Results", Stored)
    monkeypatch.setattr(rp, "fork_map", in_order)
    monkeypatch.setattr(rp, "_analysis", lambda results, n_boot, figures, job: job if job[0] == "preset"
                        else [{"id": job[1]}])
    rep = rp.run_reproduce(tmp_path, quick=True, n_boot=0)
    jobs = [("preset", "easy"), ("preset", "hard"), *(("finding", f.id) for f in FINDINGS)]
    assert sorted(handed) == sorted(jobs)
    seconds = [rp.ANALYSIS_SECONDS.get(job, 0.0) for job in handed]
    assert seconds == sorted(seconds, reverse=True) and handed[0] == ("finding", 12)
    assert [f["id"] for f in rep.findings] == [f.id for f in FINDINGS]
    assert rep.presets == {"easy": ("preset", "easy"), "hard": ("preset", "hard")}
