"""Calibrating the surrogate to a user's model from cheap pilot runs (``isosim calibrate``).

- :mod:`~isosim.calibrate.knobs`: the registry of calibrated knobs (config field, bounds, scale, meaning).
- :mod:`~isosim.calibrate.pilots`: reading pilot runs, their level anchor and their noise.
- :mod:`~isosim.calibrate.surrogate`: the surrogate's mean-field curves at the pilots' allocations.
- :mod:`~isosim.calibrate.fit`: the least-squares fit and the ensemble that fits within the noise.
- :mod:`~isosim.calibrate.calibration`: :func:`calibrate`, :class:`Calibration` and n*(C) with intervals.
- :mod:`~isosim.calibrate.config_file`: the model config file it writes, read back with its ensemble.
"""
from .calibration import Calibration, calibrate
from .config_file import read_model_config
from .knobs import DEFAULT, KNOBS, Knob

__all__ = ["Calibration", "DEFAULT", "KNOBS", "Knob", "calibrate", "read_model_config"]
