"""The simulation core: configuration, surrogate models, problem populations, the Numba
kernels and their NumPy twin, one run (``simulate``) and the exact metrics.

Nothing here knows about sweeps, stores or fits; every layer above builds on it.
"""
