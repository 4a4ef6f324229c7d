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
#: the one file whose tests read the quick reproduction (under xdist, one worker runs a file)
QUICK_FILE = "tests/test_findings.py"


def _uses_quick(item) -> bool:
    return QUICK_FIXTURE in getattr(item, "fixturenames", ())


def _xdist_worker(config) -> bool:
    """Whether this process is a pytest-xdist worker (``-n 2 --dist loadfile`` in pyproject.toml)."""
    return hasattr(config, "workerinput")


def pytest_collection_modifyitems(session, config, items):
    """Where the tests that read the quick reproduction run.

    In one process (``-n 0``) they run last, so that the reproduction, started in the background
    with the session, runs beside every other test instead of before them. Under pytest-xdist
    (``--dist loadfile``: a file's tests go to one worker) they run first: their file is handed
    out first, its worker starts the reproduction and waits for it while the other worker takes
    the remaining files, the notebooks first. They must all live in one file, or a second
    worker would start a second reproduction."""
    quick = [it for it in items if _uses_quick(it)]
    rest = [it for it in items if not _uses_quick(it)]
    files = {it.nodeid.split("::")[0] for it in quick}
    if files - {QUICK_FILE}:
        raise pytest.UsageError(f"tests that read {QUICK_FIXTURE} belong in {QUICK_FILE}, not in "
                                f"{', '.join(sorted(files - {QUICK_FILE}))}")
    if _xdist_worker(config):
        # then the notebooks, the longest single items (10 to 40 s each): handed out early, they
        # do not leave one process running a long item at the end while the other waits
        notebooks = [it for it in rest if it.nodeid.endswith(".ipynb")]
        items[:] = quick + notebooks + [it for it in rest if not it.nodeid.endswith(".ipynb")]
    else:
        items[:] = rest + quick


@pytest.fixture(scope="session")
def _quick_reproduction_process(tmp_path_factory):
    """Start ``isosim reproduce --quick --json`` in a subprocess; yields (process, out folder,
    stdout file, stderr file). A process still running at the end of the session (only some
    tests selected) is stopped with its workers."""
    import os
    import signal
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("reproduce")
    out, stdout, stderr = root / "out", root / "stdout.json", root / "stderr.txt"
    argv = [sys.executable, "-m", "isosim", "reproduce", "--quick", "--out", str(out), "--json",
            "--n-boot", "5", "--workers", "2"]
    with open(stdout, "wb") as fo, open(stderr, "wb") as fe:
        # its own process group (stopped as one at the end), but the session's scheduling group: in a
        # new session Linux's autogroup scheduler would share the CPU between the two sessions
        # equally, capping the reproduction's two workers at one core while the tests ran
        proc = subprocess.Popen(argv, stdout=fo, stderr=fe, stdin=subprocess.DEVNULL, process_group=0)
    yield proc, out, stdout, stderr
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.fixture(scope="session", autouse=True)
def _start_quick_reproduction_with_the_session(request):
    """In one process, start the quick reproduction when the session begins, if a selected test
    reads it (under xdist the worker that runs those tests starts it at its first one)."""
    if not _xdist_worker(request.config) and any(_uses_quick(it) for it in request.session.items):
        request.getfixturevalue("_quick_reproduction_process")


@pytest.fixture(scope="session")
def quick_reproduction(_quick_reproduction_process):
    """``isosim reproduce --quick --json`` run once per session, as a user runs it: (out folder,
    parsed JSON). It starts with the session (under xdist: with the first test that reads it) and
    runs beside the other tests.

    Its sweeps are the reduced finding sweeps; the finding tests read them from here.
    """
    import json

    proc, out, stdout, stderr = _quick_reproduction_process
    code = proc.wait()
    assert code == 0, f"isosim reproduce --quick exited with {code}:\n{stderr.read_text()[-4000:]}"
    return out, json.loads(stdout.read_text())
