"""isosim: bandit surrogate models of LLM RL for compute-optimal rollout allocation.

Five lines from a notebook::

    from isosim import SimConfig, simulate
    cfg = SimConfig().replace(allocation={"n": 16, "b_problem": 32, "budget": 2e6})
    trace = simulate(cfg, seed=0)
    trace.curve("avg@4", split="val")   # step, compute_rollouts, compute_tokens, value
"""
__version__ = "0.1.0"

from .errors import IsosimInputError  # noqa: E402
from .sim.config import AlgoConfig, Allocation, EvalConfig, ModelConfig, PopulationConfig, SimConfig  # noqa: E402
from .sim.population import Population, build_population, load_pass_rates  # noqa: E402
from .sim.run import Trace, simulate  # noqa: E402

__all__ = [
    "AlgoConfig", "Allocation", "EvalConfig", "ModelConfig", "PopulationConfig", "SimConfig",
    "IsosimInputError", "Population", "build_population", "load_pass_rates", "Trace", "simulate",
]
