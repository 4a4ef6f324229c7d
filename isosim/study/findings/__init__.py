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
    METRIC,
    SCALES,
    Finding,
    Results,
    Scale,
    _final_se,
    _public,
    _series,
    final_by,
    fit_n_star,
    last_evaluations,
    n_star_law,
    n_star_table,
)
from .dose_response import DOSES
from .fixed_batch import fixed_batch_trend
from .histograms import HIST_BINS, histogram_at

__all__ = ["DOSES", "FINDINGS", "Finding", "HIST_BINS", "METRIC", "Results", "SCALES", "Scale", "check_findings",
           "final_by", "fit_n_star", "fixed_batch_trend", "get_finding", "histogram_at", "last_evaluations",
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


def check_findings(results: Results, ids=None) -> list[dict]:
    """``[{"id", "title", "holds", "evidence"}]`` for the findings ``ids`` (default all)."""
    out = []
    for f in FINDINGS:
        if ids is not None and f.id not in ids:
            continue
        holds, evidence = f.check(results)
        out.append({"id": f.id, "title": f.title, "holds": bool(holds), "evidence": _public(evidence)})
    return out
