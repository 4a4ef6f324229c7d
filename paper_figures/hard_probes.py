"""Probes of generator structures the package does not offer: does a base model that already knows
part of the skill map make hard problems harder to reach by transfer?

The hypothesis (from hard_mechanism.md): if the base policy's problem-specific logits follow the
skill map ``W`` that decides which strategies solve a problem, the problems it fails are those
whose solvers the map predicts poorly, so what the shared path learns (a better map) should reach
hard held-out problems less than easy ones: hard levels low and flat in n, easy levels kept.

Each probe changes the strategies generator in this process only (never in worker processes):

* ``c`` (base skill): ``V0 = embed_scale (sqrt(c) W + sqrt(1 - c) G / sqrt(rank))`` with ``G``
  the default's standard normal draw, so ``z_i V0`` keeps its variance and shares the fraction
  ``c`` of it with ``z_i W`` (``c`` = 0 is the package default);
* ``rho`` (per-problem skill link): ``rho_i ~ Beta(a, b)`` in place of the one ``skill_link``, so
  some problems' solvers are predictable from their embedding and others' are not;
* ``off``: the shared preferences ``beta`` or the skill map ``V`` switched off in learning
  (their path scale set to 0), to see which path carries the transfer.

Every other knob is the package default's unless a row says otherwise. Calibration world 1,
training seed 0, one run per n at B_problem 32 and 2^22 rollouts, best validation avg@4 per n;
``score``: RMS difference from the study's levels (both bands, as calibrate_confidence.py).
No finding is evaluated here. About 20-40 s per row on 2 cores.

    python paper_figures/hard_probes.py [--out paper_figures/hard_probes.md]
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from statistics import NormalDist

import numpy as np
from calibrate_confidence import STUDY_HARD_BASE, STUDY_HARD_BEST, _table, write_report
from calibrate_levels import STUDY_BASE, STUDY_BEST

import isosim.sim.models.strategies as strategies
import isosim.sim.population as population
from isosim import SimConfig, build_population, simulate
from isosim.study.findings import CALIBRATION_SEEDS

WORLD = CALIBRATION_SEEDS["data_seeds"][0]
N = (8, 32, 128, 512)
STUDY = {"easy_base": STUDY_BASE, **{f"easy_n{n}": STUDY_BEST[n] for n in N},
         "hard_base": STUDY_HARD_BASE, **{f"hard_n{n}": v for n, v in STUDY_HARD_BEST.items()}}
#: (label, probe settings, model knobs)
ROWS = (
    ("package default", {}, {}),
    ("base skill 0.15", {"c": 0.15}, {}),
    ("base skill 0.3", {"c": 0.3}, {}),
    ("base skill 0.6", {"c": 0.6}, {}),
    ("base skill 0.15, local 1500", {"c": 0.15}, {"local": 1500.0}),
    ("base skill 0.3, local 2500", {"c": 0.3}, {"local": 2500.0}),
    ("base skill 0.3, local 2500, shared 0.1", {"c": 0.3}, {"local": 2500.0, "shared": 0.1}),
    ("skill link Beta(1.4, 0.6) per problem", {"rho": (1.4, 0.6)}, {}),
    ("base skill 0.3, skill link Beta(0.7, 0.3) per problem", {"c": 0.3, "rho": (0.7, 0.3)}, {}),
    ("base skill 0.3, beta off", {"c": 0.3, "off": "beta"}, {}),
    ("base skill 0.3, V off", {"c": 0.3, "off": "v"}, {}),
    ("package default, beta off", {"off": "beta"}, {}),
    ("package default, V off", {"off": "v"}, {}),
)


class Probe:
    """The strategies generator and path scales with one probe's changes, undone on exit."""

    def __init__(self, c: float = 0.0, rho: tuple[float, float] | None = None, off: str | None = None):
        self.c, self.rho, self.off = c, rho, off
        self.saved = {k: getattr(strategies, k) for k in ("make_world", "solves", "path_scales")}

    def make_world(self, cfg, rng):
        world = self.saved["make_world"](cfg, rng)
        if self.c > 0 and "W" in world:
            g = world["V0"] / (cfg.embed_scale / np.sqrt(cfg.rank))
            world["V0"] = cfg.embed_scale * (np.sqrt(self.c) * world["W"] + np.sqrt(1 - self.c) * g / np.sqrt(cfg.rank))
        return world

    def solves(self, cfg, world, rng, z):
        if self.rho is None or "W" not in world:
            return self.saved["solves"](cfg, world, rng, z)
        q = world["generality"]
        rho = rng.beta(*self.rho, (z.shape[0], 1))
        score = np.sqrt(rho) * (z @ world["W"]) + np.sqrt(1.0 - rho) * rng.normal(size=(z.shape[0], q.size))
        threshold = np.array([NormalDist().inv_cdf(1.0 - x) for x in q])
        return (score > threshold[None, :]).astype(float)

    def path_scales(self, cfg):
        sc = self.saved["path_scales"](cfg)
        return dataclasses.replace(sc, **{self.off: 0.0}) if self.off else sc

    def __enter__(self):
        for k in self.saved:
            setattr(strategies, k, getattr(self, k))
        population._build_cached.cache_clear()  # populations are cached by their knobs, not by the probe
        return self

    def __exit__(self, *exc):
        for k, f in self.saved.items():
            setattr(strategies, k, f)
        population._build_cached.cache_clear()


def levels(label: str, probe: dict, model: dict) -> dict:
    out = {"probe": label}
    with Probe(**probe):
        for band in ("easy", "hard"):
            cfg = SimConfig().replace(population={"preset": band, "seed": WORLD}, model=model)
            pop = build_population(cfg.population, cfg.model)
            out[f"{band}_base"] = round(float(pop.val.base_pass.mean()), 3)
            for n in N:
                tr = simulate(cfg.replace(allocation={"n": n, "b_problem": 32, "budget": 2**22}), 0, population=pop)
                out[f"{band}_n{n}"] = round(float(tr.curve("avg@4", "val")["value"].max()), 3)
    out["score"] = round(float(np.sqrt(np.mean([(out[k] - v) ** 2 for k, v in STUDY.items()]))), 4)
    return out


def measure_rows(rows_spec, measure) -> tuple[list[dict], float]:
    """``measure(label, probe, model)`` for every row of ``rows_spec``, printed as it goes; the
    rows and the wall seconds they took."""
    t0 = time.time()
    rows = []
    for label, probe, model in rows_spec:
        rows.append(measure(label, probe, model))
        print(rows[-1], flush=True)
    return rows, time.time() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="paper_figures/hard_probes.md", help="the report")
    args = ap.parse_args(argv)
    rows, took = measure_rows(ROWS, levels)
    study = {"probe": "study", **{k: STUDY.get(k, "-") for k in rows[0] if k not in ("probe", "score")}, "score": "-"}
    write_report(args.out, [
        "# Probes of the generator's structure (generated by `python paper_figures/hard_probes.py`)", "",
        f"Calibration world {WORLD}, training seed 0, one run per n, B_problem 32, 2^22 rollouts, best validation "
        "avg@4 per n; every knob the package default's unless the row says otherwise. The script's docstring "
        "defines each probe.", "",
        _table([study] + rows), "", f"Wall time {took:.0f} s.", ""])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
