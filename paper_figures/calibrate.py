"""Calibration of the default surrogate on finding 1 only (easy, Q1, B_problem = 32).

Every candidate is the shipped easy Q1 sweep (n = 2..1024, budget 2^23, two replicates) with a
few knobs changed, run in each calibration world. A candidate passes in a world when its n*(C)
fit meets finding 1 there (k > 0, L >= 2, R^2 >= 0.7, fitted saturation L + b below log2 of the
largest n, and the largest n never on the frontier). The chosen candidate passes in the most
worlds; among those, the one whose median saturation L + b over its passing worlds is closest to
the study's (6.09 + 2.73 = 8.82). Findings 2 to 12 play no part.

Calibration and evaluation share no seed: the candidates run in the calibration worlds of
:data:`isosim.study.findings.CALIBRATION_SEEDS` (other draws of the world and its problems, and
training seeds derived from another root seed), while every finding is evaluated on
:data:`~isosim.study.findings.EVALUATION_SEEDS`. Finding 1 evaluated there is a held-out check of
the calibration.

    python paper_figures/calibrate.py [--root isosim-out/calibration] [--out paper_figures/calibration.md]
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from isosim.experiments.sweep import POWERS_OF_TWO, SweepSpec, evaluations, run_sweep
from isosim.sim.config import SimConfig
from isosim.study.findings import CALIBRATION_SEEDS, EVALUATION_SEEDS, finding_one_check, n_star_law
from isosim.study.reproduce import STUDY_Q1

#: (name, changes to SimConfig sections); skill_link 0 is the model before calibration
CANDIDATES = (
    ("independent", {"model": {"skill_link": 0.0}}),
    ("independent, lr 0.1", {"model": {"skill_link": 0.0}, "algo": {"lr": 0.1}}),
    ("independent, lr 0.3", {"model": {"skill_link": 0.0}, "algo": {"lr": 0.3}}),
    ("independent, niche strategies", {"model": {"skill_link": 0.0, "generality_b": 8.0, "prior_scale": 1.5,
                                                 "embed_scale": 1.0}}),
    ("independent, entropy 0.01, lr 0.1", {"model": {"skill_link": 0.0}, "algo": {"lr": 0.1, "entropy_coef": 0.01}}),
    ("skill_link 0.4", {"model": {"skill_link": 0.4}}),
    ("skill_link 0.6", {"model": {"skill_link": 0.6}}),
    ("skill_link 0.7", {"model": {"skill_link": 0.7}}),
    ("skill_link 0.7, lr 0.1", {"model": {"skill_link": 0.7}, "algo": {"lr": 0.1}}),
    ("skill_link 0.8", {"model": {"skill_link": 0.8}}),
    ("skill_link 0.9", {"model": {"skill_link": 0.9}}),
    # second round: with rho = 0.7 every n >= 16 tied at the top budget, so finding 1's saturation
    # rested on near-ties; these vary how rare the correct strategies are under the base policy
    ("skill_link 0.7, prior scale 3", {"model": {"skill_link": 0.7, "prior_scale": 3.0}}),
    ("skill_link 0.7, prior scale 4", {"model": {"skill_link": 0.7, "prior_scale": 4.0}}),
    ("skill_link 0.7, prior scale 6", {"model": {"skill_link": 0.7, "prior_scale": 6.0}}),
    ("skill_link 0.7, embedding scale 4", {"model": {"skill_link": 0.7, "embed_scale": 4.0}}),
    ("skill_link 0.7, 256 strategies", {"model": {"skill_link": 0.7, "n_strategies": 256}}),
)


#: the model knobs before calibration; every candidate starts here, so the table does not
#: depend on the package's current defaults
BEFORE = {"skill_link": 0.0, "prior_scale": 2.0, "embed_scale": 2.0, "n_strategies": 64}


def evaluate(name: str, changes: dict, root: Path, data_seed: int) -> dict:
    """Finding 1's criterion for one candidate in one calibration world."""
    sections = {**changes, "model": {**BEFORE, **changes.get("model", {})}}
    base = SimConfig().replace(population={"preset": "easy", "seed": data_seed}, **sections)
    slug = "".join(c if c.isalnum() else "-" for c in name)
    spec = SweepSpec(f"calib-d{data_seed}-{slug}", "Q1", base, n=POWERS_OF_TWO, b_problem=(32,), budget=2.0**23,
                     seeds=(0, 1))
    store = run_sweep(spec, root / spec.id, progress=False, root_seed=CALIBRATION_SEEDS["root_seed"])
    law = n_star_law(evaluations(store.read(), "val"))
    return {"candidate": name, "world": data_seed, **finding_one_check(law, spec.n)}


def choose(rows: list[dict], target: float) -> str | None:
    """The candidate passing in the most worlds; ties: median saturation closest to ``target``."""
    by = {}
    for r in rows:
        by.setdefault(r["candidate"], []).append(r)
    scored = []
    for name, rs in by.items():
        passing = [r["saturation"] for r in rs if r["passes"]]
        if passing:
            scored.append((-len(passing), abs(statistics.median(passing) - target), name))
    return min(scored)[2] if scored else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default="isosim-out/calibration")
    p.add_argument("--out", default=str(Path(__file__).parent / "calibration.md"))
    a = p.parse_args()
    worlds = CALIBRATION_SEEDS["data_seeds"]
    rows = [evaluate(name, ch, Path(a.root), w) for w in worlds for name, ch in CANDIDATES]
    target = STUDY_Q1["easy"]["L"] + STUDY_Q1["easy"]["b"]
    chosen = choose(rows, target)
    cols = ("candidate", "world", "n_star_top", "L", "k", "log10_C0", "b", "r2", "saturation", "passes")
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, _ in CANDIDATES:
        for r in (r for r in rows if r["candidate"] == name):
            lines.append("| " + " | ".join(str(r.get(c, "-")) for c in cols) + " |")
    summary = ["| candidate | passes in worlds | " + " | ".join(f"n* top, world {w}" for w in worlds) + " |",
               "|---|---|" + "---|" * len(worlds)]
    for name, ch in CANDIDATES:
        rs = [r for r in rows if r["candidate"] == name]
        summary.append(f"| {name} | {sum(r['passes'] for r in rs)}/{len(rs)} | "
                       + " | ".join(str(r["n_star_top"]) for r in rs) + " |")
    text = (f"# Calibration on finding 1 (generated by `python paper_figures/calibrate.py`)\n\n"
            f"Easy, Q1, B_problem = 32, n = 2..1024, budget 2^23 rollouts, replicates 0 and 1, in the calibration "
            f"worlds (data seeds {', '.join(map(str, worlds))}; training seeds from root seed "
            f"{CALIBRATION_SEEDS['root_seed']}). The findings are evaluated in another world (data seed "
            f"{EVALUATION_SEEDS['data_seed']}, root seed {EVALUATION_SEEDS['root_seed']}); validation avg@4.\n"
            f"Pass: k > 0, L >= 2, R^2 >= 0.7, L + b < 10 (log2 of the largest n), n = 1024 never optimal.\n"
            f"Chosen: the candidate passing in the most worlds; ties go to the median L + b closest to the "
            f"study's {target:.2f}.\n\n"
            + "\n".join(summary) + "\n\n" + "\n".join(lines) + f"\n\n**Chosen: {chosen}**\n")
    Path(a.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
