"""Experiments as data: sweep specs, executors (local, Dask, Ray), the resumable result store,
and the benchmarks of the kernel and the sweeps."""
