"""The registry of knobs that ``isosim calibrate`` fits: each a config field that a pass-rate
histogram cannot show, with its bounds, its scale and what it means.

A knob ``k`` maps a value ``x`` in ``[lo, hi]`` to a coordinate ``u`` in ``[0, 1]`` that the
optimiser moves:

    log scale:     u = (ln x - ln lo) / (ln hi - ln lo)
    linear scale:  u = (x - lo) / (hi - lo)

so a step in ``u`` is a fixed factor (log) or a fixed amount (linear) of the knob. Adding a
knob is one :class:`Knob` line in :data:`KNOBS`; :data:`DEFAULT` names the ones fitted unless
a caller asks for others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from ..errors import IsosimInputError
from ..sim.config import SimConfig


@dataclass(frozen=True)
class Knob:
    """One calibrated config field: ``name`` (the key in the calibration's output),
    ``section`` and ``field`` of :class:`~isosim.sim.config.SimConfig` it sets, the bounds
    ``lo < hi``, ``scale`` (``"log"`` or ``"linear"``) and a one-line mechanistic meaning."""

    name: str
    section: str
    field: str
    lo: float
    hi: float
    scale: str
    meaning: str

    def to_unit(self, x: float) -> float:
        """The optimiser's coordinate of value ``x`` (clipped to the bounds)."""
        x = min(max(float(x), self.lo), self.hi)
        if self.scale == "log":
            return (math.log(x) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return (x - self.lo) / (self.hi - self.lo)

    def from_unit(self, u: float) -> float:
        """The knob's value at coordinate ``u`` (clipped to [0, 1])."""
        u = min(max(float(u), 0.0), 1.0)
        if self.scale == "log":
            return math.exp(math.log(self.lo) + u * (math.log(self.hi) - math.log(self.lo)))
        return self.lo + u * (self.hi - self.lo)

    def value(self, config: SimConfig) -> float:
        """The knob's value in ``config``."""
        return float(getattr(getattr(config, self.section), self.field))


#: every knob that can be calibrated, by name (one line each)
KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("lr", "algo", "lr", 1e-4, 1.0, "log",
         "how far one update moves the policy (the learning rate at B = 1024 rollouts; the run's "
         "lr_rule scales it to n * B_problem): sets how fast every curve rises and how soon small n "
         "runs out of signal"),
    Knob("prior_scale", "model", "prior_scale", 0.5, 16.0, "log",
         "how peaked the base policy's preferences over strategies are: the larger, the rarer the "
         "strategies RL must discover, so the more coverage (large n) is worth"),
    Knob("skill_link", "model", "skill_link", 0.0, 0.95, "linear",
         "how far what is learnt on one problem transfers to others (the share of the variance of "
         "'strategy s solves problem i' that the problem's embedding explains): transfer and "
         "interference between problems"),
    Knob("shared", "model", "shared", 0.005, 4.0, "log",
         "the scale of the shared path (beta and V step by shared * lr): how fast what is learnt on the "
         "training problems transfers to held-out ones, beside what each problem memorises"),
    Knob("local", "model", "local", 0.0, 4000.0, "linear",
         "the scale of the per-problem offsets: how much a problem's own training moves it (memorisation) "
         "beside what transfers (a visit steps them by local * lr, or local * lr / K with local_share)"),
    Knob("execution_a", "model", "execution_a", 0.0, 20.0, "linear",
         "with execution_b, the problems' execution rates e_i ~ Beta(a, b) (0: no execution noise): the share "
         "of a held-out problem's difficulty no shared skill reaches, so where validation curves level off"),
    Knob("execution_b", "model", "execution_b", 0.2, 10.0, "log",
         "the second shape of the execution rates' Beta (the larger, the lower the plateau)"),
    Knob("adam_eps", "algo", "adam_eps", 1e-6, 1e-1, "log",
         "Adam's eps: the gradient scale below which a step is not normalised up, so how far the few "
         "informative groups left at small n (most groups all right or all wrong) still move the policy: "
         "the larger, the sooner small n stalls"),
)}

#: the knobs fitted by default
DEFAULT: tuple[str, ...] = ("lr", "prior_scale", "skill_link")
#: the knobs fitted by default when the pilots logged their training reward: the memorisation
#: path besides, whose speed the gap between training and validation reward shows
WITH_TRAINING: tuple[str, ...] = (*DEFAULT, "local")


def knobs_of(names: Iterable[str] | None = None) -> tuple[Knob, ...]:
    """The registered knobs called ``names`` (default :data:`DEFAULT`), in that order."""
    names = tuple(DEFAULT if names is None else names)
    unknown = [n for n in names if n not in KNOBS]
    if unknown:
        raise IsosimInputError(f"unknown knob(s) {', '.join(unknown)}: choose from {', '.join(KNOBS)}")
    if not names:
        raise IsosimInputError("calibrate needs at least one knob")
    return tuple(KNOBS[n] for n in dict.fromkeys(names))


def apply(config: SimConfig, values: Mapping[str, float]) -> SimConfig:
    """``config`` with each knob of ``values`` (name -> value) set."""
    changes: dict[str, dict[str, float]] = {}
    for name, x in values.items():
        k = KNOBS[name]
        changes.setdefault(k.section, {})[k.field] = float(x)
    return replace(config, **{s: replace(getattr(config, s), **c) for s, c in changes.items()})


def from_units(knobs: tuple[Knob, ...], u) -> dict[str, float]:
    """Knob values (name -> value) at optimiser coordinates ``u``."""
    return {k.name: k.from_unit(x) for k, x in zip(knobs, u)}


def to_units(knobs: tuple[Knob, ...], values: Mapping[str, float]) -> list[float]:
    """Optimiser coordinates of knob values (name -> value)."""
    return [k.to_unit(values[k.name]) for k in knobs]
