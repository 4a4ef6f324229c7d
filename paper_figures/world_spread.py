"""How much the study's levels depend on the world's draw: both bands' levels of the default and of
its calibrated neighbours in several worlds, beside the tolerances the levels are held to.

The default's knobs were chosen on the easy and hard levels in calibration world 1 alone
(calibration_confidence.md, stage 1), and its levels are then read in the evaluation world. A
world (a data seed) draws the strategies, the skill map, the base policy's preferences and the
problems; two worlds of the same knobs differ in how the base policy's favourite strategies line
up with what solves a band's problems. The levels are held to the study's within 0.03 (the base
of easy within 0.05 of 0.45, of hard in [0.03, 0.05]), so where they move by that much from one
world to the next, a setting chosen in one world meets the tolerances in another by chance.

Measured, for each candidate (``model`` knobs; ``{}``: the package default) and world: the easy
validation set's base avg@4 and its best validation avg@4 at n = 8 ... 1024, and the hard set's at
n = 8, 32 and 128, each one run at B_problem 32 to 2^22 rollouts (the study's horizon for these
levels) from the calibration's training seed (root seed 1, replicate 0). The default runs in the
three calibration worlds (data seeds 1-3) and in 21 more that neither the calibration nor the
evaluation reads (4-24); the default with twice its strategies (512: a base policy spread over more
strategies, whose favourites might line up with a band's solvers more alike from world to world; its
other knobs are not recalibrated) in worlds 1-6; the default's neighbours (a lower confidence floor,
which raises the hard base into the study's range, with slower or faster memorisation) in the three
calibration worlds; the default with a stratified world (``world_draw = "stratified"``: the base
preferences and the generalities take fixed values, and the generality of the base policy's j-th
favourite is the same in every world) in worlds 1-12, and a search of its knobs in stratified worlds
(:data:`STRATIFIED_GRID`, three rounds over the calibration worlds, each chosen from the one before),
whose two best are read again in worlds 4-12 beside both defaults. The evaluation world (data seed 0)
is never run here.

Which part of a world moves the hard levels: in calibration world 1, the hard levels of the default
with one part of the world (the strategies' generalities, the base preferences, the problem-specific
base logits' map, the skill map) taken from each of worlds 2-9, with world 1's own world and the
problems drawn with worlds 2-9's streams, and with world 1 as it is trained from eight other
training seeds (:data:`VARIATIONS`).

Summaries: for the default (and with 512 strategies), each level's mean and standard deviation over
its worlds and the share of worlds in which it meets its tolerance; how the default's hard levels
move with two measures of a world's hard set before training (:func:`world_stats`; Pearson's r over
the worlds); for each candidate, over the calibration worlds, the RMS difference from the study (the
13 levels of each world) and how many of the levels miss their tolerance.

    python paper_figures/world_spread.py [--journal paper_figures/world_spread.jsonl]
        [--out paper_figures/world_spread.md] [--workers 2]
"""
from __future__ import annotations

import numpy as np
import structure_search as search
from calibrate_confidence import STUDY_HARD_BASE, STUDY_HARD_BEST, _table
from calibrate_levels import STUDY_BASE, STUDY_BEST

from isosim import SimConfig, build_population, simulate
from isosim.experiments.sweep import derive_seed
from isosim.sim.population import log_softmax, make_world, population_in_world
from isosim.study.findings import CALIBRATION_SEEDS, EVALUATION_SEEDS

BUDGET = 2.0**22
B_PROBLEM = 32
EASY_N = tuple(STUDY_BEST)
HARD_N = tuple(STUDY_HARD_BEST)
#: worlds that neither the calibration nor the evaluation reads
OTHER_WORLDS = tuple(range(4, 25))
CALIBRATION_WORLDS = tuple(CALIBRATION_SEEDS["data_seeds"])
#: the tolerances of the levels: within 0.03 of the study's best values, the easy base within 0.05
#: of 0.45 and the hard base in [0.03, 0.05]
TOLERANCE, EASY_BASE_TOLERANCE, HARD_BASE_RANGE = 0.03, 0.05, (0.03, 0.05)
NEIGHBOURS = ({"confidence_floor": 0.2, "local": 1100.0}, {"confidence_floor": 0.2, "local": 1200.0},
              {"confidence_floor": 0.2, "local": 1300.0}, {"confidence_floor": 0.18, "local": 1200.0},
              {"confidence_floor": 0.22, "local": 1200.0})
#: a wider grid over the calibration worlds: floor, memorisation speed and the shared path's scale
GRID = tuple(m for m in ({"confidence_floor": f, "local": loc, **({"shared": sh} if sh != 0.06 else {})}
                         for f in (0.2, 0.22) for loc in (1200.0, 1400.0) for sh in (0.06, 0.07))
             if m not in NEIGHBOURS) + ({"shared": 0.07},)
#: the candidates ranked best over the calibration worlds (fewest levels missed, then RMS) that are
#: read again in worlds neither the calibration nor the evaluation reads
HELD_OUT_TOP, HELD_OUT_WORLDS = 2, tuple(range(4, 10))
STRATIFIED = {"world_draw": "stratified"}
#: the models whose spread over worlds is measured, with their worlds: the default in every world but
#: the evaluation world's, twice its strategies (does a base policy spread over more strategies vary
#: less from world to world?) in six, the default's knobs in a stratified world in twelve
SPREAD = (({}, (*CALIBRATION_WORLDS, *OTHER_WORLDS)), ({"n_strategies": 512}, (*CALIBRATION_WORLDS, *OTHER_WORLDS[:3])),
          (STRATIFIED, (*CALIBRATION_WORLDS, *OTHER_WORLDS[:9])))
SPREAD_MODELS = tuple(m for m, _ in SPREAD)
#: what part of a world moves the hard levels: in calibration world 1, one part of the world (the
#: strategies' generalities, the base preferences beta0, the problem-specific base logits' map V0, the
#: skill map W) taken from another world, or world 1's own world with another world's problem draws,
#: or world 1 as it is under another training seed (replicates 1-8 of the calibration's root seed)
COMPONENTS = ("generality", "beta0", "V0", "W", "problems")
COMPONENT_HOME, COMPONENT_FROM, REPLICATES = 1, tuple(range(2, 10)), tuple(range(1, 9))
VARIATIONS = ([{"world": COMPONENT_HOME, "component": c, "from": w} for c in COMPONENTS for w in COMPONENT_FROM]
              + [{"world": COMPONENT_HOME, "replicate": r} for r in REPLICATES])


def _stratified(floor: float, local: float, shared: float = 0.06, execution_a: float | None = None,
                skill_link: float = 0.7) -> dict:
    knobs = {"confidence_floor": floor, "local": local, "shared": shared, "execution_a": execution_a,
             "skill_link": skill_link}
    drop = {"shared": 0.06, "execution_a": None, "skill_link": 0.7}
    return {**STRATIFIED, **{k: v for k, v in knobs.items() if k not in drop or v != drop[k]}}


#: the stratified world's knobs, searched over the calibration worlds in three rounds, each chosen from
#: the one before: the floor, memorisation and the shared path; then, on the best of those, the execution
#: rates' Beta a (a higher mean e_i lifts the levels a held-out problem can reach: the easy set's at large
#: n) and the skill link (how far transfer reaches the niche strategies hard problems need); then faster
#: memorisation, which lowers the hard levels at n = 32 and 128
STRATIFIED_GRID = (
    *(_stratified(f, loc, sh) for f in (0.2, 0.22) for loc in (960.0, 1200.0, 1400.0) for sh in (0.06, 0.07)),
    *(_stratified(0.22, 1400.0, 0.07, ea if ea != 8 else None, sl)
      for ea, sl in ((10.0, 0.7), (12.0, 0.7), (10.0, 0.6), (12.0, 0.6), (10.0, 0.5), (12.0, 0.5), (8, 0.6), (8, 0.5))),
    *(_stratified(f, loc, 0.07, ea, sl) for f, ea, loc, sl in (
        (0.22, 10.0, 1800.0, 0.6), (0.22, 10.0, 2200.0, 0.6), (0.22, 12.0, 1800.0, 0.6), (0.22, 12.0, 2200.0, 0.6),
        (0.22, 12.0, 1800.0, 0.7), (0.22, 12.0, 2200.0, 0.7), (0.22, 12.0, 1800.0, 0.5), (0.2, 12.0, 2000.0, 0.6))),
)
#: the worlds the best stratified candidates are read again in (beside the stratified default there)
STRATIFIED_HELD_OUT_WORLDS = OTHER_WORLDS[:9]
CANDIDATES = ([[{"world": w}, m] for m, worlds in SPREAD for w in worlds]
              + [[{"world": w}, m] for m in (*NEIGHBOURS, *GRID, *STRATIFIED_GRID) for w in CALIBRATION_WORLDS]
              + [[v, {}] for v in VARIATIONS])
#: every level a world row holds, with the study's value
STUDY = {"easy_base": STUDY_BASE, **{f"easy_n{n}": v for n, v in STUDY_BEST.items()},
         "hard_base": STUDY_HARD_BASE, **{f"hard_n{n}": v for n, v in STUDY_HARD_BEST.items()}}


def world_config(model: dict, world: int, preset: str) -> SimConfig:
    """The package's config with ``model``'s knobs and the ``preset`` band of data seed ``world``;
    the evaluation world is refused."""
    if world == EVALUATION_SEEDS["data_seed"]:
        raise ValueError("the evaluation world is not read here")
    return SimConfig().replace(population={"preset": preset, "seed": world}, model=model)


def band_levels(model: dict, world: int, preset: str, ns, pop=None, replicate: int = 0) -> dict:
    """``{"base": ..., n: best validation avg@4}`` of one band in one world (its population ``pop``
    if given), trained from the calibration's root seed's ``replicate``."""
    cfg = world_config(model, world, preset).replace(eval={"n_evals": 24, "train_split": False})
    pop = pop or build_population(cfg.population, cfg.model)
    seed = derive_seed(CALIBRATION_SEEDS["root_seed"], replicate)
    out = {}
    for n in ns:
        run = cfg.replace(allocation={"n": n, "b_problem": B_PROBLEM, "budget": BUDGET, "steps": 0})
        v = simulate(run, seed, population=pop).curve("avg@4", "val")
        out["base"] = float(v["value"].iloc[0])
        out[n] = float(v["value"].max())
    return out


def varied_levels(probe: dict) -> dict:
    """The hard levels of world ``probe["world"]`` with one part of its world, or its problem draws,
    from world ``probe["from"]`` (``component``), or under training replicate ``probe["replicate"]``."""
    cfg = world_config({}, probe["world"], "hard")
    if "replicate" in probe:
        pop, replicate = None, probe["replicate"]
    else:
        other, replicate = world_config({}, probe["from"], "hard"), 0
        world = make_world(probe["world"], cfg.model)
        if probe["component"] == "problems":
            pop = population_in_world(other.population, cfg.model, world)
        else:
            world = {**world, probe["component"]: make_world(probe["from"], cfg.model)[probe["component"]]}
            pop = population_in_world(cfg.population, cfg.model, world)
    return named("hard", band_levels({}, probe["world"], "hard", HARD_N, pop, replicate))


def named(band: str, levels: dict) -> dict:
    """:func:`band_levels`'s output under the names a world row holds (``hard_base``, ``hard_n8``, ...)."""
    return {f"{band}_base" if k == "base" else f"{band}_n{k}": v for k, v in levels.items()}


def measure(spec: list[dict]) -> dict:
    probe, model = spec
    if len(probe) > 1:
        return {"probe": probe, "model": model, "levels": varied_levels(probe), "score": None}
    levels = {**named("easy", band_levels(model, probe["world"], "easy", EASY_N)),
              **named("hard", band_levels(model, probe["world"], "hard", HARD_N))}
    return {"probe": probe, "model": model, "levels": levels, "score": rms(levels)}


def world_stats(world: int, model: dict | None = None) -> dict:
    """What a world's hard sets are like before training: the share of hard validation problems the
    training set's most general strategy solves, and the mean over hard validation problems of the
    base policy's log-probability of its best correct strategy minus that of its favourite (how far
    down the right answers sit)."""
    cfg = world_config(model or {}, world, "hard")
    pop = build_population(cfg.population, cfg.model)
    y, lp = pop.val.problems.rewards, log_softmax(pop.val.problems.base_logits)
    general = int(np.argmax(pop.train.problems.rewards.mean(axis=0)))
    gap = np.where(y > 0, lp, -np.inf).max(axis=1) - lp.max(axis=1)
    return {"general_share": float(y[:, general].mean()), "gap": float(np.mean(gap[np.isfinite(gap)]))}


def moves_with(rows: list[dict]) -> list[dict]:
    """Pearson's r (and its two-sided p) over the rows' worlds between each hard level and each of
    :func:`world_stats`'s measures."""
    from scipy.stats import pearsonr

    stats = [world_stats(r["probe"]["world"], r["model"]) for r in rows]
    out = []
    for level in ("hard_n8", "hard_n32", "hard_n128"):
        y = [r["levels"][level] for r in rows]
        for name, what in (("general_share", "share solved by the most general strategy"),
                           ("gap", "log-prob of the best correct strategy minus the favourite's")):
            res = pearsonr([st[name] for st in stats], y)
            out.append({"level": level, "against": what, "r": f"{res.statistic:.2f}", "p": f"{res.pvalue:.1g}",
                        "worlds": len(rows)})
    return out


def misses(name: str, value: float) -> bool:
    """Whether a level misses its tolerance."""
    if name == "easy_base":
        return abs(value - STUDY_BASE) > EASY_BASE_TOLERANCE
    if name == "hard_base":
        return not HARD_BASE_RANGE[0] <= value <= HARD_BASE_RANGE[1]
    return abs(value - STUDY[name]) > TOLERANCE


def rms(levels: dict) -> float:
    """RMS difference of the levels from the study's."""
    return round(float(np.sqrt(np.mean([(levels[k] - v) ** 2 for k, v in STUDY.items()]))), 4)


def spread(rows: list[dict]) -> list[dict]:
    """Per level: mean and standard deviation (ddof 1) over the rows' worlds, the study's value, and
    the share of worlds in which the level meets its tolerance."""
    out = []
    for name, study in STUDY.items():
        v = np.array([r["levels"][name] for r in rows])
        out.append({"level": name, "study": study, "mean": f"{v.mean():.3f}", "sd over worlds": f"{v.std(ddof=1):.3f}",
                    "range": f"{v.min():.3f}-{v.max():.3f}",
                    "meets its tolerance": f"{sum(not misses(name, x) for x in v)} of {len(v)}"})
    return out


def fit(rows: list[dict]) -> tuple[list[str], float]:
    """The levels of ``rows`` that miss their tolerance (``w<world> <level>``), and the RMS difference
    from the study over every level of every row."""
    err = [r["levels"][k] - v for r in rows for k, v in STUDY.items()]
    missed = [f"w{r['probe']['world']} {k}" for r in rows for k in STUDY if misses(k, r["levels"][k])]
    return missed, float(np.sqrt(np.mean(np.square(err))))


def summary(model: dict, rows: list[dict]) -> dict:
    """A candidate over its worlds (:func:`fit`): its RMS from the study and the levels that miss
    their tolerance (of all of them)."""
    missed, err = fit(rows)
    return {"candidate": search._label({}, model), "worlds": ", ".join(str(r["probe"]["world"]) for r in rows),
            "rms": f"{err:.4f}", "missed": f"{len(missed)} of {len(rows) * len(STUDY)}",
            "which": ", ".join(missed) or "none"}


COMPONENT_LABELS = {"generality": "the strategies' generalities q_s", "beta0": "the base preferences beta0",
                    "V0": "the problem-specific base logits' map V0", "W": "the skill map W",
                    "problems": "the problem draws (world 1's world)", "training": "the training seed"}


def components(varied: list[dict], whole: list[dict]) -> list[dict]:
    """Per part of the world varied (:data:`VARIATIONS`), the hard levels' mean and SD over its draws,
    beside the default's over whole worlds (``whole``)."""
    def row(what: str, rs: list[dict]) -> dict:
        out = {"what varies": what, "draws": len(rs)}
        for level in ("hard_base", *(f"hard_n{n}" for n in HARD_N)):
            v = np.array([r["levels"][level] for r in rs])
            out[level] = f"{v.mean():.3f} (SD {v.std(ddof=1):.3f})"
        return out

    def part(r: dict) -> str:
        return r["probe"].get("component", "training")

    return [row(f"{COMPONENT_LABELS[c]}, from worlds {COMPONENT_FROM[0]}-{COMPONENT_FROM[-1]}"
                if c != "training" else f"{COMPONENT_LABELS[c]} (replicates {REPLICATES[0]}-{REPLICATES[-1]})",
                [r for r in varied if part(r) == c]) for c in (*COMPONENTS, "training")] + [
        row(f"the whole world (the default, worlds {whole[0]['probe']['world']}-{whole[-1]['probe']['world']})", whole)]


def world_row(r: dict) -> dict:
    lv = r["levels"]
    return {"candidate": search._label({}, r["model"]), "world": r["probe"]["world"],
            "easy base": f"{lv['easy_base']:.3f}",
            "easy n = " + ", ".join(map(str, EASY_N)): ", ".join(f"{lv[f'easy_n{n}']:.3f}" for n in EASY_N),
            "hard base": f"{lv['hard_base']:.3f}",
            "hard n = " + ", ".join(map(str, HARD_N)): ", ".join(f"{lv[f'hard_n{n}']:.3f}" for n in HARD_N),
            "rms": r["score"]}


def rank(models: list[dict], rows: list[dict], default: dict) -> tuple[list, list[dict]]:
    """``models`` with their rows in the calibration worlds, best first (fewest levels missed, then
    RMS), and the :data:`HELD_OUT_TOP` best that are not ``default``."""
    in_calibration = [[r for r in rows if r["model"] == m and r["probe"]["world"] in CALIBRATION_WORLDS] for m in models]
    fits = [fit(rs) for rs in in_calibration]
    order = sorted(range(len(models)), key=lambda i: (len(fits[i][0]), fits[i][1]))
    ranked = [(models[i], in_calibration[i]) for i in order]
    return ranked, [m for m, _ in ranked if m != default][:HELD_OUT_TOP]


def main(argv=None) -> int:
    started = search.run_search("world_spread", __doc__, measure, CANDIDATES, argv)
    if started is None:
        return 2
    args, rows, todo, t0 = started
    varied = [r for r in rows if len(r["probe"]) > 1]
    rows = [r for r in rows if len(r["probe"]) == 1]
    ranked, chosen = rank([{}, *NEIGHBOURS, *GRID], rows, {})
    ranked_s, chosen_s = rank([STRATIFIED, *STRATIFIED_GRID], rows, STRATIFIED)
    # the chosen models' held-out worlds are not among the candidates, so their rows are new
    more = ([[{"world": w}, m] for m in chosen for w in HELD_OUT_WORLDS]
            + [[{"world": w}, m] for m in chosen_s for w in STRATIFIED_HELD_OUT_WORLDS])
    done, measured = search.journalled(measure, more, args.journal, args.workers)
    rows, todo = rows + [done[search._key(c)] for c in more], todo + measured

    def held(models, worlds):
        return [summary(m, [r for r in rows if r["model"] == m and r["probe"]["world"] in worlds]) for m in models]

    held_out = held(({}, *chosen), HELD_OUT_WORLDS)
    held_out_s = held(({}, STRATIFIED, *chosen_s), STRATIFIED_HELD_OUT_WORLDS)
    study = {**world_row({"probe": {"world": "-"}, "model": {}, "levels": STUDY, "score": "-"}), "candidate": "study"}
    lines = ["# How much the levels depend on the world (generated by `python paper_figures/world_spread.py`)", "",
             f"Validation avg@4, B_problem {B_PROBLEM}, best value by 2^22 rollouts, one run per cell from the "
             f"calibration's training seed (root seed {CALIBRATION_SEEDS['root_seed']}, replicate 0). Calibration "
             f"worlds: data seeds {', '.join(map(str, CALIBRATION_WORLDS))}; worlds {OTHER_WORLDS[0]}-{OTHER_WORLDS[-1]} "
             "are read by neither the calibration nor the evaluation; the evaluation world (data seed "
             f"{EVALUATION_SEEDS['data_seed']}) is not run. Tolerances: {TOLERANCE} on each best value, "
             f"{EASY_BASE_TOLERANCE} on the easy base, the hard base in [{HARD_BASE_RANGE[0]}, {HARD_BASE_RANGE[1]}]. "
             "The script's docstring says why and what each column is.", "",
             *(line for m, worlds in SPREAD for line in
               (f"## {search._label({}, m)} over {len(worlds)} worlds", "",
                _table(spread([r for r in rows if r["model"] == m])), "")),
             "## What the default's hard levels move with", "",
             _table(moves_with([r for r in rows if not r["model"]])), "",
             f"## Which part of the world moves them (world {COMPONENT_HOME}, one part varied at a time)", "",
             _table(components(varied, [r for r in rows if not r["model"]])), "",
             "## The default and its neighbours over the calibration worlds", "",
             _table([summary(m, rs) for m, rs in ranked]), "",
             f"## The {HELD_OUT_TOP} best of them in worlds {HELD_OUT_WORLDS[0]}-{HELD_OUT_WORLDS[-1]} (beside the "
             "default there)", "", _table(held_out), "",
             "## Stratified worlds: the knobs over the calibration worlds", "",
             _table([summary(m, rs) for m, rs in ranked_s]), "",
             f"## The {HELD_OUT_TOP} best of them in worlds {STRATIFIED_HELD_OUT_WORLDS[0]}-"
             f"{STRATIFIED_HELD_OUT_WORLDS[-1]} (beside both defaults there)", "", _table(held_out_s), "",
             "## Every world", "", _table([study, *map(world_row, rows)]), ""]
    search.finish_search(args.out, lines, len(rows), todo, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
