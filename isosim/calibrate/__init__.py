"""Calibrating the surrogate to a user's model from cheap pilot runs (``isosim calibrate``).

- :mod:`~isosim.calibrate.knobs`: the registry of calibrated knobs (config field, bounds, scale, meaning).
- :mod:`~isosim.calibrate.pilots`: reading pilot runs, their level anchor and their noise.
- :mod:`~isosim.calibrate.surrogate`: the surrogate's mean-field curves at the pilots' allocations.
- :mod:`~isosim.calibrate.fit`: the least-squares fit and the ensemble that fits within the noise.
- :mod:`~isosim.calibrate.calibration`: :func:`calibrate`, :class:`Calibration` and n*(C) with intervals.
- :mod:`~isosim.calibrate.config_file`: the model config file it writes, read back with its ensemble.
"""
from .config_file import read_model_config
from .knobs import DEFAULT, KNOBS, Knob

__all__ = ["Calibration", "DEFAULT", "KNOBS", "Knob", "calibrate", "read_model_config"]


def __getattr__(name: str):
    """:func:`calibrate` and :class:`Calibration` load on first use: the fit imports SciPy's
    optimisers and statistics (about 1 s), which reading a model config (``isosim plan
    --model-config``) does not need."""
    if name in ("Calibration", "calibrate"):
        from . import calibration

        return getattr(calibration, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
