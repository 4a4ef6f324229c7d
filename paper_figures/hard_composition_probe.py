"""Probes of what the hard set is made of: does its composition, or a share of problems no strategy
solves, make hard's n*(C) saturate below easy's?

The study explains its finding 2 (hard saturates at a smaller n than easy) by problems with no
signal: a large n spends its rollouts on them. In the default surrogate the hard band (base
avg@16 in [0, 1/16]) holds a continuum of pass rates (in calibration world 1, a median of 0.015,
5% below 1e-3, almost none that no strategy solves), so at a large n few groups lack signal and
n*(C) keeps rising to the largest n at 2^23 rollouts (FINDINGS.md, finding 2). Two changes of the
set, each keeping the generator and every model knob:

* ``bands``: the hard set drawn as a mixture of narrower bands of the same generator, so its
  composition within avg@16 in [0, 1/16] changes: ``zero`` (avg@16 = 0), ``one`` (avg@16 = 1/16)
  and ``extremely-hard`` (no success in 128 samples, the study's extremely hard set);
* ``unsolvable``: a share of the package's hard problems made unsolvable (no strategy solves
  them: their rows of ``Y`` set to 0 after the set is drawn), in the training set, the validation
  set or both (``where``): problems with no signal at any n, the study's stated mechanism taken
  literally.

For each: n = 8, 32, 128, 512, 2048 at B_problem 32 to 2^23 rollouts (the full scale's budget), in
calibration world 1, training seeds 0 and 1: the validation set's base avg@4, each n's best
validation avg@4 by 2^22 rollouts (the study's horizon for its hard levels) and by 2^23, and n*(C)
on the seed-mean validation curves (each held past its last evaluation) at 2^18 ... 2^23
rollouts; the informative groups per step (B_problem times the share of training groups with reward
variance, over the run) at each n; ``score`` is the RMS difference of the base and the best values by 2^22 at n = 8, 32
and 128 from the study's. The package's easy set is the reference for n* (finding 2 asks hard's
n* at the top budget to lie at least one doubling below easy's). No finding is evaluated here.

    python paper_figures/hard_composition_probe.py [--journal paper_figures/hard_composition_probe.jsonl]
        [--out paper_figures/hard_composition_probe.md] [--workers 2]
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import structure_search as search
from calibrate_confidence import STUDY_HARD_BASE, STUDY_HARD_BEST, _table
from hard_probes import WORLD

from isosim import SimConfig, build_population, simulate
from isosim.sim.config import BANDS
from isosim.sim.models.base import Problems
from isosim.sim.population import Population, ProblemSet

#: the narrower bands the ``bands`` probes draw from (base avg@16 exactly 0, exactly 1/16); the
#: package's config checks band names against its table of bands, so they join it while a set is drawn
NARROW = {"zero": (0.0, 0.0), "one": (1 / 16, 1 / 16)}
#: the candidates, ``[probe, model knobs]`` (the model knobs are always the package's: ``{}``)
CANDIDATES = ([[{"band": "easy"}, {}], [{}, {}]]
              + [[{"bands": w}, {}] for w in ({"extremely-hard": 0.5, "one": 0.5}, {"extremely-hard": 0.3, "one": 0.7},
                                             {"zero": 0.4, "one": 0.6})]
              + [[{"unsolvable": s, "where": "both"}, {}] for s in (0.3, 0.6)]
              + [[{"unsolvable": 0.3, "where": w}, {}] for w in ("train", "validation")])
SEEDS, NS, BUDGET, HORIZON = (0, 1), (8, 32, 128, 512, 2048), 2.0**23, 2.0**22
#: where n*(C) is read: log2 of the rollouts
GRID_LOG2 = tuple(range(18, 24))
#: the seeds of the rows made unsolvable in the training and in the validation set
UNSOLVABLE_SEEDS = {"train": 0x0501, "validation": 0x0502}


def unsolvable(ps: ProblemSet, share: float, seed: int) -> ProblemSet:
    """``ps`` with ``round(share * len(ps))`` problems, drawn without replacement, that no strategy solves."""
    pr = ps.problems
    y = pr.rewards.copy()
    y[np.random.default_rng(seed).choice(len(pr), int(round(share * len(pr))), replace=False)] = 0.0
    return ProblemSet(Problems(pr.base_logits, pr.features, y, pr.execution), ps.lengths, ps.band)


@contextmanager
def narrow_bands():
    """:data:`NARROW` in the package's table of bands within the block, and only there (re-entrant)."""
    added = [name for name in NARROW if name not in BANDS]
    BANDS.update({name: NARROW[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            del BANDS[name]


def population(probe: dict, n: int = 8) -> tuple[SimConfig, Population]:
    """A run's config (n at B_problem 32 to :data:`BUDGET`) and the population of a probe (module docstring)."""
    if "bands" in probe:
        sets = {"preset": "mixture", "mixture_weights": tuple(probe["bands"].items())}
    else:
        sets = {"preset": probe.get("band", "hard")}
    with narrow_bands():
        cfg = SimConfig().replace(population={"seed": WORLD, **sets},
                                  allocation={"n": n, "b_problem": 32, "budget": BUDGET})
        pop = build_population(cfg.population, cfg.model)
    share, where = probe.get("unsolvable", 0.0), probe.get("where", "both")
    if share:
        train = unsolvable(pop.train, share, UNSOLVABLE_SEEDS["train"]) if where != "validation" else pop.train
        val = unsolvable(pop.val, share, UNSOLVABLE_SEEDS["validation"]) if where != "train" else pop.val
        pop = Population(train, val)
    return cfg, pop


def curve(probe: dict, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Validation avg@4 against rollouts of one run, and its informative groups per step: B_problem
    times one minus the share of training groups with no reward variance, averaged over the
    evaluations after step 0."""
    with narrow_bands():  # the run's config names the probe's bands
        cfg, pop = population(probe, n)
        trace = simulate(cfg, seed, population=pop)
    zero = trace.curve("zero_var_frac", "train")
    informative = cfg.allocation.b_problem * (1.0 - zero.loc[zero["compute_rollouts"] > 0, "value"].mean())
    return (*search._curve(trace), float(informative))


def held(c: np.ndarray, v: np.ndarray, x: float) -> float:
    """The value at rollouts ``x`` of a curve held past each evaluation."""
    return float(v[max(int(np.searchsorted(c, x, side="right")) - 1, 0)])


def measure(spec: list[dict]) -> dict:
    probe, model = spec
    runs = {(s, n): curve(probe, n, s) for s in SEEDS for n in NS}
    _, pop = population(probe)
    out = {"probe": probe, "model": model, "base": float(pop.val.base_pass.mean()),
           "train_mean_pass": float(pop.train.base_pass.mean())}
    out["informative"] = [float(np.mean([runs[s, n][2] for s in SEEDS])) for n in NS]
    for tag, top in (("best_4m", HORIZON), ("best_8m", BUDGET)):
        out[tag] = [float(np.mean([runs[s, n][1][runs[s, n][0] <= top].max() for s in SEEDS])) for n in NS]
    mean = {n: [np.mean([held(*runs[s, n][:2], 2.0**k) for s in SEEDS]) for k in GRID_LOG2] for n in NS}
    out["n_star"] = [NS[int(np.argmax([mean[n][j] for n in NS]))] for j in range(len(GRID_LOG2))]
    study = [STUDY_HARD_BASE, *STUDY_HARD_BEST.values()]
    got = [out["base"], *(out["best_4m"][NS.index(n)] for n in STUDY_HARD_BEST)]
    out["score"] = round(float(np.sqrt(np.mean(np.subtract(got, study) ** 2))), 4)
    return out


def label(probe: dict) -> str:
    if "band" in probe:
        return f"package {probe['band']} (reference)"
    if "bands" in probe:
        return "bands " + " + ".join(f"{b} {w:g}" for b, w in probe["bands"].items())
    if "unsolvable" in probe:
        return f"unsolvable {probe['unsolvable']:g} ({probe['where']})"
    return "package hard"


def row(r: dict) -> dict:
    return {"candidate": label(r["probe"]), "validation base": f"{r['base']:.3f}",
            "best by 2^22 at n = " + ", ".join(map(str, NS)): ", ".join(f"{x:.3f}" for x in r["best_4m"]),
            "best by 2^23": ", ".join(f"{x:.3f}" for x in r["best_8m"]),
            "n* at log2 C = " + ", ".join(map(str, GRID_LOG2)): ", ".join(map(str, r["n_star"])),
            "informative groups per step": ", ".join(f"{x:.1f}" for x in r["informative"]),
            "score": r["score"]}


def main(argv=None) -> int:
    started = search.run_search("hard_composition_probe", __doc__, measure, CANDIDATES, argv)
    if started is None:
        return 2
    args, rows, todo, t0 = started
    lines = ["# What the hard set is made of (generated by `python paper_figures/hard_composition_probe.py`)", "",
             f"Calibration world {WORLD}, training seeds {', '.join(map(str, SEEDS))} (values are their means), "
             "B_problem 32, validation avg@4; every model knob the package default's. The script's docstring defines "
             "each probe and column; the study's hard levels: base about 0.04, best 0.094 / 0.091 / 0.122 at "
             "n = 8 / 32 / 128 by about 4M rollouts, n* saturating near 128.", "",
             _table([row(r) for r in rows]), ""]
    search.finish_search(args.out, lines, len(rows), todo, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
