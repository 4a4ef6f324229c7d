"""Problem populations, made the way the study made them.

Draw a large pool from the surrogate's generator, measure each problem's base
pass rate (exactly, or as avg@16 of sampled rollouts), keep the band, and take a
training set of size D and a validation set (fresh draws of the same generator,
same band). Or match a user's per-problem pass rates (:func:`load_pass_rates`).
"""
from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import IsosimInputError, shown
from .config import BANDS, ModelConfig, PopulationConfig
from .models import Problems, model_module

#: at most this many generator draws are spent looking for one band
MAX_POOL = 5_000_000
_CHUNK = 10_000


@dataclass(frozen=True)
class ProblemSet:
    problems: Problems
    lengths: np.ndarray  # (N,) response length in tokens
    band: np.ndarray  # (N,) band label of each problem (str)

    def __len__(self) -> int:
        return len(self.problems)

    @property
    def base_pass(self) -> np.ndarray:
        return self.problems.base_pass_rates()

    @functools.cached_property
    def sampling_order(self) -> np.ndarray:
        """(N, S) int64: each problem's response types by decreasing base probability (stable
        sort), the order the simulator's binomial sampler visits them in. Computed once per set
        (a set is shared by the runs of a sweep, and the sort of 6,000 x 256 logits costs about
        as much as a thousand training steps)."""
        return sampling_order(self.problems.base_logits)

    @functools.cached_property
    def log_reference(self) -> np.ndarray:
        """(N, S): the reference policy's log-probabilities, ``log softmax`` of the base logits
        (once per set, like :attr:`sampling_order`)."""
        return log_softmax(self.problems.base_logits)


def sampling_order(base_logits: np.ndarray) -> np.ndarray:
    """Each problem's response types by decreasing base probability (stable sort)."""
    return np.argsort(-base_logits, axis=1, kind="stable")


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise ``log softmax``: the reference policy's log-probabilities of base logits."""
    mx = logits.max(axis=1, keepdims=True)
    return logits - (mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True)))


@dataclass(frozen=True)
class Population:
    train: ProblemSet
    val: ProblemSet


def measure(p: np.ndarray, cfg: PopulationConfig, rng: np.random.Generator) -> np.ndarray:
    """Measured base pass rate: exact ``p`` or ``Binomial(m, p) / m`` (avg@m)."""
    if cfg.measure == "exact":
        return p
    m = cfg.measure_samples
    return rng.binomial(m, p) / m


def in_band(p: np.ndarray, band: str, cfg: PopulationConfig, rng: np.random.Generator) -> np.ndarray:
    if band == "extremely-hard":
        return rng.binomial(128, p) == 0  # pass@128 = 0 is a sampled criterion by definition
    lo, hi = BANDS[band]
    m = measure(p, cfg, rng)
    return (m >= lo) & (m <= hi)


def draw_band(model: ModelConfig, world: dict, band: str, size: int, cfg: PopulationConfig,
              rng: np.random.Generator) -> Problems:
    """``size`` problems of ``band``, drawn from the generator and filtered."""
    mod = model_module(model)
    kept: list[Problems] = []
    have = drawn = 0
    while have < size:
        if drawn >= MAX_POOL:
            raise IsosimInputError(
                f"the {model.kind} generator yields too few {band!r} problems: {have} in {drawn:,} draws; "
                "use a smaller training set or other model knobs")
        pool = mod.draw(model, world, rng, _CHUNK)
        drawn += _CHUNK
        keep = np.flatnonzero(in_band(pool.base_pass_rates(), band, cfg, rng))
        kept.append(pool.take(keep[: size - have]))
        have += min(len(keep), size - have)
    return Problems.concat(kept)


def _lengths(cfg: PopulationConfig, rng: np.random.Generator, size: int) -> np.ndarray:
    if cfg.length_model == "constant":
        return np.full(size, float(cfg.length_mean))
    s = cfg.length_sigma
    return cfg.length_mean * np.exp(rng.normal(-0.5 * s * s, s, size))


def _split_counts(weights: tuple[tuple[str, float], ...], total: int) -> list[tuple[str, int]]:
    """Largest-remainder rounding of ``total`` into the given shares."""
    shares = np.array([w for _, w in weights], float)
    exact = shares / shares.sum() * total
    counts = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - counts))[: total - counts.sum()]:
        counts[i] += 1
    return [(band, int(c)) for (band, _), c in zip(weights, counts)]


def generator_key(model: ModelConfig) -> ModelConfig:
    """The model fields that shape problems (learning-path scales do not)."""
    return replace(model, shared=1.0, local=0.0)


def build_population(cfg: PopulationConfig, model: ModelConfig) -> Population:
    """The train and validation sets for ``cfg`` under the ``model`` generator (cached)."""
    cfg.validate()
    model.validate()
    return _build_cached(cfg, generator_key(model))


#: populations kept per process: the study's findings train on nine different sets, and a worker that
#: evicts one rebuilds it for a later run on the same data
POPULATION_CACHE = 16


@functools.lru_cache(maxsize=POPULATION_CACHE)
def _build_cached(cfg: PopulationConfig, model: ModelConfig) -> Population:
    return population_in_world(cfg, model, make_world(cfg.seed, model))


def _streams(seed: int) -> list[np.random.Generator]:
    """The random streams of data seed ``seed``: the world, the training set, the validation set, lengths."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence([seed, 0x150517]).spawn(4)]


def make_world(seed: int, model: ModelConfig) -> dict:
    """The world (what is shared by every problem: strategies, skills, base preferences) of data seed
    ``seed`` under ``model``'s generator."""
    return model_module(model).make_world(model, _streams(seed)[0])


def population_in_world(cfg: PopulationConfig, model: ModelConfig, world: dict) -> Population:
    """The train and validation sets of ``cfg`` (problems drawn with ``cfg.seed``'s streams) in ``world``;
    :func:`build_population` draws them in ``cfg.seed``'s own world."""
    _, train_rng, val_rng, len_rng = _streams(cfg.seed)
    d, v = cfg.resolved_train_size(), cfg.val_size
    if cfg.preset == "file":
        values = load_pass_rates(cfg.path)
        return _population_from_values(values, cfg, model, world, train_rng, val_rng, len_rng)
    weights = cfg.mixture_weights if cfg.preset == "mixture" else ((cfg.preset, 1.0),)
    sets = []
    for size, rng, shares in ((d, train_rng, weights), (v, val_rng, cfg.val_mixture_weights or weights)):
        parts, bands = [], []
        for band, count in _split_counts(shares, size):
            if count:
                parts.append(draw_band(model, world, band, count, cfg, rng))
                bands.append(np.full(count, band, dtype=object))
        probs = Problems.concat(parts)
        sets.append(ProblemSet(probs, _lengths(cfg, len_rng, len(probs)), np.concatenate(bands)))
    return Population(train=sets[0], val=sets[1])


def _population_from_values(values: np.ndarray, cfg: PopulationConfig, model: ModelConfig, world: dict,
                            train_rng: np.random.Generator, val_rng: np.random.Generator,
                            len_rng: np.random.Generator) -> Population:
    mod = model_module(model)
    d = cfg.train_size or len(values)
    train_p = values if d == len(values) else train_rng.choice(values, d, replace=True)
    val_p = val_rng.choice(values, cfg.val_size, replace=True)
    sets = []
    for target, rng in ((train_p, train_rng), (val_p, val_rng)):
        probs = _solvable_draws(mod, model, world, rng, len(target)).with_pass_rates(target)
        sets.append(ProblemSet(probs, _lengths(cfg, len_rng, len(target)), np.full(len(target), "file", dtype=object)))
    return Population(train=sets[0], val=sets[1])


def _solvable_draws(mod, model: ModelConfig, world: dict, rng: np.random.Generator, size: int) -> Problems:
    """Fresh generator draws that at least one response type solves (so any pass rate is reachable)."""
    kept, have = [], 0
    while have < size:
        pool = mod.draw(model, world, rng, max(size, 1024))
        keep = np.flatnonzero(pool.rewards.max(axis=1) > 0)[: size - have]
        kept.append(pool.take(keep))
        have += len(keep)
    return Problems.concat(kept)


def population_from_pass_rates(train: np.ndarray, val: np.ndarray | None = None, model: ModelConfig | None = None,
                               seed: int = 0, length: float = 1000.0) -> Population:
    """A population whose base pass rates are exactly ``train`` (and ``val``; default: ``train``)."""
    model = model or ModelConfig()
    model.validate()
    train = np.asarray(train, float)
    val = train if val is None else np.asarray(val, float)
    for arr in (train, val):
        if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any((arr < 0) | (arr > 1)):
            raise IsosimInputError("pass rates must be a non-empty array of numbers in [0, 1]")
    seeds = np.random.SeedSequence([seed, 0x150518]).spawn(3)
    world_rng, train_rng, val_rng = (np.random.default_rng(s) for s in seeds)
    mod = model_module(model)
    world = mod.make_world(model, world_rng)
    sets = []
    for target, rng in ((train, train_rng), (val, val_rng)):
        probs = _solvable_draws(mod, model, world, rng, len(target)).with_pass_rates(target)
        sets.append(ProblemSet(probs, np.full(len(target), float(length)), np.full(len(target), "given", dtype=object)))
    return Population(train=sets[0], val=sets[1])


# --- a user's pass rates --------------------------------------------------------------------

def load_pass_rates(path: str | Path) -> np.ndarray:
    """Per-problem pass rates from a CSV/Parquet/text file.

    Accepted columns: ``pass_rate`` (or ``avg``, or any ``avg@k``) with values in
    [0, 1]; or ``correct`` and ``samples`` counts (pass rate ``correct / samples``).
    A headerless file with one number per line is read as pass rates.
    """
    path = Path(path)
    if not path.is_file():
        raise IsosimInputError(f"pass-rate file not found: {path}")
    try:
        if path.suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                header = fh.readline()
            sep = next((d for d in (",", "\t", ";") if d in header), ",")
            df = pd.read_csv(path, sep=sep)
            if len(df.columns) == 1 and _is_number(df.columns[0]):
                df = pd.read_csv(path, header=None, names=["pass_rate"])
    except IsosimInputError:
        raise
    except Exception as exc:  # pandas raises many types for malformed files
        raise IsosimInputError(f"cannot read {path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if len(df) == 0:
        raise IsosimInputError(f"{path} holds no problems")
    cols = {c.strip().lower(): c for c in map(str, df.columns)}
    if "correct" in cols and "samples" in cols:
        c = _numeric(df[cols["correct"]], path, "correct")
        m = _numeric(df[cols["samples"]], path, "samples")
        if np.any(m < 1) or np.any(c < 0) or np.any(c > m) or np.any(c != np.round(c)) or np.any(m != np.round(m)):
            raise IsosimInputError(f"{path}: counts must be integers with 0 <= correct <= samples and samples >= 1")
        return c / m
    name = next((cols[k] for k in cols if k in ("pass_rate", "avg") or k.startswith("avg@")), None)
    if name is None:
        raise IsosimInputError(
            f"{path}: expected a 'pass_rate' (or 'avg', 'avg@k') column, or 'correct' and 'samples' columns; "
            f"found {', '.join(map(str, df.columns))}")
    p = _numeric(df[name], path, name)
    bad = (p < 0) | (p > 1)
    if bad.any():
        raise IsosimInputError(f"{path}: pass rate {p[bad][0]:g} in row {int(np.flatnonzero(bad)[0]) + 1} is outside [0, 1]")
    return p


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _numeric(col: pd.Series, path: Path, name: str) -> np.ndarray:
    values = pd.to_numeric(col, errors="coerce").to_numpy(float)
    bad = ~np.isfinite(values)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise IsosimInputError(f"{path}: column {name!r} row {row + 1} is not a finite number: {shown(col.iloc[row])}")
    return values


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (pins a file-based population in its config id)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise IsosimInputError(f"cannot read {path}: {exc.strerror}") from None
