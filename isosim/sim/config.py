"""Frozen configuration dataclasses.

A :class:`SimConfig` is plain data: it round-trips through dicts, JSON and TOML and
hashes to a stable id (:meth:`SimConfig.config_id`), the key of a run in a result
store. Validation happens here, once, and raises :class:`IsosimInputError`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
import tomllib
from dataclasses import dataclass, field, fields
from typing import Any

import tomli_w

from ..errors import IsosimInputError
from .advantages import ADVANTAGES
from .models import MODELS

#: bump when a change alters the numbers a config produces
SCHEMA_VERSION = 5

BANDS: dict[str, tuple[float, float]] = {
    "easy": (0.3, 0.6),
    "hard": (0.0, 0.0625),
    "very-easy": (0.6, 0.9),
    # extremely hard: no success in 128 samples of the base policy (always sampled)
    "extremely-hard": (0.0, 0.0),
}
DEFAULT_TRAIN_SIZE = {"easy": 6000, "hard": 5000, "very-easy": 6000, "extremely-hard": 5000}
OPTIMIZERS = ("sgd", "adam", "adamw")
LR_RULES = ("constant", "linear", "sqrt")
#: the batch size at which ``AlgoConfig.lr`` is the learning rate (the study's B = 1024)
LR_REFERENCE_BATCH = 1024


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise IsosimInputError(msg)


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@dataclass(frozen=True)
class PopulationConfig:
    """How the train and validation problem sets are made.

    ``preset`` is a band name (``easy``, ``hard``, ``very-easy``, ``extremely-hard``),
    ``mixture`` (then ``mixture_weights`` holds ``(band, share)`` pairs) or ``file``
    (per-problem pass rates from ``path``; ``data_digest`` pins the file's content).
    """

    preset: str = "easy"
    mixture_weights: tuple[tuple[str, float], ...] = ()
    val_mixture_weights: tuple[tuple[str, float], ...] = ()  # validation bands; () = as training
    train_size: int = 0  # 0: the preset's default (6000 easy, 5000 hard)
    val_size: int = 300
    measure: str = "sampled"  # "exact" pass rates or avg@16 "sampled" like the study
    measure_samples: int = 16
    seed: int = 0  # the data seed: the world and the problems, not the training noise
    path: str = ""
    data_digest: str = ""
    length_model: str = "constant"  # or "lognormal": per-problem response length
    length_mean: float = 1000.0
    length_sigma: float = 0.5

    def resolved_train_size(self) -> int:
        if self.train_size:
            return self.train_size
        if self.preset == "mixture":
            return 6000
        return DEFAULT_TRAIN_SIZE.get(self.preset, 6000)

    def validate(self) -> None:
        _check(self.preset in (*BANDS, "mixture", "file"),
               f"unknown preset {self.preset!r}: choose from {', '.join((*BANDS, 'mixture', 'file'))}")
        if self.preset == "mixture":
            _check(len(self.mixture_weights) > 0, "a mixture needs at least one (band, share) pair")
            for band, share in self.mixture_weights:
                _check(band in BANDS, f"unknown band {band!r} in mixture")
                _check(_finite(share) and share > 0, f"mixture share of {band!r} must be > 0")
        for band, share in self.val_mixture_weights:
            _check(band in BANDS, f"unknown band {band!r} in val_mixture_weights")
            _check(_finite(share) and share > 0, f"validation share of {band!r} must be > 0")
        if self.preset == "file":
            _check(not self.val_mixture_weights, "val_mixture_weights does not apply to preset 'file'")
            _check(bool(self.path), "preset 'file' needs a path to a pass-rate file")
        _check(isinstance(self.seed, numbers.Integral) and 0 <= self.seed < 2**63,
               f"the data seed must be an integer in [0, 2^63), got {self.seed!r}")
        _check(self.train_size >= 0, f"train_size must be >= 0, got {self.train_size}")
        _check(self.val_size >= 1, f"val_size must be >= 1, got {self.val_size}")
        _check(self.measure in ("exact", "sampled"), f"measure must be 'exact' or 'sampled', got {self.measure!r}")
        _check(self.measure_samples >= 1, "measure_samples must be >= 1")
        _check(self.length_model in ("constant", "lognormal"),
               f"length_model must be 'constant' or 'lognormal', got {self.length_model!r}")
        _check(_finite(self.length_mean) and self.length_mean > 0, "length_mean must be > 0")
        _check(_finite(self.length_sigma) and self.length_sigma >= 0, "length_sigma must be >= 0")


#: how a strategies world draws its base preferences and generalities (``ModelConfig.world_draw``)
WORLD_DRAWS = ("random", "stratified")


@dataclass(frozen=True)
class ModelConfig:
    """The surrogate policy and its knobs (see ``isosim.sim.models``).

    strategies: ``logits_i = L0_i + shared * (beta + z_i V) + local * u_i`` over
    ``n_strategies`` response strategies; strategy s solves problem i with
    probability ``q_s ~ Beta(generality_a, generality_b)``, and a rollout of a correct
    strategy succeeds with the problem's execution rate ``e_i ~ Beta(execution_a,
    execution_b)`` (``execution_a = 0``: always), which only ``local`` (memorisation) raises;
    ``local_share`` steps the per-problem offsets with ``lr / K`` (K: the batch's groups with
    signal) instead of ``lr``.
    features:   ``z_i = b_i + shared * phi_i . w + local * u_i``,
    ``phi_i = sqrt(common) c + sqrt(1 - common) e_i`` in ``dim`` dimensions.
    tabular:    ``z_i = b_i + u_i`` (independent problems, no interference).
    """

    kind: str = "strategies"
    # knobs marked (calibrated) were chosen on the easy set's levels and finding 1, in worlds no
    # finding is evaluated in (paper_figures/calibrate_levels.py, calibration_levels.md)
    # strategies
    n_strategies: int = 256
    rank: int = 8
    generality_a: float = 0.5
    generality_b: float = 4.0
    prior_scale: float = 10.0  # (calibrated) std of the shared base logits beta0
    embed_scale: float = 10.0  # (calibrated) std of the problem-specific base logits z_i V0
    skill_link: float = 0.7  # share of the variance of "s solves i" explained by z_i (0: independent)
    execution_a: float = 8.0  # (calibrated) execution reliability e_i ~ Beta(execution_a, execution_b); 0: e_i = 1
    execution_b: float = 2.0
    # a calibrated base model: problem i's base logits are kappa_i (beta0 + z_i V0) with
    # kappa_i = floor + (1 - floor) (1 - exp(-q_i / knee)), q_i the share of the unscaled base policy's
    # mass on correct strategies: where it rarely picks a right strategy it is also unsure (floor 1: off)
    confidence_floor: float = 0.25  # (calibrated on both bands: paper_figures/calibration_confidence.md)
    confidence_knee: float = 0.02  # (calibrated)
    # how a world draws the base preferences beta0 and the generalities q_s: "random", independent
    # draws; "stratified", beta0 at the normal quantiles (to random strategies) and q_s at the Beta
    # quantiles, paired with the base policy's preference ranks by a fixed low-discrepancy order, so
    # the generality of the base policy's favourites is the same in every world
    world_draw: str = "random"
    # features
    dim: int = 16
    common: float = 0.5
    # tabular and features: base logits b_i ~ Normal(logit_mean, logit_std)
    logit_mean: float = -1.0
    logit_std: float = 2.5
    # learning paths
    shared: float = 0.06  # (calibrated) scale of the shared (transferring, interfering) parameters
    local: float = 960.0  # (calibrated) scale of the per-problem offsets and execution offsets (memorise, do not transfer)
    # how a visit steps a problem's own offsets: False, with the full learning rate (an independent
    # learner per problem); True, with its share lr / K of the batch's update, K the groups with
    # signal (parts of one network trained on the batch, whose step the optimiser normalises)
    local_share: bool = True

    def validate(self) -> None:
        _check(self.kind in MODELS, f"unknown model {self.kind!r}: choose from {', '.join(MODELS)}")
        _check(2 <= self.n_strategies <= 4096, f"n_strategies must be in [2, 4096], got {self.n_strategies}")
        _check(0 <= self.rank <= 256, f"rank must be in [0, 256], got {self.rank}")
        _check(1 <= self.dim <= 4096, f"dim must be in [1, 4096], got {self.dim}")
        _check(_finite(self.execution_a) and self.execution_a >= 0, "execution_a must be >= 0 (0: no execution noise)")
        _check(_finite(self.execution_b) and self.execution_b > 0, "execution_b must be > 0")
        for name in ("generality_a", "generality_b"):
            _check(_finite(getattr(self, name)) and getattr(self, name) > 0, f"{name} must be > 0")
        for name in ("prior_scale", "embed_scale", "logit_std", "shared", "local"):
            _check(_finite(getattr(self, name)) and getattr(self, name) >= 0, f"{name} must be >= 0")
        _check(_finite(self.logit_mean), "logit_mean must be finite")
        _check(_finite(self.common) and 0.0 <= self.common <= 1.0, f"common must be in [0, 1], got {self.common}")
        _check(_finite(self.confidence_floor) and 0.0 < self.confidence_floor <= 1.0,
               f"confidence_floor must be in (0, 1], got {self.confidence_floor}")
        _check(self.world_draw in WORLD_DRAWS,
               f"world_draw must be one of {', '.join(WORLD_DRAWS)}, got {self.world_draw!r}")
        _check(_finite(self.confidence_knee) and self.confidence_knee > 0,
               f"confidence_knee must be > 0, got {self.confidence_knee}")
        _check(_finite(self.skill_link) and 0.0 <= self.skill_link <= 1.0,
               f"skill_link must be in [0, 1], got {self.skill_link}")
        sc = MODELS[self.kind].path_scales(self)
        _check(sc.beta > 0 or sc.v > 0 or sc.u > 0, "shared and local are both 0: nothing can learn")


@dataclass(frozen=True)
class AlgoConfig:
    """The GRPO variant, its regularisers and the optimiser.

    ``lr`` is the learning rate at batch ``B = 1024`` rollouts; ``lr_rule`` scales it
    to the run's ``B = n * B_problem`` as 1, ``B/1024`` or ``sqrt(B/1024)``; a linear
    warm-up over ``warmup`` steps. ``baseline_n > n`` decouples the baseline: it is
    estimated from ``baseline_n`` rollouts, the update uses ``n`` of them.

    ``drift`` (experimental, off by default): every update of the shared parameters also moves
    them at random, ``beta, V += drift * lr_t * xi`` with ``xi ~ N(0, I)`` drawn from the training
    stream and ``lr_t`` the step's learning rate: the collateral change a network's update makes
    on inputs its batch does not hold, growing with the step (``paper_figures/drift_probe.md``).
    The planner's mean field, which integrates expected parameters, does not model it.
    """

    advantage: str = "grpo"
    std_eps: float = 1e-6
    baseline_n: int = 0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    zero_var_filter: bool = False
    optimizer: str = "adam"
    lr: float = 3e-2
    lr_rule: str = "sqrt"
    warmup: int = 10
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-3  # (calibrated with the default model: paper_figures/calibration_levels.md)
    weight_decay: float = 0.0
    drift: float = 0.0

    def validate(self) -> None:
        _check(self.advantage in ADVANTAGES, f"unknown advantage {self.advantage!r}: choose from {', '.join(ADVANTAGES)}")
        _check(self.optimizer in OPTIMIZERS, f"unknown optimizer {self.optimizer!r}: choose from {', '.join(OPTIMIZERS)}")
        _check(self.lr_rule in LR_RULES, f"unknown lr_rule {self.lr_rule!r}: choose from {', '.join(LR_RULES)}")
        _check(_finite(self.lr) and self.lr > 0, f"lr must be > 0, got {self.lr}")
        _check(self.warmup >= 0, "warmup must be >= 0")
        _check(self.baseline_n >= 0, "baseline_n must be >= 0")
        for name in ("std_eps", "kl_coef", "entropy_coef", "weight_decay", "adam_eps", "drift"):
            _check(_finite(getattr(self, name)) and getattr(self, name) >= 0, f"{name} must be >= 0")
        for name in ("beta1", "beta2"):
            _check(_finite(getattr(self, name)) and 0 <= getattr(self, name) < 1, f"{name} must be in [0, 1)")

    def lr_at(self, batch: int) -> float:
        """Learning rate for a rollout batch of ``batch`` (before warm-up)."""
        x = batch / LR_REFERENCE_BATCH
        scale = {"constant": 1.0, "linear": x, "sqrt": math.sqrt(x)}[self.lr_rule]
        return self.lr * scale


@dataclass(frozen=True)
class Allocation:
    """``n`` rollouts per problem, ``b_problem`` problems per batch, ``steps`` = M.

    Give either ``steps`` or ``budget`` (rollouts); then ``M = floor(C / (n B_problem))``
    (counting ``baseline_n`` rollouts per problem when the baseline is decoupled).
    """

    n: int = 16
    b_problem: int = 32
    steps: int = 0
    budget: float = 0.0

    def validate(self) -> None:
        _check(isinstance(self.n, int) and self.n >= 1, f"n must be an integer >= 1, got {self.n}")
        _check(isinstance(self.b_problem, int) and self.b_problem >= 1,
               f"B_problem must be an integer >= 1, got {self.b_problem}")
        _check(self.steps >= 0, f"steps must be >= 0, got {self.steps}")
        _check(_finite(self.budget) and 0 <= self.budget < 2**63,
               f"budget must be a finite number of rollouts in [0, 2^63), got {self.budget}")
        _check(self.steps < 2**63, f"steps must be below 2^63, got {self.steps}")
        _check((self.steps > 0) != (self.budget > 0), "give exactly one of steps (M) and budget (C)")

    def rollouts_per_step(self, algo: AlgoConfig) -> int:
        return max(self.n, algo.baseline_n) * self.b_problem

    def resolved_steps(self, algo: AlgoConfig) -> int:
        if self.steps:
            return int(self.steps)
        per_step = self.rollouts_per_step(algo)
        m = int(self.budget // per_step)
        _check(m >= 1, f"budget {self.budget:g} is smaller than one step (n * B_problem = {per_step} rollouts)")
        return m


@dataclass(frozen=True)
class EvalConfig:
    """When and what to measure. Evaluations are log-spaced in steps (``n_evals``
    points, plus step 0 and the last step) unless ``every`` > 0. ``train_split``: evaluate the
    training problems as well as the validation ones (the ``train`` split of a trace; the
    share of training groups without reward variance is recorded either way). Over 6,000
    training problems that evaluation costs about 20 times the validation one, so sweeps whose
    readers take validation only switch it off."""

    ks: tuple[int, ...] = (1, 4)
    n_evals: int = 24
    every: int = 0
    at_steps: tuple[int, ...] = ()  # extra evaluation steps (e.g. the M values of a Q2 sweep)
    snapshot_steps: tuple[int, ...] = ()
    sampled: int = 0  # > 0: also unbiased estimates from this many samples per problem
    hist_bins: int = 0  # > 0: pass@1 histogram metrics ``hist:<i>/<bins>`` (share of problems per bin)
    train_split: bool = True

    def validate(self) -> None:
        _check(len(self.ks) > 0 and all(isinstance(k, int) and k >= 1 for k in self.ks), "ks must be integers >= 1")
        _check(self.n_evals >= 1, "n_evals must be >= 1")
        _check(self.every >= 0, "every must be >= 0")
        _check(0 <= self.hist_bins <= 100, f"hist_bins must be in [0, 100], got {self.hist_bins}")
        _check(all(s >= 0 for s in self.snapshot_steps + self.at_steps), "evaluation steps must be >= 0")
        if self.sampled:
            _check(self.sampled >= max(self.ks), f"sampled estimates need at least max(ks) = {max(self.ks)} samples")


@dataclass(frozen=True)
class SimConfig:
    population: PopulationConfig = field(default_factory=PopulationConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    allocation: Allocation = field(default_factory=lambda: Allocation(budget=1e6))
    eval: EvalConfig = field(default_factory=EvalConfig)

    def validate(self) -> "SimConfig":
        for part in (self.population, self.model, self.algo, self.allocation, self.eval):
            part.validate()
        a, al = self.algo, self.allocation
        need = ADVANTAGES[a.advantage].min_n
        _check(al.n >= need, f"advantage {a.advantage!r} needs n >= {need}")
        if a.baseline_n:
            _check(a.baseline_n >= al.n, f"baseline_n ({a.baseline_n}) must be >= n ({al.n})")
        d = self.population.resolved_train_size()
        _check(al.b_problem <= d, f"B_problem ({al.b_problem}) exceeds the training set size D ({d})")
        al.resolved_steps(a)
        return self

    # --- serialisation -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = _to_plain(dataclasses.asdict(self))
        # defaults of fields added later are left out: ids of configs written before them stay as they were
        if d["eval"]["train_split"]:
            del d["eval"]["train_split"]
        if d["model"]["world_draw"] == "random":
            del d["model"]["world_draw"]
        if d["algo"]["drift"] == 0:
            del d["algo"]["drift"]
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SimConfig":
        parts = {}
        for f in fields(cls):
            sub = data.get(f.name, {})
            if not isinstance(sub, dict):
                raise IsosimInputError(f"config section [{f.name}] must be a table")
            parts[f.name] = _build(_SECTION_TYPES[f.name], sub, f.name)
        extra = set(data) - {f.name for f in fields(cls)}
        if extra:
            raise IsosimInputError(f"unknown config section(s): {', '.join(sorted(extra))}")
        return cls(**parts)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "SimConfig":
        return cls.from_dict(parse_text(text, "json", "config"))

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())

    @classmethod
    def from_toml(cls, text: str) -> "SimConfig":
        return cls.from_dict(parse_text(text, "toml", "config"))

    def config_id(self) -> str:
        """Stable 16-hex-digit id: sha256 of the canonical JSON and the schema version."""
        payload = f"{SCHEMA_VERSION}:{self.to_json()}".encode()
        return hashlib.sha256(payload).hexdigest()[:16]

    def replace(self, **sections: Any) -> "SimConfig":
        """``cfg.replace(allocation={"n": 8})``: a copy with some fields of some sections changed."""
        new = {}
        for name, changes in sections.items():
            current = getattr(self, name)
            new[name] = dataclasses.replace(current, **changes) if isinstance(changes, dict) else changes
        return dataclasses.replace(self, **new)


def parse_text(text: str, fmt: str, what: str) -> dict[str, Any]:
    """Parse TOML or JSON text into a dict; malformed text is an :class:`IsosimInputError`."""
    try:
        data = tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise IsosimInputError(f"malformed {fmt.upper()} {what}: {exc}") from None
    if not isinstance(data, dict):
        raise IsosimInputError(f"a {what} must be a table of settings")
    return data


_SECTION_TYPES = {
    "population": PopulationConfig,
    "model": ModelConfig,
    "algo": AlgoConfig,
    "allocation": Allocation,
    "eval": EvalConfig,
}


def _to_plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_to_plain(v) for v in obj]
    return obj


def _build(cls: type, data: dict[str, Any], section: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    unknown = set(data) - set(known)
    if unknown:
        raise IsosimInputError(f"unknown key(s) in [{section}]: {', '.join(sorted(unknown))}")
    kwargs = {}
    defaults = cls()
    for name, value in data.items():
        default = getattr(defaults, name)
        if isinstance(default, tuple):
            if name in ("mixture_weights", "val_mixture_weights"):
                value = tuple((str(b), float(s)) for b, s in value)
            else:
                value = tuple(int(v) for v in value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):  # bool("false") is True: only true / false
                raise IsosimInputError(f"[{section}] {name} must be true or false, got {value!r}")
        elif isinstance(default, int) and isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(default, float) and isinstance(value, int):
            value = float(value)
        kwargs[name] = value
    return cls(**kwargs)
