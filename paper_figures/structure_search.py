"""A measured search over the generator's structure for forgetting and a small-set decline that
keep the study's levels on easy and hard.

Finding 12's second half (training only on hard problems loses ground on easy and very-easy
ones) and finding 8's decline of the largest n at D = 500 need training on some problems to
*take* from others. Structures the package does not offer, probed here in this process only
(hard_structure.py's probes, extended), and model knobs:

* ``tau``, ``keys``, ``key_scale``: hard_structure.py's intrinsic difficulty and shared key memory;
* **style** (``gamma``, ``style_c``): strategy ``s`` has a style ``d_s ~ N(0, 1)`` and problem
  ``i`` a style need ``h_i ~ N(0, 1)``; the solver score gains ``gamma h_i d_s`` (the sum rescaled
  by ``1 / sqrt(1 + gamma^2)``), and the base policy favours one style,
  ``beta0 <- sqrt(1 - style_c) beta0 - sqrt(style_c) prior_scale d``. Problems needing the other
  style are the ones the base model fails, so hard problems need strategies that easy ones do not
  use: the shared preferences learned on hard problems move easy problems' mass to the wrong style;
* **split skills** (``split``): the skill map that says which strategies solve problem ``i`` is
  ``sqrt(1 - a_i) W + sqrt(a_i) W2`` with ``a_i = sigmoid(split * h_i)``, so hard problems' solvers
  follow a map of their own and what the shared ``V`` learns on them is wrong for easy problems;
  ``split_corr`` (default 0: ``W2`` drawn independently) makes ``W2``'s columns correlate with
  ``W``'s, ``W2 ~ split_corr W + sqrt(1 - split_corr^2) W'`` (columns renormalised): at -1 the
  strategies that solve a problem of the other style are those that fail a problem of the base's
  style with the same embedding, a *signed* interference (what the shared map learns on hard
  problems moves easy problems' mass onto their wrong strategies), where the independent map's
  is noise that averages out;
* ``off``: hard_probes.py's switch that stops the shared preferences ``beta`` or the skill map
  ``V`` from learning, to see which of them carries what hard-only training gives easy problems;
* model knobs where a candidate names them, among them a narrower ``generality`` (``generality_a``,
  ``generality_b``: fewer strategies that are right on most problems, so less that any training
  teaches every problem).

Per candidate (calibration world 1, training seed 0, B_problem 32, validation avg@4, one run per
cell, so a difference is one run's and not a verdict):

* ``easy``, ``hard``: base value and the best value per n (8, 128, 512 on easy; 8, 32, 128, 512
  on hard) at 2^22 rollouts; ``score``: RMS difference from the study's levels on both bands
  (easy 0.45 / 0.596 / 0.629 / 0.688, hard 0.04 / 0.094 / 0.091 / 0.122);
* ``d500 n2048``: easy with D = 500 training problems, n = 2048, 2^23 rollouts: the validation
  peak, the log2 compute of the peak, the value at the end, and the training reward's rise after
  the peak (finding 8: the largest n declines after its peak while its training reward rises);
* ``hard-only -> easy``, ``-> very-easy``: training on hard problems only (n = 32 and 512, 2^23
  rollouts), validation on the band: before training, then each n's value at the end (finding
  12: forgetting when every n ends below where it started).

About 40 s of CPU per candidate; the candidates run two at a time and each finished one is
appended to a journal, so an interrupted search resumes where it stopped:

    python paper_figures/structure_search.py [--journal paper_figures/structure_search.jsonl]
        [--out paper_figures/structure_search.md] [--workers 2]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from multiprocessing import get_context

import numpy as np
from calibrate_confidence import _table, write_report
from hard_probes import STUDY, WORLD
from hard_structure import Structure, run_cell

#: a one-run difference counted as a change (no seeds here, so no standard error: a reading, not a verdict)
MARGIN = 0.01
LEVELS = ("easy_base", "easy_n8", "easy_n128", "easy_n512", "hard_base", "hard_n8", "hard_n32", "hard_n128")


def _grid(probe_axes: dict, model_axes: dict, fixed: dict | None = None) -> list[list[dict]]:
    keys, mkeys = list(probe_axes), list(model_axes)
    out = []
    for values in itertools.product(*probe_axes.values(), *model_axes.values()):
        probe = {**(fixed or {}), **dict(zip(keys, values[:len(keys)]))}
        out.append([probe, dict(zip(mkeys, values[len(keys):]))])
    return out


#: the candidates, in the order they were measured: (name, [probe, model knobs] pairs)
GRIDS = (
    ("package default", [[{}, {}]]),
    ("difficulty and key memory", _grid({"tau": [0.0, 1.0], "keys": [32, 64], "key_scale": [7.0, 10.0, 15.0]},
                                        {"shared": [0.06, 0.1]})),
    ("style, with and without key memory",
     [[{"gamma": g, "style_c": c, **({"keys": 32, "key_scale": 7.0} if k else {})}, {"shared": sh}]
      for g, c, sh, k in itertools.product([2.0, 4.0], [0.5, 0.8], [0.06, 0.1], [0, 1])]),
    ("style with a weak key memory", _grid({"style_c": [0.5, 0.8], "key_scale": [4.0, 5.5], "tau": [0.0, 1.0]},
                                           {"shared": [0.06, 0.08]}, {"gamma": 2.0, "keys": 32})),
    ("style with split skills", _grid({"gamma": [2.0, 4.0], "split": [1.0, 3.0]}, {"shared": [0.08, 0.1]},
                                      {"style_c": 0.5})),
    ("narrower generality (fewer strategies that are right everywhere), with and without style and split skills",
     [[probe, {"shared": 0.1, "generality_a": a, "generality_b": b}] for a, b in ((2.0, 16.0), (5.0, 40.0))
      for probe in ({}, {"gamma": 4.0, "style_c": 0.5, "split": 3.0}, {"gamma": 2.0, "style_c": 0.8, "split": 3.0})]),
    ("few solvers on hard problems (difficulty 3, prior and embedding spread 4) with key memory",
     [[{"tau": 3.0, "keys": 32, "key_scale": ks}, {"shared": sh, "prior_scale": 4.0, "embed_scale": 4.0}]
      for ks in (7.0, 10.0, 15.0) for sh in (0.06, 0.1)]),
    ("style with anti-correlated split skills (signed interference)",
     _grid({"gamma": [2.0, 4.0], "split": [1.0, 3.0], "split_corr": [-1.0, -0.5]}, {"shared": [0.08, 0.1]},
           {"style_c": 0.5})),
    ("which shared path carries what hard-only training gives easy problems",
     [[{"off": off}, {}] for off in ("beta", "v")]
     + [[{"gamma": 4.0, "style_c": 0.5, "split": 3.0, "off": off}, {"shared": 0.1}] for off in ("beta", "v")]),
)


class Style(Structure):
    """hard_structure.py's probe plus a style of strategies and split skill maps (module docstring).
    Every new draw comes from a generator of its own, so with ``gamma`` 0 the problems are hard_structure's."""

    def __init__(self, gamma: float = 0.0, style_c: float = 0.0, split: float = 0.0, split_corr: float = 0.0,
                 **structure):
        super().__init__(**structure)
        self.gamma, self.style_c, self.split, self.split_corr = gamma, style_c, split, split_corr
        self.rng_style = np.random.default_rng(99)

    def make_world(self, cfg, rng):
        world = super().make_world(cfg, rng)
        d = np.random.default_rng(5150).normal(size=world["beta0"].size)
        world["d"] = d
        if self.split and "W" in world:
            w = np.random.default_rng(6060).normal(size=world["W"].shape)
            w = w / np.linalg.norm(w, axis=0, keepdims=True)
            if self.split_corr:
                r = self.split_corr
                w = r * world["W"] + np.sqrt(1.0 - r * r) * w
                w = w / np.linalg.norm(w, axis=0, keepdims=True)
            world["W2"] = w
        if self.style_c:
            c = self.style_c
            world["beta0"] = np.sqrt(1 - c) * world["beta0"] - np.sqrt(c) * cfg.prior_scale * d
        return world

    def changes_solvers(self) -> bool:
        return self.gamma != 0 or super().changes_solvers()

    def score(self, cfg, world, rng, z):
        """hard_structure's score with the split skill map and the style term (module docstring)."""
        if self.gamma == 0:
            return super().score(cfg, world, rng, z)
        h = self.rng_style.normal(size=(z.shape[0], 1))
        zw = z @ world["W"]
        if self.split:
            a = 1.0 / (1.0 + np.exp(-self.split * h))
            zw = np.sqrt(1 - a) * zw + np.sqrt(a) * (z @ world["W2"])
        score = super().score(cfg, world, rng, z, skill=zw)
        return (score + self.gamma * h * world["d"][None, :]) / np.sqrt(1 + self.gamma**2)


def _curve(trace, split: str = "val") -> tuple[np.ndarray, np.ndarray]:
    c = trace.curve("avg@4", split)
    return c["compute_rollouts"].to_numpy(float), c["value"].to_numpy(float)


def measure(spec: list[dict]) -> dict:
    probe, model = spec
    out = {"probe": probe, "model": model}
    with Style(**probe):
        for band, ns in (("easy", (8, 128, 512)), ("hard", (8, 32, 128, 512))):
            for n in ns:
                trace, pop = run_cell(model, band, n, 2**22)
                if n == ns[0]:
                    out[f"{band}_base"] = round(float(pop.val.base_pass.mean()), 3)
                out[f"{band}_n{n}"] = round(float(_curve(trace)[1].max()), 3)
        trace, _ = run_cell(model, "easy", 2048, 2**23, {"train_size": 500}, train=True)
        c, v = _curve(trace)
        t = _curve(trace, "train")[1]
        i = int(np.argmax(v))
        out["d500_n2048"] = [round(float(v[i]), 3), round(float(np.log2(max(c[i], 1.0))), 1), round(float(v[-1]), 3),
                             round(float(t[-1] - t[i]), 3)]
        for band in ("easy", "very-easy"):
            for n in (32, 512):
                v = _curve(run_cell(model, "hard", n, 2**23, {"val_mixture_weights": ((band, 1.0),)})[0])[1]
                out[f"hard_only_{band}_n{n}"] = [round(float(v[0]), 3), round(float(v[-1]), 3)]
    out["score"] = round(float(np.sqrt(np.mean([(out[k] - STUDY[k]) ** 2 for k in LEVELS]))), 4)
    return out


def _key(spec) -> str:
    return json.dumps(spec, sort_keys=True)


def _label(probe: dict, model: dict) -> str:
    parts = [f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in {**probe, **model}.items()]
    return ", ".join(parts) or "package default"


def _row(r: dict) -> dict:
    peak, at, end, rise = r["d500_n2048"]
    forgets = {band: _forgets(r, band) for band in ("easy", "very-easy")}
    return {
        "candidate": _label(r["probe"], r["model"]),
        "easy: base; n8, 128, 512": f"{r['easy_base']:.3f}; {r['easy_n8']:.3f}, {r['easy_n128']:.3f}, {r['easy_n512']:.3f}",
        "hard: base; n8, 32, 128, 512": f"{r['hard_base']:.3f}; {r['hard_n8']:.3f}, {r['hard_n32']:.3f}, "
                                        f"{r['hard_n128']:.3f}, {r['hard_n512']:.3f}",
        "score": r["score"],
        "d500 n2048: peak@log2 C -> end (train rise)": f"{peak:.3f}@{at:.1f} -> {end:.3f} ({rise:+.2f})",
        "hard-only -> easy: before -> n32, n512": "{:.3f} -> {:.3f}, {:.3f}".format(
            r["hard_only_easy_n32"][0], r["hard_only_easy_n32"][1], r["hard_only_easy_n512"][1]),
        "-> very-easy": "{:.3f} -> {:.3f}, {:.3f}".format(
            r["hard_only_very-easy_n32"][0], r["hard_only_very-easy_n32"][1], r["hard_only_very-easy_n512"][1]),
        "forgets": " and ".join(b for b, f in forgets.items() if f) or "-",
    }


def _forgets(r: dict, band: str) -> bool:
    """Every n of the hard-only runs ends more than ``MARGIN`` below the band's value before training."""
    return all(r[f"hard_only_{band}_n{n}"][1] < r[f"hard_only_{band}_n{n}"][0] - MARGIN for n in (32, 512))


def _declines(r: dict) -> bool:
    """The largest n's validation ends more than ``MARGIN`` below its peak while training reward rises
    more than ``MARGIN`` after it (finding 8's shape, one run)."""
    peak, _, end, rise = r["d500_n2048"]
    return peak - end > MARGIN and rise > MARGIN


def summary(rows: list[dict]) -> list[str]:
    """What the candidates show together, counted from the journal."""
    def names(sel):
        return "; ".join(f"{_label(r['probe'], r['model'])} (score {r['score']})" for r in sel) or "none"

    levels = [r for r in rows if r["score"] <= 0.03]
    both = sorted((r for r in rows if _forgets(r, "very-easy") and _declines(r)), key=lambda r: r["score"])
    return [
        f"Of {len(rows)} candidates, hard-only training ends more than {MARGIN} below its start at both n on easy in "
        f"{sum(_forgets(r, 'easy') for r in rows)} ({names([r for r in rows if _forgets(r, 'easy')])}), on "
        f"very-easy in {sum(_forgets(r, 'very-easy') for r in rows)}; the largest n declines at D = 500 (by more "
        f"than {MARGIN}, its training reward rising by more) in {sum(_declines(r) for r in rows)}.",
        f"Within 0.03 RMS of the study's levels ({len(levels)}): {names(levels)}. Of these, forgetting on very-easy: "
        f"{names([r for r in levels if _forgets(r, 'very-easy')])}; a decline at D = 500: "
        f"{names([r for r in levels if _declines(r)])}.",
        f"Forgetting on very-easy and a decline at D = 500 together: {len(both)} candidates, the closest to the "
        f"study's levels {names(both[:3])}.",
    ]


def search_args(name: str, doc: str, argv=None) -> argparse.Namespace | None:
    """The command line of a journalled search ``paper_figures/<name>.py``: ``--journal``, ``--out``
    and ``--workers``; None (after one line on stderr) when ``--workers`` is below 1."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--journal", default=f"paper_figures/{name}.jsonl", help="finished candidates (resumable)")
    ap.add_argument("--out", default=f"paper_figures/{name}.md", help="the report")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = ap.parse_args(argv)
    if args.workers < 1:
        print(f"{name}.py: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return None
    return args


def journalled(measure, specs: list, journal: str, workers: int) -> tuple[dict, list]:
    """``measure([probe, model])`` for every spec of ``specs`` the ``journal`` (JSON lines, each a
    measured row with its ``probe`` and ``model``) does not hold yet, ``workers`` at a time, each row
    appended as it finishes (an interrupted search resumes): every row by :func:`_key` of its spec,
    and the specs measured in this call."""
    done = {}
    if os.path.exists(journal):
        with open(journal) as f:
            done = {_key([r["probe"], r["model"]]): r for r in map(json.loads, f)}
    todo = [s for s in specs if _key(s) not in done]
    with get_context("fork").Pool(workers) as pool, open(journal, "a") as f:
        for r in pool.imap_unordered(measure, todo):
            f.write(json.dumps(r) + "\n")
            f.flush()
            done[_key([r["probe"], r["model"]])] = r
            print(_label(r["probe"], r["model"]), r["score"], flush=True)
    return done, todo


def run_search(name: str, doc: str, measure, candidates: list, argv=None):
    """The command line of ``paper_figures/<name>.py`` (:func:`search_args`), then
    :func:`journalled` over ``candidates``: ``(args, rows in the candidates' order, the candidates
    measured in this run, the start time)``, or None when the command line is bad input."""
    args = search_args(name, doc, argv)
    if args is None:
        return None
    t0 = time.time()
    done, todo = journalled(measure, list(candidates), args.journal, args.workers)
    return args, [done[_key(c)] for c in candidates], todo, t0


def finish_search(out: str, lines: list[str], candidates: int, todo: list, t0: float) -> None:
    """Write a journalled search's report ``lines`` to ``out``, closed by how many of its
    ``candidates`` this run measured (``todo``, from :func:`journalled`) and its wall time since ``t0``."""
    write_report(out, [*lines, f"{candidates} candidates; {len(todo)} measured in this run "
                                f"({time.time() - t0:.0f} s of wall time).", ""])


def main(argv=None) -> int:
    args = search_args("structure_search", __doc__, argv)
    if args is None:
        return 2
    specs = [s for _, grid in GRIDS for s in grid]
    t0 = time.time()
    done, todo = journalled(measure, specs, args.journal, args.workers)
    lines = ["# A search over the generator's structure for forgetting and a small-set decline "
             "(generated by `python paper_figures/structure_search.py`)", "",
             f"Calibration world {WORLD}, training seed 0, one run per cell, B_problem 32, validation avg@4; every "
             "knob the package default's unless the candidate names it. The script's docstring defines each probe "
             f"and column. `forgets`: every n of the hard-only runs ends more than {MARGIN} below the band's value before "
             "training (one run: a reading, not a verdict).", "",
             *summary([done[_key(s)] for s in specs]), ""]
    for name, grid in GRIDS:
        lines += [f"## {name}", "", _table([_row(done[_key(s)]) for s in grid]), ""]
    finish_search(args.out, lines, len(specs), todo, t0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
