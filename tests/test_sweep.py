"""Sweeps as data, the resumable store, and identical results on every backend."""
import dataclasses
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from isosim import IsosimInputError, SimConfig
from isosim.experiments.store import RunStore
from isosim.experiments.sweep import SweepSpec, evaluations, run_sweep, sweep_status
from isosim.study import registry
from isosim.study.findings import FINDINGS, SCALES, sweep_specs
from isosim.study.registry import BUILTIN, entries, get_spec

KILL_SPEC = """
id = "kill-test"
question = "Q1"
n = [1, 2, 3, 4, 5, 6, 7, 8]
b_problem = [8]
budget = 300000
seeds = [0, 1]
[base.population]
train_size = 200
val_size = 20
measure = "exact"
[base.model]
kind = "tabular"
[base.eval]
n_evals = 10
"""


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["run", "step", "split", "metric"]).reset_index(drop=True)


@pytest.mark.parametrize("spec", BUILTIN, ids=lambda s: s.id)
def test_every_builtin_spec_has_a_testing_subset_that_runs_end_to_end(spec, tmp_path):
    sub = spec.testing()
    assert sub.id == spec.id + "-testing" and sub.question == spec.question
    store = run_sweep(sub, tmp_path / sub.id, workers=1, progress=False)
    st = sweep_status(store.root)
    assert st["done"] == st["total"] == len(list(sub.runs(0))) > 0
    ev = evaluations(store.read())
    assert {"run", "n", "B_problem", "compute", "avg@4", "best@4", "worst@4"} <= set(ev.columns)
    if spec.question == "Q2":
        assert (ev["n"] * ev["B_problem"]).nunique() == 1
        assert set(sub.steps) <= set(ev["step"])
    if spec.question == "Q3":
        assert (ev["n"] * ev["B_problem"] <= sub.b_max).all() and ev["B_problem"].nunique() > 1


def test_one_registry_of_sweeps_looked_up_by_id(tmp_path):
    reg = entries()
    # built-in specs and their testing subsets, as before
    assert [e.spec for e in reg.values() if e.group == "built-in"] == list(BUILTIN)
    assert [s.id for s in BUILTIN] == ["q1-easy", "q1-hard", "q2-easy", "q3-easy", "q3-hard"]
    for spec in BUILTIN:
        assert get_spec(spec.id) is spec and get_spec(spec.id + "-testing") == spec.testing()
    # every finding sweep at both scales, under its store id, with the findings that read it
    for scale in SCALES:
        for name, spec in sweep_specs(scale).items():
            e = reg[spec.id]
            assert e.spec == spec and (e.group, e.name, e.scale) == ("finding", name, scale)
            assert e.findings == tuple(f.id for f in FINDINGS if name in f.sweeps) != ()
            assert get_spec(spec.id) == spec and get_spec(spec.id + "-testing") == spec.testing()
    assert len(reg) == len(BUILTIN) + sum(len(sweep_specs(s)) for s in SCALES)
    # a TOML file is looked up the same way
    path = tmp_path / "kill.toml"
    path.write_text(KILL_SPEC)
    assert registry.get_spec(str(path)) == get_spec(str(path)) == SweepSpec.from_toml(KILL_SPEC)


def test_registry_has_no_name_twice_with_different_specs(monkeypatch):
    for scale in SCALES:  # each finding's sweeps, by name: one spec per name across findings
        by_name = {}
        for f in FINDINGS:
            for name, spec in f.sweeps_at(SCALES[scale]).items():
                assert by_name.setdefault(name, spec) == spec, (scale, name, f.id)
        assert len({s.id for s in by_name.values()}) == len(by_name)  # one store folder per sweep
    ids = [e.spec.id for e in entries().values()]
    assert len(ids) == len(set(ids))
    # the registry refuses an id registered twice with different specs
    clash = SweepSpec("f-easy-quick", "Q1", seeds=(7,))
    monkeypatch.setattr(registry, "BUILTIN", (*BUILTIN, clash))
    registry.entries.cache_clear()
    try:
        with pytest.raises(ValueError, match="registered twice"):
            registry.entries()
    finally:
        monkeypatch.undo()
        registry.entries.cache_clear()


def test_spec_round_trip_and_errors(tmp_path):
    spec = SweepSpec.from_toml(KILL_SPEC)
    assert SweepSpec.from_dict(json.loads(spec.to_json())) == spec
    assert len(list(spec.runs(0))) == 16
    with pytest.raises(IsosimInputError, match="divisible"):
        SweepSpec("x", "Q2", n=(3,), total_batch=64, steps=(4,)).validate()
    with pytest.raises(IsosimInputError, match="unknown key"):
        SweepSpec.from_dict({"id": "x", "grid": 3})
    with pytest.raises(IsosimInputError, match="no sweep spec"):
        get_spec("q9-medium")


def test_seeds_derive_from_the_root_seed():
    spec = SweepSpec.from_toml(KILL_SPEC)
    a, b = list(spec.runs(0)), list(spec.runs(1))
    assert [r.key for r in a] == [r.key for r in b]
    assert all(x.seed != y.seed for x, y in zip(a, b))
    assert len({r.seed for r in a}) == 2  # one seed per replicate, shared across allocations


def test_store_refuses_another_sweep_and_rerun_skips_stored(tmp_path):
    spec = get_spec("q1-easy-testing")
    store = run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    mtimes = {k: store.path(k).stat().st_mtime_ns for k in store.keys()}
    run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    assert {k: store.path(k).stat().st_mtime_ns for k in store.keys()} == mtimes
    with pytest.raises(IsosimInputError, match="different sweep"):
        run_sweep(spec, tmp_path / "s", workers=1, progress=False, root_seed=5)


def test_an_unreadable_run_file_is_not_a_stored_run(tmp_path, capsys):
    """A truncated file and a file of garbage: status reports both, reading the store skips them,
    a resumed sweep recomputes exactly those two (the same tables as before) and touches nothing else."""
    from isosim.cli import main

    spec = get_spec("q1-easy-testing")
    store = run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    keys = store.keys()
    assert len(keys) >= 3
    before = {k: pd.read_parquet(store.path(k)) for k in keys}
    cut, junk = keys[0], keys[1]
    data = store.path(cut).read_bytes()
    store.path(cut).write_bytes(data[: len(data) // 2])
    store.path(junk).write_bytes(os.urandom(3000))
    mtimes = {k: store.path(k).stat().st_mtime_ns for k in keys[2:]}
    manifest = (tmp_path / "s" / "manifest.json").read_bytes()

    st = sweep_status(tmp_path / "s")
    assert st["unreadable"] == sorted([cut, junk])
    assert st["done"] == len(keys) - 2 and set(st["missing"]) == {cut, junk}
    assert not store.has(cut) and not store.has(junk)
    assert set(store.read()["run"]) == {before[k]["run"].iloc[0] for k in keys[2:]}
    assert main(["sweep", "status", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "2 run file(s) cannot be read" in out and cut in out and junk in out

    run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    assert sweep_status(tmp_path / "s")["unreadable"] == []
    assert store.keys() == keys
    for k in (cut, junk):
        pd.testing.assert_frame_equal(pd.read_parquet(store.path(k)), before[k])
    assert {k: store.path(k).stat().st_mtime_ns for k in keys[2:]} == mtimes
    assert (tmp_path / "s" / "manifest.json").read_bytes() == manifest


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(KILL_SPEC)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "isosim", "sweep", str(spec_file), "--out", str(out), "--workers", "2", "--quiet"]
    # a killed sweep cannot remove its temporary folder of shared problem sets: keep it in tmp_path
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        done = list((out / "runs").glob("*.parquet")) if (out / "runs").exists() else []
        if len(done) >= 3 or proc.poll() is not None:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(list((out / "runs").glob("*.parquet")))
    assert 0 < partial < 16, "the kill should land mid-sweep"
    for p in (out / "runs").glob("*.parquet"):
        pd.read_parquet(p)  # every stored file is whole
    left = set(scratch.iterdir())
    assert subprocess.run(cmd, capture_output=True, env=env).returncode == 0
    assert set(scratch.iterdir()) == left, "the resumed sweep removes its own temporary folder"
    assert not list((out / "runs").glob(".*.tmp"))
    resumed = RunStore.load(out).read()
    fresh = run_sweep(SweepSpec.from_toml(KILL_SPEC), tmp_path / "fresh", workers=2, progress=False).read()
    assert len(resumed) == len(fresh) and resumed["run"].nunique() == 16
    assert not resumed.duplicated(["run", "step", "split", "metric"]).any()
    pd.testing.assert_frame_equal(_sorted(resumed), _sorted(fresh))


def _watch_submissions(monkeypatch, on_submit) -> None:
    """Make every executor a sweep opens call ``on_submit(args)`` (the arguments of ``run_one``)
    before it submits a run (not before a build of a problem set, :func:`_watch_every_submission`)."""
    _watch_every_submission(monkeypatch, lambda fn, args: on_submit(args) if fn.__name__ == "run_one" else None)


def _watch_every_submission(monkeypatch, on_submit) -> None:
    """Make every executor a sweep opens call ``on_submit(fn, args)`` before it submits anything."""
    from contextlib import contextmanager

    import isosim.experiments.executors as executors

    real_make = executors.make_executor

    class Watched:
        def __init__(self, ex):
            self.ex, self.workers = ex, ex.workers

        def submit(self, fn, *args):
            on_submit(fn, args)
            return self.ex.submit(fn, *args)

    @contextmanager
    def watched_executor(*a, **k):
        with real_make(*a, **k) as ex:
            yield Watched(ex)

    monkeypatch.setattr(executors, "make_executor", watched_executor)


def test_each_problem_set_is_built_once_before_the_runs_that_train_on_it(tmp_path, monkeypatch):
    """With workers on the local host, the sweeps of one call first hand out one build per
    distinct problem set (here two data seeds), in the order their runs first need them, then
    the runs; the stored runs equal those of sweeps run one by one on one worker."""
    import dataclasses

    from isosim.experiments.shared_populations import set_key
    from isosim.experiments.sweep import run_sweeps
    from isosim.sim.config import SimConfig

    calls = []
    _watch_every_submission(monkeypatch, lambda fn, args: calls.append((fn.__name__, args)))
    a = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 4000"))
    b = dataclasses.replace(a, id="seed-1", base=a.base.replace(population={"seed": 1}))
    stores = run_sweeps([(a, tmp_path / "a"), (b, tmp_path / "b")], workers=2, progress=False)
    runs = sum(len(s.keys()) for s in stores)
    assert [name for name, _ in calls] == ["build_set"] * 2 + ["run_one"] * runs
    configs = [SimConfig.from_json(args[0]) for _, args in calls]
    built = [set_key(c.population, c.model) for c in configs[:2]]
    assert len(set(built)) == 2
    assert built == list(dict.fromkeys(set_key(c.population, c.model) for c in configs[2:]))
    for spec, store in ((a, stores[0]), (b, stores[1])):
        alone = run_sweep(spec, tmp_path / f"{spec.id}-alone", workers=1, progress=False)
        pd.testing.assert_frame_equal(_sorted(store.read()), _sorted(alone.read()))


@pytest.mark.parametrize("limit", [1, 3])
def test_driver_holds_at_most_max_in_flight_traces(tmp_path, monkeypatch, limit):
    """Submitted-but-unwritten runs never exceed the in-flight limit: traces stream to the store."""
    outstanding, peak = [0], [0]
    real_write = RunStore.write

    def submitted(_):
        outstanding[0] += 1
        peak[0] = max(peak[0], outstanding[0])

    def write(self, key, table):
        outstanding[0] -= 1
        real_write(self, key, table)

    _watch_submissions(monkeypatch, submitted)
    monkeypatch.setattr(RunStore, "write", write)
    spec = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 4000"))
    store = run_sweep(spec, tmp_path / "b", workers=2, progress=False, max_in_flight=limit)
    assert len(store.keys()) == 16 and outstanding[0] == 0
    assert peak[0] == limit


def test_kernels_are_compiled_in_the_driver_before_its_workers_start(tmp_path, monkeypatch):
    """Forked workers inherit the driver's compiled kernels (spawned ones read the cache it
    writes): one compilation per sweep call with runs to do, none when every run is stored."""
    import isosim.experiments.sweep as sweep_mod
    from isosim.sim import kernels
    from isosim.sim.run import compile_kernels

    compile_kernels()
    assert kernels.train_steps.signatures and kernels.evaluate.signatures
    calls = []
    monkeypatch.setattr(sweep_mod, "compile_kernels", lambda: calls.append(1))
    spec = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 2000"))
    run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    run_sweep(spec, tmp_path / "s", workers=1, progress=False)
    assert calls == [1]


@pytest.mark.parametrize("progress", [False, True, None])
def test_a_sweep_leaves_no_thread_behind(progress, tmp_path):
    """No thread a sweep starts (the executor's, the progress bar's) outlives it, so a process
    that then forks, as reproduce's analyses do (isosim.experiments.executors.fork_context),
    still may; tqdm would leave its monitor thread running after the first bar, even a disabled one."""
    import threading

    before = set(threading.enumerate())
    spec = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 2000"))
    run_sweep(spec, tmp_path / "s", workers=2, progress=progress)
    assert set(threading.enumerate()) <= before


def test_a_run_held_by_several_sweeps_is_simulated_once(tmp_path, monkeypatch):
    """Two sweeps sharing runs (same config, same replicate) simulate each shared run once and
    store the same table in both; a third sweep started later copies its stored runs from the
    others' stores; and the stores equal those of separate, independent sweeps."""
    import dataclasses

    from isosim.experiments.sweep import run_sweeps

    submitted = []
    _watch_submissions(monkeypatch, lambda args: submitted.append(args[2]))  # the run's key
    a = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 4000"))
    b = dataclasses.replace(a, id="shared-b", n=(2, 4, 16))  # n = 2 and 4 shared with a
    c = dataclasses.replace(a, id="shared-c", n=(4, 8))  # all stored by then
    sa, sb = run_sweeps([(a, tmp_path / "a"), (b, tmp_path / "b")], workers=2, progress=False)
    keys_a, keys_b = {r.key for r in a.runs(0)}, {r.key for r in b.runs(0)}
    assert len(keys_a & keys_b) == 4  # two n, two replicates
    assert sorted(submitted) == sorted(keys_a | keys_b)  # each once
    assert set(sa.keys()) == keys_a and set(sb.keys()) == keys_b
    submitted.clear()
    sc = run_sweeps([(c, tmp_path / "c"), (a, tmp_path / "a")], workers=2, progress=False)[0]
    assert submitted == [] and set(sc.keys()) == {r.key for r in c.runs(0)}
    for spec, store in ((b, sb), (c, sc)):
        alone = run_sweep(spec, tmp_path / f"{spec.id}-alone", workers=1, progress=False)
        pd.testing.assert_frame_equal(_sorted(store.read()), _sorted(alone.read()))


@pytest.mark.parametrize("backend", ["dask", "ray"])
def test_backends_give_identical_results(backend, tmp_path):
    """... and leave the caller's environment as they found it (a local Dask cluster sets
    MALLOC_TRIM_THRESHOLD_ and more in os.environ, which slows every process started later)."""
    spec = get_spec("q1-hard-testing")
    local = run_sweep(spec, tmp_path / "local", backend="local", workers=2, progress=False).read()
    env = dict(os.environ)
    other = run_sweep(spec, tmp_path / backend, backend=backend, workers=2, progress=False).read()
    assert dict(os.environ) == env
    pd.testing.assert_frame_equal(_sorted(local), _sorted(other))


def test_dask_backend_connects_to_a_running_cluster_by_address(tmp_path):
    from distributed import LocalCluster

    from isosim.experiments.executors import environment_kept

    spec = get_spec("q1-easy-testing")
    # the test's own cluster edits os.environ too: keep it from the later tests' subprocesses
    with environment_kept(), LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                          dashboard_address=":0") as cluster:
        remote = run_sweep(spec, tmp_path / "remote", backend="dask", address=cluster.scheduler_address,
                           progress=False).read()
    local = run_sweep(spec, tmp_path / "local", backend="local", workers=1, progress=False).read()
    pd.testing.assert_frame_equal(_sorted(local), _sorted(remote))


def _count_builds(monkeypatch, log: Path) -> None:
    """Append a line to ``log`` each time any process (forked from this one) builds a problem set."""
    import isosim.experiments.shared_populations as sp

    real = sp.build_population

    def counted(cfg, model):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(cfg, model)

    monkeypatch.setattr(sp, "build_population", counted)
    monkeypatch.setattr(sp, "_read", type(sp._read)())


def _race_for(args) -> bytes:
    """Read one problem set through the shared folder, return its numbers as bytes."""
    from isosim.experiments.shared_populations import shared_population

    cfg, model, folder = args
    pop = shared_population(cfg, model, folder)
    return pickle.dumps((pop.train.problems.base_logits, pop.val.problems.rewards, pop.train.lengths))


def test_workers_sharing_a_folder_build_each_problem_set_once(tmp_path, monkeypatch):
    """Four forked processes that ask for the same set at once: one builds it, the others wait
    for its lock and read the same numbers; a set they do not share is built apart."""
    import multiprocessing

    from isosim.sim.population import build_population

    log = tmp_path / "builds.log"
    _count_builds(monkeypatch, log)
    cfg = SimConfig().replace(population={"preset": "hard", "train_size": 300, "val_size": 40})
    folder = tmp_path / "shared"
    folder.mkdir()
    with multiprocessing.get_context("fork").Pool(4) as pool:
        got = pool.map(_race_for, [(cfg.population, cfg.model, str(folder))] * 4)
    assert len(log.read_text().split()) == 1
    assert len(set(got)) == 1
    ref = build_population(cfg.population, cfg.model)
    assert got[0] == pickle.dumps((ref.train.problems.base_logits, ref.val.problems.rewards, ref.train.lengths))
    # the learning-path scales do not shape problems: the same file serves a model with another
    other = cfg.replace(model={"shared": 0.0, "local": 1.0})
    _race_for((other.population, other.model, str(folder)))
    assert len(log.read_text().split()) == 1
    _race_for((dataclasses.replace(cfg.population, seed=5), cfg.model, str(folder)))
    assert len(log.read_text().split()) == 2
    assert sorted(p.suffix for p in folder.iterdir()) == [".lock", ".lock", ".pkl", ".pkl"]


def test_a_sweep_shares_its_problem_sets_and_removes_the_folder(tmp_path, monkeypatch):
    """Two workers on runs of one set: it is built once, and the temporary folder is gone after
    the sweep; the runs are the same as one worker's."""
    import tempfile

    log = tmp_path / "builds.log"
    _count_builds(monkeypatch, log)
    before = set(Path(tempfile.gettempdir()).glob("isosim-populations-*"))
    spec = SweepSpec.from_toml(KILL_SPEC.replace("budget = 300000", "budget = 4000"))
    two = run_sweep(spec, tmp_path / "two", workers=2, progress=False).read()
    assert len(log.read_text().split()) == 1
    assert set(Path(tempfile.gettempdir()).glob("isosim-populations-*")) == before
    one = run_sweep(spec, tmp_path / "one", workers=1, progress=False).read()
    pd.testing.assert_frame_equal(_sorted(two), _sorted(one))


def test_a_folder_that_cannot_take_a_set_only_costs_the_sharing(tmp_path, monkeypatch):
    """A full disk while writing a set, or a folder that is gone: the set is built and used as
    without a folder, and no partial file is left."""
    import isosim.experiments.shared_populations as sp

    log = tmp_path / "builds.log"
    _count_builds(monkeypatch, log)
    cfg = SimConfig().replace(population={"preset": "hard", "train_size": 200, "val_size": 20})
    ref = _race_for((cfg.population, cfg.model, None))

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sp.pickle, "dump", full)
    folder = tmp_path / "shared"
    folder.mkdir()
    assert _race_for((cfg.population, cfg.model, str(folder))) == ref
    assert [p.suffix for p in folder.iterdir()] == [".lock"]
    monkeypatch.setattr(sp, "_read", type(sp._read)())
    assert _race_for((cfg.population, cfg.model, str(tmp_path / "gone"))) == ref
    assert len(log.read_text().split()) == 3
