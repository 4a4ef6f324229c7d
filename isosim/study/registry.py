"""Every named sweep, registered in one place and looked up one way (by id).

* the built-in specs (:data:`BUILTIN`: ``q1-easy``, ``q1-hard``, ``q2-easy``, ``q3-easy``,
  ``q3-hard``): the study's three questions on a full grid, for ``isosim sweep``;
* the finding sweeps: every sweep of :mod:`isosim.study.findings` at both scales
  (ids ``f-<sweep>-full`` and ``f-<sweep>-quick``), as ``isosim reproduce`` and
  ``isosim figures`` run them into ``<root>/<id>``.

Every id also names a small subset that runs end to end in seconds, ``<id>-testing``
(:meth:`~isosim.experiments.sweep.SweepSpec.testing`). An id registered twice must be the
same spec. A new built-in spec is one entry of :data:`BUILTIN`; a new finding sweep is part
of its finding's module.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..errors import IsosimInputError
from ..experiments.sweep import POWERS_OF_TWO, SweepSpec
from ..sim.config import SimConfig

TESTING = "-testing"


def _base(preset: str) -> SimConfig:
    return SimConfig().replace(population={"preset": preset})


#: the built-in specs (bsuite style: plain data with ids)
BUILTIN: tuple[SweepSpec, ...] = (
    SweepSpec("q1-easy", "Q1", _base("easy"), n=POWERS_OF_TWO, b_problem=(32,), budget=2.0**23, seeds=(0, 1)),
    SweepSpec("q1-hard", "Q1", _base("hard"), n=POWERS_OF_TWO, b_problem=(32,), budget=2.0**23, seeds=(0, 1)),
    SweepSpec("q2-easy", "Q2", _base("easy"), n=(2, 4, 8, 16, 32, 64, 128, 256), total_batch=4096,
              steps=(16, 32, 64, 128, 256, 512, 1024), seeds=(0, 1)),
    SweepSpec("q3-easy", "Q3", _base("easy"), n=(2, 8, 32, 128, 512), b_problem=(16, 32, 64, 128, 256),
              budget=2.0**23, b_max=16384, seeds=(0,)),
    SweepSpec("q3-hard", "Q3", _base("hard"), n=(2, 8, 32, 128, 512), b_problem=(16, 32, 64, 128, 256),
              budget=2.0**23, b_max=16384, seeds=(0,)),
)


@dataclass(frozen=True)
class Entry:
    """A registered sweep: its spec, its group (``built-in`` or ``finding``), and for a finding
    sweep the name the findings read it by, its scale and the findings that read it."""

    spec: SweepSpec
    group: str
    name: str
    scale: str | None = None
    findings: tuple[int, ...] = ()


@lru_cache(maxsize=1)
def entries() -> dict[str, Entry]:
    """Every registered sweep by id: the built-in specs, then the finding sweeps (full, then quick)."""
    from .findings import FINDINGS, SCALES, sweep_specs

    out: dict[str, Entry] = {}

    def add(entry: Entry) -> None:
        old = out.setdefault(entry.spec.id, entry)
        if old.spec != entry.spec:
            raise ValueError(f"sweep id {entry.spec.id!r} is registered twice with different specs")

    for spec in BUILTIN:
        add(Entry(spec, "built-in", spec.id))
    for scale in SCALES:
        for name, spec in sweep_specs(scale).items():
            add(Entry(spec, "finding", name, scale, tuple(f.id for f in FINDINGS if name in f.sweeps)))
    return out


def get_spec(name: str) -> SweepSpec:
    """A registered sweep by id (``q1-easy``, ``f-easy-quick``), its CI subset (``q1-easy-testing``)
    or a TOML spec file."""
    reg = entries()
    if name in reg:
        return reg[name].spec
    if name.endswith(TESTING) and name[: -len(TESTING)] in reg:
        return reg[name[: -len(TESTING)]].spec.testing()
    path = Path(name)
    if path.is_file():
        return SweepSpec.from_toml(path.read_text())
    ids = ", ".join(s.id for s in BUILTIN)
    raise IsosimInputError(f"no sweep spec {name!r}: give a TOML file, one of {ids} or a finding sweep id "
                           "(isosim sweep --list; add -testing for a subset)")
