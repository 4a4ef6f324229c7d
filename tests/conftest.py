import pytest
from hypothesis import settings

# Property-based tests explore a fixed, reproducible set of examples (no wall-clock deadline:
# a first example may include Numba compilation).
settings.register_profile("isosim", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("isosim")

from isosim import Allocation, EvalConfig, ModelConfig, PopulationConfig, SimConfig


@pytest.fixture(scope="session")
def small_cfg() -> SimConfig:
    """A small, fast strategies config (512 + 64 problems, exact band measurement)."""
    return SimConfig(
        population=PopulationConfig(preset="easy", train_size=512, val_size=64, measure="exact"),
        model=ModelConfig(n_strategies=16, rank=4),
        allocation=Allocation(n=8, b_problem=16, steps=60),
        eval=EvalConfig(n_evals=6),
    )


QUICK_FIXTURE = "quick_reproduction"


def _uses_quick(item) -> bool:
    return QUICK_FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(session, config, items):
    """The tests that read the quick reproduction run last, so that the reproduction (started in
    the background by the first test) runs beside every other test instead of before them."""
    items[:] = [it for it in items if not _uses_quick(it)] + [it for it in items if _uses_quick(it)]


@pytest.fixture(scope="session", autouse=True)
def _quick_reproduction_process(request, tmp_path_factory):
    """Start ``isosim reproduce --quick --json`` in a subprocess when the session holds a test that
    reads it; yields (process, out folder, stdout file, stderr file) or None. A process still
    running at the end of the session (only some tests selected) is stopped with its workers."""
    import os
    import signal
    import subprocess
    import sys

    if not any(_uses_quick(it) for it in request.session.items):
        yield None
        return
    root = tmp_path_factory.mktemp("reproduce")
    out, stdout, stderr = root / "out", root / "stdout.json", root / "stderr.txt"
    argv = [sys.executable, "-m", "isosim", "reproduce", "--quick", "--out", str(out), "--json",
            "--n-boot", "5", "--workers", "2"]
    with open(stdout, "wb") as fo, open(stderr, "wb") as fe:
        proc = subprocess.Popen(argv, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, start_new_session=True)
    yield proc, out, stdout, stderr
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.fixture(scope="session")
def quick_reproduction(_quick_reproduction_process):
    """``isosim reproduce --quick --json`` run once per session, as a user runs it: (out folder,
    parsed JSON). It starts with the session and runs beside the other tests.

    Its sweeps are the reduced finding sweeps; the finding tests read them from here.
    """
    import json

    proc, out, stdout, stderr = _quick_reproduction_process
    code = proc.wait()
    assert code == 0, f"isosim reproduce --quick exited with {code}:\n{stderr.read_text()[-4000:]}"
    return out, json.loads(stdout.read_text())
