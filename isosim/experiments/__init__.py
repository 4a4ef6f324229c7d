"""Experiments as data: sweep specs and their registry, executors (local, Dask, Ray), the
resumable result store, the study's findings and ``isosim reproduce``."""
