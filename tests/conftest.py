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


@pytest.fixture(scope="session")
def quick_reproduction(tmp_path_factory):
    """``isosim reproduce --quick --json`` run once per session: (out folder, parsed JSON).

    Its sweeps are the reduced finding sweeps; the finding tests read them from here.
    """
    import contextlib
    import io
    import json

    from isosim.cli import main

    out = tmp_path_factory.mktemp("reproduce") / "out"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["reproduce", "--quick", "--out", str(out), "--json", "--n-boot", "5", "--workers", "2"])
    assert code == 0
    return out, json.loads(buf.getvalue())
