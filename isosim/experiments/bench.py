"""Benchmarks behind ``isosim bench``: every figure is a ratio or rate measured in one run."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from ..sim import kernels, twin
from ..sim.config import Allocation, EvalConfig, SimConfig
from ..sim.population import build_population
from ..sim.run import initial_state, kernel_params, simulate, train_data


def _time_steps(module, config: SimConfig, steps: int, seed: int = 0, repeats: int = 3) -> float:
    """Seconds per training step of ``module.train_steps`` from the reference policy."""
    pop = build_population(config.population, config.model)
    S = pop.train.problems.base_logits.shape[1]
    r = pop.train.problems.features.shape[1]
    fpar, ipar = kernel_params(config)
    data = train_data(pop.train, config)
    module.train_steps(np.random.default_rng(seed), data, initial_state(len(pop.train), S, r), fpar, ipar, 0, 2)  # compile / warm up
    best = np.inf
    for _ in range(repeats):  # the minimum of a few repeats is the least disturbed by other load
        st = initial_state(len(pop.train), S, r)
        t0 = time.perf_counter()
        module.train_steps(np.random.default_rng(seed), data, st, fpar, ipar, 0, steps)
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def arithmetic_floor(S: int, r: int, b_problem: int, n: int, blocks: int = 64, repeats: int = 5,
                     seed: int = 0) -> float:
    """Seconds per step of the arithmetic a GRPO step cannot avoid, timed as one vectorised pass.

    For ``blocks`` steps at once, in large NumPy operations (so per-call overhead is amortised):
    the logits ``L0 + beta + Z V`` of the B_problem drawn problems (``B r S`` multiply-adds), their
    ``B S`` exponentials and normalisation, ``min(n, S)`` uniforms per group (the randomness of
    the draws), the chain rule of the ``min(n, S)`` non-zero logit gradients of each group to
    ``beta`` and ``V`` (``B min(n, S) (r + 1)`` multiply-adds) and one Adam update of the
    ``S (r + 1)`` shared parameters; the best of ``repeats`` timings, divided by ``blocks``.
    """
    rng = np.random.default_rng(seed)
    rows = blocks * b_problem
    nnz = min(n, S)
    L0 = rng.normal(size=(rows, S))
    Z = rng.normal(size=(rows, r))
    V = rng.normal(size=(r, S)) * 0.1
    beta = rng.normal(size=S) * 0.1
    Zg = rng.normal(size=(r + 1, rows * nnz))
    g = rng.normal(size=rows * nnz)
    P = blocks * S * (r + 1)
    x, m, v, gp = np.zeros(P), np.zeros(P), np.full(P, 1e-4), rng.normal(size=P)
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        logits = L0 + beta + Z @ V
        w = np.exp(logits - logits.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        rng.random(rows * nnz)
        Zg @ g
        m *= 0.9
        m += 0.1 * gp
        v *= 0.999
        v += 0.001 * gp * gp
        x += 1e-3 * m / (np.sqrt(v) + 1e-8)
        best = min(best, time.perf_counter() - t0)
    return best / blocks


_MEMORY_PROBE = """
import json, resource

def hwm_kb():
    # VmHWM belongs to this process image; ru_maxrss survives exec from a larger parent
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

from isosim import SimConfig, simulate
before = hwm_kb()
simulate(SimConfig().replace(allocation={"n": 16, "b_problem": 32, "budget": 1e6}), 0)
print(json.dumps({"import_kb": before, "peak_kb": hwm_kb()}))
"""


def peak_memory_mb() -> tuple[float, float]:
    """Peak resident memory (MB) of a fresh process running one default easy simulate, and after imports."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE], capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return res["peak_kb"] / 1024, res["import_kb"] / 1024


BENCH_SWEEP = """
id = "bench-sweep"
question = "Q1"
n = [2, 4]
b_problem = [16]
budget = 4000000
seeds = [0, 1, 2, 3, 4, 5, 6, 7]
[base.population]
train_size = 500
val_size = 50
measure = "exact"
[base.model]
kind = "tabular"
"""


def sweep_throughput(workers: int) -> float:
    """Configs per second of a 16-run sweep (runs of about a second) on the local backend with ``workers`` processes."""
    import tempfile

    from .sweep import SweepSpec, run_sweep

    spec = SweepSpec.from_toml(BENCH_SWEEP)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_sweep(spec, tmp, workers=workers, progress=False)
        return len(list(spec.runs(0))) / (time.perf_counter() - t0)


#: the planner's timed cases (``plan_s``): pass-rate bands, budgets in rollouts, numbers of problems
PLAN_BANDS = ("easy", "hard", "mixture")
PLAN_BUDGETS = (1e5, 1e7, 1e9)
PLAN_PROBLEMS = (2000, 100_000)
#: the batch cap of the timed plans (the largest search: every n up to 2048)
PLAN_B_MAX = 65536
#: the ensemble of the timed plans with a calibrated model config (``plan_ensemble_s``): knob
#: sets as ``isosim calibrate`` writes them, the default's first (the best fit) and three others
#: inside the knobs' bounds; a plan's cost follows the number of members, each integrating every
#: n at the chosen B_problem, not where in the bounds they lie
PLAN_ENSEMBLE = ({"lr": 0.03, "prior_scale": 10.0, "skill_link": 0.7},
                 {"lr": 0.02, "prior_scale": 10.0, "skill_link": 0.7},
                 {"lr": 0.03, "prior_scale": 6.0, "skill_link": 0.7},
                 {"lr": 0.03, "prior_scale": 10.0, "skill_link": 0.5})
#: the number of problems of the ensemble's timed plans (the largest of :data:`PLAN_PROBLEMS`)
PLAN_ENSEMBLE_PROBLEMS = 100_000


def plan_histogram(band: str, problems: int, seed: int = 0) -> np.ndarray:
    """A histogram of ``problems`` pass rates: uniform over the easy band [0.3, 0.6] or the hard
    band [0, 0.0625], or half of each (``mixture``)."""
    from ..sim.config import BANDS

    rng = np.random.default_rng(seed)
    if band == "mixture":
        half = problems // 2
        return np.concatenate([plan_histogram("easy", half, seed), plan_histogram("hard", problems - half, seed + 1)])
    lo, hi = BANDS[band]
    return rng.uniform(lo, hi, problems)


def plan_seconds(cases=None, b_max: int = PLAN_B_MAX, model_config: str | None = None) -> dict:
    """Wall seconds of ``isosim plan --json`` in a fresh process (start-up included) per case
    ``(band, budget, problems)`` (default: every combination of :data:`PLAN_BANDS`,
    :data:`PLAN_BUDGETS` and :data:`PLAN_PROBLEMS`), as ``{band: {budget: {problems: s}}}``
    with the budget written ``1e5``; the histograms are :func:`plan_histogram`'s. An untimed plan
    of the first case runs before them, so no case pays the kernels' compile after an install.
    ``model_config``: the text of a model config file each plan reads (``--model-config``)."""
    import tempfile
    from pathlib import Path

    if cases is None:
        cases = [(b, c, d) for b in PLAN_BANDS for c in PLAN_BUDGETS for d in PLAN_PROBLEMS]
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        extra = []
        if model_config is not None:
            (Path(tmp) / "model.toml").write_text(model_config)
            extra = ["--model-config", str(Path(tmp) / "model.toml")]
        warm = True  # one untimed plan first: the kernels' compile after an install is not a plan's time
        for band, budget, problems in [cases[0], *cases]:
            path = Path(tmp) / f"{band}-{problems}.csv"
            if not path.exists():
                path.write_text("pass_rate\n" + "\n".join(f"{x:.6f}" for x in plan_histogram(band, problems)) + "\n")
            cmd = [sys.executable, "-m", "isosim", "plan", "--pass-rates", str(path), "--budget", f"{budget:g}",
                   "--b-max", str(b_max), "--json", *extra]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            if warm:
                warm = False
                continue
            key = f"{budget:.0e}".replace("e+0", "e").replace("e+", "e")
            out.setdefault(band, {}).setdefault(key, {})[str(problems)] = time.perf_counter() - t0
    return out


def plan_ensemble_seconds(model_config: str, b_max: int = PLAN_B_MAX) -> dict:
    """:func:`plan_seconds` of every band and budget on :data:`PLAN_ENSEMBLE_PROBLEMS` problems,
    each plan reading ``model_config`` (the text of a model config file: the command line passes
    the defaults with :data:`PLAN_ENSEMBLE` as their ensemble): the planner's time with a
    calibrated ``--model-config``."""
    cases = [(b, c, PLAN_ENSEMBLE_PROBLEMS) for b in PLAN_BANDS for c in PLAN_BUDGETS]
    return plan_seconds(cases, b_max, model_config=model_config)


def _max_seconds(times: dict) -> float:
    return max(s for by_c in times.values() for by_d in by_c.values() for s in by_d.values())


#: the group sizes whose step time ``isosim bench`` reports beside the arithmetic floor
STEP_NS = (2, 8, 64, 512)


def run_benchmarks(steps: int = 400, sweep: bool = True, plan: bool = True,
                   plan_model_config: str | None = None) -> dict:
    """Every benchmark figure, measured in this one call. NumPy's BLAS is held to one thread while
    the kernel, its twin and the floor are timed: the kernel runs on one core, and on a busy
    2-core machine a multi-threaded BLAS makes small products tens of times slower. ``plan``:
    also the planner's wall time per case (:func:`plan_seconds`), with the load average before
    it (``plan_load``: other work on the machine slows it); given ``plan_model_config`` (the text
    of a model config file), also the plans that read it (:func:`plan_ensemble_seconds`,
    ``plan_ensemble_s``)."""
    with threadpool_limits(limits=1):
        res = _run_benchmarks(steps, sweep)
    if plan:
        import os

        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        times = plan_seconds()
        res.update(plan_s=times, plan_s_max=_max_seconds(times), plan_load=load)
        if plan_model_config is not None:
            ensemble = plan_ensemble_seconds(plan_model_config)
            res.update(plan_ensemble_s=ensemble, plan_ensemble_s_max=_max_seconds(ensemble))
    return res


def _run_benchmarks(steps: int, sweep: bool) -> dict:
    base = SimConfig().replace(allocation=Allocation(n=16, b_problem=32, steps=steps))
    rollouts = 16 * 32
    t_numba = _time_steps(kernels, base, steps)
    t_numpy = _time_steps(twin, base, max(steps // 4, 20))
    t8 = _time_steps(kernels, base.replace(allocation={"n": 8}), steps)
    t2048 = _time_steps(kernels, base.replace(allocation={"n": 2048}), steps)
    peak, imported = peak_memory_mb()
    ev = EvalConfig(n_evals=12)
    rows = [len(simulate(base.replace(allocation={"steps": m}, eval=ev), 0).table) for m in (1000, 10000)]
    per_n = {}
    pop = build_population(base.population, base.model)
    S, r = pop.train.problems.base_logits.shape[1], pop.train.problems.features.shape[1]
    for n in STEP_NS:
        t = _time_steps(kernels, base.replace(allocation={"n": n}), steps)
        floor = arithmetic_floor(S, r, 32, n)
        per_n[str(n)] = {"step_us": t * 1e6, "floor_us": floor * 1e6, "ratio_to_floor": t / floor}
    res = {
        "step_us_by_n": per_n,
        "numba_rollouts_per_s": rollouts / t_numba,
        "numpy_rollouts_per_s": rollouts / t_numpy,
        "speedup": t_numpy / t_numba,
        "step_cost_ratio_n2048_n8": t2048 / t8,
        "step_seconds_n8": t8,
        "step_seconds_n2048": t2048,
        "simulate_peak_rss_mb": peak,
        "import_rss_mb": imported,
        "trace_rows_m1000": rows[0],
        "trace_rows_m10000": rows[1],
    }
    if sweep:
        one, two = sweep_throughput(1), sweep_throughput(2)
        res.update(sweep_configs_per_s_1_worker=one, sweep_configs_per_s_2_workers=two, sweep_speedup_2_workers=two / one)
    return res
