"""Sweeps as plain data, run on any executor, streamed into a resumable store.

A :class:`SweepSpec` is a tuple of settings with an id. Its runs are one GRPO run per
allocation and seed, each to the largest budget; smaller budgets (Q1, Q3) or step
counts (Q2) are read off that run's evaluations, as the study did with a constant LR.

* Q1: ``B_problem`` fixed, ``n`` over a grid, ``M = C / (n B_problem)``;
* Q2: total batch ``B = n * B_problem`` fixed, the split swept, ``M`` over a grid;
* Q3: ``n`` and ``B_problem`` both free under ``n * B_problem <= B_max``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pandas as pd

from ..errors import IsosimInputError
from ..sim.config import ModelConfig, PopulationConfig, SimConfig, parse_text
from ..sim.run import compile_kernels
from .progress import note_compiling, progress_bar
from .store import RunStore

QUESTIONS = ("Q1", "Q2", "Q3")
POWERS_OF_TWO = tuple(2**k for k in range(1, 11))


@dataclass(frozen=True)
class Run:
    key: str  # store key: config id and replicate
    config: SimConfig
    replicate: int
    seed: int


@dataclass(frozen=True)
class SweepSpec:
    id: str
    question: str = "Q1"
    base: SimConfig = field(default_factory=SimConfig)
    n: tuple[int, ...] = POWERS_OF_TWO
    b_problem: tuple[int, ...] = (32,)
    budget: float = 2.0**23  # Q1 and Q3: the largest budget C in rollouts
    total_batch: int = 0  # Q2: the fixed B = n * B_problem
    steps: tuple[int, ...] = ()  # Q2: the M values
    b_max: int = 65536  # Q3 (and a cap everywhere): n * B_problem <= b_max
    seeds: tuple[int, ...] = (0,)

    def validate(self) -> "SweepSpec":
        if self.question not in QUESTIONS:
            raise IsosimInputError(f"question must be one of {', '.join(QUESTIONS)}, got {self.question!r}")
        if not self.id or any(c in self.id for c in "/\\ "):
            raise IsosimInputError(f"sweep id must be a non-empty word, got {self.id!r}")
        if not self.n or any(v < 1 for v in self.n):
            raise IsosimInputError("n values must be integers >= 1")
        if not self.seeds:
            raise IsosimInputError("a sweep needs at least one seed")
        if self.question == "Q2":
            if self.total_batch < 1 or not self.steps or min(self.steps) < 1:
                raise IsosimInputError("Q2 needs total_batch >= 1 and steps (the M values)")
            bad = [n for n in self.n if self.total_batch % n]
            if bad:
                raise IsosimInputError(f"Q2: total_batch {self.total_batch} is not divisible by n = {bad[0]}")
        elif self.budget <= 0:
            raise IsosimInputError("Q1 and Q3 need a budget > 0")
        runs = list(self.runs(0))
        if not runs:
            raise IsosimInputError("the sweep has no runs (check n, b_problem and b_max)")
        for r in runs[:1]:
            r.config.validate()
        return self

    def allocations(self) -> list[tuple[int, int]]:
        """The (n, B_problem) pairs of the sweep."""
        if self.question == "Q2":
            pairs = [(n, self.total_batch // n) for n in self.n]
        else:
            pairs = [(n, bp) for n in self.n for bp in self.b_problem]
        return [(n, bp) for n, bp in pairs if n * bp <= self.b_max]

    def runs(self, root_seed: int) -> Iterator[Run]:
        for n, bp in self.allocations():
            if self.question == "Q2":
                alloc = {"n": n, "b_problem": bp, "steps": int(max(self.steps)), "budget": 0.0}
                ev = {"at_steps": tuple(sorted(set(int(s) for s in self.steps)))}
                cfg = self.base.replace(allocation=alloc, eval=ev)
            else:
                cfg = self.base.replace(allocation={"n": n, "b_problem": bp, "budget": float(self.budget), "steps": 0})
            cid = cfg.config_id()
            for rep in self.seeds:
                yield Run(f"{cid}-r{rep}", cfg, rep, derive_seed(root_seed, rep))

    def testing(self) -> "SweepSpec":
        """A small subset of this spec that runs end to end in seconds (used by CI)."""
        base = self.base.replace(population={"train_size": 400, "val_size": 40},
                                 model={"n_strategies": min(self.base.model.n_strategies, 16)},
                                 eval={"n_evals": 8})
        n = self.n[:: max(1, len(self.n) // 3)][:3]
        if self.question == "Q2":
            tb = min(self.total_batch, 256)
            n = tuple(v for v in n if tb % v == 0) or (1,)
            return dataclasses.replace(self, id=self.id + "-testing", base=base, n=n, total_batch=tb,
                                       steps=tuple(sorted(set(min(s, 40) for s in self.steps))), seeds=self.seeds[:1])
        bp = tuple(min(v, 32) for v in self.b_problem[:2])
        return dataclasses.replace(self, id=self.id + "-testing", base=base, n=n, b_problem=tuple(dict.fromkeys(bp)),
                                   budget=min(self.budget, 2.0**15), seeds=self.seeds[:1])

    # --- plain data -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "base"}
        d = {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}
        d["base"] = self.base.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SweepSpec":
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise IsosimInputError(f"unknown key(s) in sweep spec: {', '.join(sorted(unknown))}")
        if "id" not in data:
            raise IsosimInputError("a sweep spec needs an id")
        base = SimConfig.from_dict(data.pop("base", {}))
        kwargs: dict[str, Any] = {"base": base}
        for k, v in data.items():
            if k in ("n", "b_problem", "steps", "seeds"):
                try:
                    kwargs[k] = tuple(int(x) for x in (v if isinstance(v, list) else [v]))
                except (TypeError, ValueError):
                    raise IsosimInputError(f"sweep spec: {k} must be a list of integers") from None
            elif k in ("budget",):
                kwargs[k] = float(v)
            elif k in ("total_batch", "b_max"):
                kwargs[k] = int(v)
            else:
                kwargs[k] = str(v)
        return cls(**kwargs)

    @classmethod
    def from_toml(cls, text: str) -> "SweepSpec":
        return cls.from_dict(parse_text(text, "toml", "sweep spec"))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def derive_seed(root_seed: int, replicate: int) -> int:
    """The training seed of a replicate: independent streams from one root seed."""
    return int(np.random.SeedSequence([int(root_seed), int(replicate)]).generate_state(1)[0])


@lru_cache(maxsize=2)
def _population(population: PopulationConfig, model: ModelConfig, shared: str | None = None):
    """The problem sets of a (population, model) pair, built once per worker process: every run
    of a Q1 grid shares them (they depend on the data seed, not on the allocation); with a
    ``shared`` folder, once among the workers that share it
    (:func:`~isosim.experiments.shared_populations.shared_population`)."""
    from .shared_populations import shared_population

    return shared_population(population, model, shared)


def run_one(config_json: str, seed: int, key: str, replicate: int, shared: str | None = None) -> pd.DataFrame:
    """Worker: simulate one run and return its trace table with the run's identifiers.
    ``shared``: a folder in which the workers of a sweep on one host share their problem sets.

    NumPy's BLAS is held to one thread: the workers already use every core."""
    from threadpoolctl import threadpool_limits

    from ..sim.run import simulate

    cfg = SimConfig.from_json(config_json)
    with threadpool_limits(limits=1):
        pop = _population(cfg.population, cfg.model, shared)
        table = simulate(cfg, seed, population=pop).table
    table.insert(0, "run", key)
    table.insert(1, "replicate", replicate)
    table.insert(2, "n", cfg.allocation.n)
    table.insert(3, "B_problem", cfg.allocation.b_problem)
    return table


def build_set(config_json: str, shared: str) -> None:
    """Worker: build the problem sets of a run's config into the ``shared`` folder (or find them
    there), ahead of the runs that train on them (:func:`_with_builds`)."""
    from threadpoolctl import threadpool_limits

    cfg = SimConfig.from_json(config_json)
    with threadpool_limits(limits=1):
        _population(cfg.population, cfg.model, shared)


def run_cost(config: SimConfig) -> float:
    """A proxy for a run's duration, used to start the longest runs first: problem visits of
    its training steps (``M * B_problem``) and of its evaluations (validation problems, and the
    training ones where they are evaluated, at each evaluation)."""
    steps = config.allocation.resolved_steps(config.algo)
    pc = config.population
    evaluated = pc.val_size + (pc.resolved_train_size() if config.eval.train_split else 0)
    return float(steps * config.allocation.b_problem + (config.eval.n_evals + 2) * evaluated)


def run_sweep(spec: SweepSpec, out: str | Path, backend: str = "local", address: str | None = None,
              workers: int | None = None, root_seed: int = 0, progress: bool | None = None,
              max_in_flight: int | None = None) -> RunStore:
    """Run every missing run of ``spec`` into the store at ``out``; return the store.

    ``progress``: a tqdm bar on stderr (``None``: when stderr is a terminal or in a notebook;
    :mod:`isosim.experiments.progress`)."""
    return run_sweeps([(spec, out)], backend=backend, address=address, workers=workers, root_seed=root_seed,
                      progress=progress, max_in_flight=max_in_flight)[0]


def run_sweeps(jobs, backend: str = "local", address: str | None = None, workers: int | None = None,
               root_seed: int = 0, progress: bool | None = None, max_in_flight: int | None = None) -> list[RunStore]:
    """Run every missing run of several sweeps, ``[(spec, out), ...]``, on one executor; return
    their stores in the same order.

    The runs of all sweeps are pooled and started longest first (:func:`run_cost`), so the
    workers finish together instead of idling at the end of each sweep, and one set of worker
    processes (with their compiled kernels and cached populations) serves every sweep. At
    most ``max_in_flight`` runs (default ``2 * workers``) are submitted or held at once: each
    finished trace is written to its store and dropped. The order changes nothing stored:
    each run's seed comes from the root seed and its replicate, and stores read in key order.

    A run is simulated once however many of the sweeps hold it: its key is its config's content
    hash and its replicate, and with one root seed the same key is the same simulation. It is
    written to every store that lacks it, and one already stored in any of the stores is copied
    to the others instead of run again. When the workers run on the local host (no ``address``),
    the kernels are compiled here first (:func:`isosim.sim.run.compile_kernels`): forked workers
    inherit them and spawned ones read the cache, instead of each compiling them; and the
    workers share their problem sets through a temporary folder, so each set is built once, and
    the builds go out before the runs, side by side (:mod:`isosim.experiments.shared_populations`).
    """
    from .executors import check_executor_args, make_executor

    check_executor_args(backend, workers)
    if not isinstance(root_seed, (int, np.integer)) or root_seed < 0:
        raise IsosimInputError(f"the root seed must be an integer >= 0, got {root_seed!r}")
    for spec, _ in jobs:  # every spec is checked before any store is created
        spec.validate()
    stores, missing, stored = [], {}, {}
    for spec, out in jobs:
        store = RunStore.open(out, spec.to_dict(), root_seed)
        stores.append(store)
        for r in spec.runs(root_seed):
            if store.has(r.key):
                stored.setdefault(r.key, store)
            else:
                missing.setdefault(r.key, (r, []))[1].append(store)
    todo = []
    for key, (run, targets) in missing.items():
        if key in stored:
            for store in targets:
                store.write_bytes(key, stored[key].path(key).read_bytes())
        else:
            todo.append((run_cost(run.config), len(todo), targets, run))
    todo.sort(key=lambda t: -t[0])  # stable: equal costs keep the spec's order
    label = f"sweep {jobs[0][0].id}" if len(jobs) == 1 else f"{len(jobs)} sweeps"
    if not todo:
        return stores
    if address is None:  # workers on the local host: compile once here, not once per worker
        note_compiling(progress)
        compile_kernels()
    with contextlib.ExitStack() as stack:
        shared = None if address is not None else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="isosim-populations-"))
        ex = stack.enter_context(make_executor(backend, address=address, workers=workers))
        bar = stack.enter_context(progress_bar(len(todo), label, progress))
        _run_all(ex, bar, todo, max_in_flight, shared)
    return stores


def _with_builds(todo: list, shared: str | None) -> list:
    """``todo`` preceded by one build of each distinct problem set it trains on, in the order
    the runs first need them (``targets`` None marks a build). Handed out first, the builds run
    side by side on the workers; without them, two workers whose next runs need the same new
    set would both stop for it, one building while the other waits on its lock."""
    if shared is None:
        return todo
    from .shared_populations import set_key

    first: dict = {}
    for _, _, _, run in todo:
        first.setdefault(set_key(run.config.population, run.config.model), run)
    return [(0.0, -1, None, run) for run in first.values()] + todo


def _run_all(ex, bar, todo: list, max_in_flight: int | None, shared: str | None) -> None:
    """Submit ``todo``'s runs, at most ``max_in_flight`` at once, and store each as it ends; with
    a ``shared`` folder, the problem sets are built first (:func:`_with_builds`)."""
    limit = max_in_flight or 2 * ex.workers
    queue = iter(_with_builds(todo, shared))
    pending: dict = {}
    while True:
        while len(pending) < limit:
            item = next(queue, None)
            if item is None:
                break
            _, _, targets, run = item
            if targets is None:
                fut = ex.submit(build_set, run.config.to_json(), shared)
            else:
                fut = ex.submit(run_one, run.config.to_json(), run.seed, run.key, run.replicate, shared)
            pending[fut] = (targets, run)
        if not pending:
            break
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in done:
            targets, run = pending.pop(fut)
            table = fut.result()
            if targets is None:
                continue
            for store in targets:
                store.write(run.key, table)
            bar.update()


def sweep_status(out: str | Path) -> dict[str, Any]:
    """How far the sweep stored at ``out`` is: ``total`` runs, ``done`` (stored and readable),
    ``missing`` (the keys still to run) and ``unreadable`` (run files that exist but cannot be
    read, :meth:`RunStore.unreadable`: they count as missing, and a resumed sweep recomputes them)."""
    store = RunStore.load(out)
    spec = SweepSpec.from_dict(store.manifest["spec"])
    keys = [r.key for r in spec.runs(store.manifest["root_seed"])]
    stored = {k: store.has(k) for k in keys}  # each run file is checked once (has() reads its footer)
    return {"id": spec.id, "question": spec.question, "total": len(keys), "done": sum(stored.values()),
            "missing": [k for k, ok in stored.items() if not ok], "unreadable": store.unreadable(),
            "root_seed": store.manifest["root_seed"], "isosim_version": store.manifest["isosim_version"]}


def evaluations(results: pd.DataFrame, split: str = "val") -> pd.DataFrame:
    """Sweep results as one row per evaluation (``run, n, B_problem, compute, step`` and a
    column per metric) for one split: the input format of :func:`isosim.analysis.fit.fit_runs`."""
    t = results[results["split"] == split]
    wide = t.pivot_table(index=["run", "replicate", "n", "B_problem", "step", "compute_rollouts", "compute_tokens"],
                         columns="metric", values="value").reset_index()
    wide.columns.name = None
    return wide.rename(columns={"compute_rollouts": "compute"})
