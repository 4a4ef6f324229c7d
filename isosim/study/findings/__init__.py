"""The study's twelve findings, each checked from stored sweeps and drawn as a figure.

One module per finding holds all of it: the sweeps it reads (plain
:class:`~isosim.experiments.sweep.SweepSpec` data, a function of the :class:`Scale`, ``full`` or
``quick``, returning them by name), a check that turns their results into ``holds`` and the
evidence behind it, its figure (``make(results, out)``), and its text (title, the study's
numbers, mechanism, and the ablation that switches the mechanism off). ``_common`` holds what
they share (the scales, :class:`Results`, the sweeps several findings read, small helpers) and
``style`` the plot style. This module is the registry: :data:`FINDINGS` in the study's order,
and :func:`sweep_specs`, every finding's sweeps merged by name (a name defined twice must be
the same spec). Adding a finding is one new module plus one line in ``_MODULES``.

Nothing is hard-coded: :func:`check_findings` recomputes every number from the store. The
checks read the validation split unless a model cannot transfer (no shared path:
``tabular``, or ``shared = 0``); those read the training split, where learning happens.
"""
from __future__ import annotations

from importlib import import_module

from ...errors import IsosimInputError
from ...experiments.sweep import SweepSpec
from ._common import (  # noqa: F401
    CALIBRATION_SEEDS,
    EVALUATION_SEEDS,
    METRIC,
    SCALES,
    Finding,
    Results,
    Scale,
    _final_se,
    _public,
    _series,
    based_on,
    final_by,
    finding_one_check,
    fit_n_star,
    last_evaluations,
    n_star_law,
    n_star_table,
)
from ._verdict import FAILS, HOLDS, INCONCLUSIVE, N_BOOT, VERDICTS, decide
from .dose_response import DOSES
from .fixed_batch import fixed_batch_trend
from .histograms import HIST_BINS, histogram_at

__all__ = ["CALIBRATION_SEEDS", "DOSES", "EVALUATION_SEEDS", "FAILS", "FINDINGS", "Finding", "HIST_BINS", "HOLDS",
           "INCONCLUSIVE", "METRIC", "N_BOOT", "Results", "SCALES", "Scale", "VERDICTS", "based_on", "check_findings",
           "decide", "final_by", "finding_one_check", "fit_n_star", "fixed_batch_trend", "get_finding", "histogram_at", "last_evaluations",
           "n_star_law", "n_star_table", "sweep_specs"]

#: the registry: one module per finding, in the study's order (each defines ``FINDING``)
_MODULES = (
    "easy_n_star",
    "hard_saturates_lower",
    "sharpening_coverage",
    "fixed_batch",
    "n_vs_b_problem",
    "tabular_null",
    "dose_response",
    "train_test_gap",
    "baseline",
    "lr_rule",
    "histograms",
    "mixtures",
)

FINDINGS: tuple[Finding, ...] = tuple(import_module(f"{__name__}.{m}").FINDING for m in _MODULES)


def sweep_specs(scale: str = "full") -> dict[str, SweepSpec]:
    """Every sweep the findings read, by name (each defined once, merged over the findings)."""
    sc = SCALES[scale]
    specs: dict[str, SweepSpec] = {}
    for f in FINDINGS:
        for name, spec in f.sweeps_at(sc).items():
            if specs.setdefault(name, spec) != spec:
                raise ValueError(f"sweep {name!r} of finding {f.id} differs from the sweep of that name "
                                 "another finding defines")
    return specs


def get_finding(fid: int) -> Finding:
    for f in FINDINGS:
        if f.id == fid:
            return f
    raise IsosimInputError(f"no finding {fid}: choose 1 to {len(FINDINGS)}")


def check_findings(results: Results, ids=None, n_boot: int = N_BOOT) -> list[dict]:
    """The findings ``ids`` (default all), each decided by :func:`._verdict.decide`.

    ``[{"id", "title", "verdict", "holds", "p_holds", "resamples", "exact", "replicates",
    "compared", "evidence"}]``: ``verdict`` is ``holds``, ``fails`` or ``inconclusive``;
    ``holds`` is ``verdict == "holds"``; ``p_holds`` the bootstrap probability that the
    criterion holds; ``compared`` every quantity the criterion compares with its value on all
    seeds, bootstrap SE and 95% interval; ``evidence`` the check's other numbers on all seeds."""
    out, memo = [], {}
    for f in FINDINGS:
        if ids is not None and f.id not in ids:
            continue
        d = decide(f, results, n_boot, memo)
        evidence = {k: v for k, v in d["evidence"].items() if k != "compared"}
        out.append({"id": f.id, "title": f.title, "verdict": d["verdict"], "holds": d["verdict"] == HOLDS,
                    "holds_on_all_seeds": d["holds_on_all_seeds"], "p_holds": round(d["p_holds"], 4),
                    "resamples": d["resamples"], "exact": d["exact"], "replicates": d["replicates"],
                    "compared": _public(d["compared"]), "evidence": _public(evidence)})
    return out
