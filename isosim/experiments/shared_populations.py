"""Problem sets shared by the worker processes of one sweep on one host.

A run's problem sets are built from its config (a few CPU-seconds for the study's sizes) and
kept by the process that built them (:data:`isosim.sim.population.POPULATION_CACHE`). Two
workers that run on the same sets would each build them. Given a folder that every worker of
the sweep can read, the first worker to need a set builds it and writes it there while it holds
the set's lock; the others wait for the lock and read the file instead of building. A sweep
hands out one build of each of its sets before its runs
(:func:`isosim.experiments.sweep.build_set`), so the workers build different sets side by side
instead of one waiting while another builds the set both need next.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pickle
from collections import OrderedDict
from pathlib import Path

from ..sim.config import ModelConfig, PopulationConfig
from ..sim.population import POPULATION_CACHE, Population, build_population, generator_key

try:  # POSIX; elsewhere every worker builds its own sets
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None

_read: OrderedDict = OrderedDict()


def set_key(cfg: PopulationConfig, model: ModelConfig) -> str:
    """The file name of a (population, generator) pair: a digest of every field that shapes its
    problems (the learning-path scales of the model do not, :func:`generator_key`)."""
    text = json.dumps([dataclasses.asdict(cfg), dataclasses.asdict(generator_key(model))], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def shared_population(cfg: PopulationConfig, model: ModelConfig, folder: str | Path | None) -> Population:
    """:func:`isosim.sim.population.build_population`, built at most once among the processes
    that pass the same ``folder`` (None, or a host without ``fcntl``: built in this process)."""
    if folder is None or fcntl is None:
        return build_population(cfg, model)
    key = set_key(cfg, model)
    if key in _read:
        _read.move_to_end(key)
        return _read[key]
    try:
        pop = _through(Path(folder) / f"{key}.pkl", cfg, model)
    except OSError:  # a full or vanished folder: the sets are then built in each process, as without one
        return build_population(cfg, model)
    _read[key] = pop
    while len(_read) > POPULATION_CACHE:
        _read.popitem(last=False)
    return pop


def _through(path: Path, cfg: PopulationConfig, model: ModelConfig) -> Population:
    """Under ``path``'s lock: read the set from ``path``, or build it and write it there."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                with open(path, "rb") as f:
                    return pickle.load(f)
            pop = build_population(cfg, model)
            partial = path.with_suffix(f".{os.getpid()}.part")
            try:
                with open(partial, "wb") as f:
                    pickle.dump(pop, f, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(partial, path)
            except OSError:
                partial.unlink(missing_ok=True)
            return pop
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
