"""One ``concurrent.futures``-style executor for every backend.

``local`` is a process pool; ``dask`` connects a ``dask.distributed`` client to the
scheduler at ``address`` (or starts a local cluster); ``ray`` does the same with Ray.
Every executor has ``submit(fn, *args) -> concurrent.futures.Future`` and ``workers``.

Starting a cluster edits the caller's ``os.environ``: Dask's local cluster sets
``MALLOC_TRIM_THRESHOLD_`` (which also fixes glibc's mmap threshold, so every large array is
mapped and unmapped afresh: two to three times the CPU time in any process started later),
one-thread BLAS settings and ``PYTHONHASHSEED``; Ray sets ``PYTHONBREAKPOINT`` and ``RAY_*``.
:func:`make_executor` puts the environment back as it found it when the executor closes.
"""
from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..errors import IsosimInputError

BACKENDS = ("local", "dask", "ray")


class _Local:
    def __init__(self, workers: int):
        self.workers = workers
        self._pool = ProcessPoolExecutor(max_workers=workers)

    def submit(self, fn: Callable, *args: Any) -> Future:
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class _Dask:
    def __init__(self, workers: int, address: str | None):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise IsosimInputError('the dask backend needs the dist extra: pip install -e ".[dist]"') from None
        self._cluster = None
        if address:
            self._client = Client(address, timeout="30s")
        else:
            self._cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=":0", host="127.0.0.1")
            self._client = Client(self._cluster)
        info = self._client.scheduler_info()
        self.workers = max(1, sum(w.get("nthreads", 1) for w in info.get("workers", {}).values()))
        self._executor = self._client.get_executor(pure=False)

    def submit(self, fn: Callable, *args: Any) -> Future:
        return self._executor.submit(fn, *args)

    def close(self) -> None:
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


class _Ray:
    def __init__(self, workers: int, address: str | None):
        try:
            import ray
        except ImportError:
            raise IsosimInputError('the ray backend needs the dist extra: pip install -e ".[dist]"') from None
        self._ray = ray
        self._owned = not ray.is_initialized()
        if self._owned:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
                         _node_ip_address="127.0.0.1")
        self.workers = max(1, int(ray.cluster_resources().get("CPU", workers)))
        self._remote: dict[Callable, Any] = {}

    def submit(self, fn: Callable, *args: Any) -> Future:
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = self._ray.remote(num_cpus=1)(fn)
        return remote.remote(*args).future()

    def close(self) -> None:
        if self._owned:
            self._ray.shutdown()


def check_executor_args(backend: str = "local", workers: int | None = None) -> None:
    """Raise :class:`IsosimInputError` for an unknown backend or fewer than one worker (callers
    check before they create any file)."""
    if backend not in BACKENDS:
        raise IsosimInputError(f"unknown backend {backend!r}: choose from {', '.join(BACKENDS)}")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise IsosimInputError(f"--workers must be an integer >= 1, got {workers!r}")


@contextmanager
def environment_kept() -> Iterator[None]:
    """Restore ``os.environ`` on exit: keys added inside are removed, changed or removed ones get
    their old values back."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in set(os.environ) - set(saved):
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


@contextmanager
def make_executor(backend: str = "local", address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """The executor of ``backend`` with ``workers`` workers (default: all cores), closed on exit,
    with the caller's environment as it was before (see the module's docstring)."""
    check_executor_args(backend, workers)
    workers = workers or os.cpu_count() or 1
    with environment_kept():
        ex = {"local": lambda: _Local(workers), "dask": lambda: _Dask(workers, address),
              "ray": lambda: _Ray(workers, address)}[backend]()
        try:
            yield ex
        finally:
            ex.close()


def fork_context():
    """The ``fork`` start method where it is safe: on Linux, from a process whose only Python
    thread is this one (not in a notebook kernel, a server or a threaded worker, where another
    thread may hold a lock at the fork); else None."""
    import multiprocessing
    import sys
    import threading

    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return None
    if threading.active_count() > 1:
        return None
    return multiprocessing.get_context("fork")


#: what :func:`fork_map`'s workers call (set in the parent just before they fork)
_FORK_FN: Callable | None = None


def _fork_call(item):
    return _FORK_FN(item)


def fork_map(fn: Callable, items, workers: int) -> list:
    """``[fn(x) for x in items]``, in up to ``workers`` forked processes where forking is safe
    (:func:`fork_context`; ``fn`` and what it reads need not be picklable, only its results),
    else one after the other in this process. Items are handed out in order, one at a time, so
    put the longest first."""
    global _FORK_FN
    items = list(items)
    context = fork_context() if workers > 1 and len(items) > 1 else None
    if context is None:
        return [fn(x) for x in items]
    _FORK_FN = fn
    try:
        with ProcessPoolExecutor(min(workers, len(items)), mp_context=context) as ex:
            return list(ex.map(_fork_call, items))
    finally:
        _FORK_FN = None
