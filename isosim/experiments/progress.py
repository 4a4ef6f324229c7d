"""Progress bars for long work (sweeps, ``reproduce``, ``figures``, ``lm validate``): tqdm.

``tqdm.auto`` draws a widget in a Jupyter notebook (a text bar there when ipywidgets is not
installed) and a text bar in a terminal, always on stderr. Whether a bar shows:
``progress=False`` never, ``True`` always, ``None`` (the default of the library functions and
of the command line without ``--quiet`` / ``--json``) when stderr is a terminal or the code
runs in a Jupyter kernel.
"""
from __future__ import annotations

import contextlib
import sys
import warnings

with warnings.catch_warnings():  # tqdm.auto warns once when a notebook lacks ipywidgets
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm

__all__ = ["tqdm", "progress_enabled", "progress_bar", "quiet_flag", "write_above"]


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # pragma: no cover - an IPython without get_ipython
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_enabled(progress: bool | None = None) -> bool:
    """``progress`` itself, or for ``None``: is stderr a terminal, or is this a Jupyter kernel?"""
    if progress is not None:
        return bool(progress)
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        tty = False
    return tty or _in_notebook()


def progress_bar(total: int, desc: str, progress: bool | None = None, unit: str = "run", **kwargs) -> tqdm:
    """A tqdm bar of ``total`` units on stderr, disabled by :func:`progress_enabled`
    (a disabled bar accepts every call and draws nothing)."""
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                disable=not progress_enabled(progress) or total <= 0, **kwargs)


def quiet_flag(quiet: bool) -> bool | None:
    """The ``progress`` argument for a command with ``--quiet`` / ``--json``: off, or automatic."""
    return False if quiet else None


@contextlib.contextmanager
def write_above(bar: tqdm | None):
    """Clear ``bar`` while the block prints a line of text, then redraw it below."""
    if bar is None or bar.disable:
        yield
        return
    with tqdm.external_write_mode(file=sys.stderr):
        yield
