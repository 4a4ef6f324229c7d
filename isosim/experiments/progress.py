"""Progress bars for long work (sweeps, ``reproduce``, ``figures``, ``lm validate``): tqdm.

``tqdm.auto`` draws a widget in a Jupyter notebook (a text bar there when ipywidgets is not
installed) and a text bar in a terminal, always on stderr. Whether a bar shows:
``progress=False`` never, ``True`` always, ``None`` (the default of the library functions and
of the command line without ``--quiet`` / ``--json``) when stderr is a terminal or the code
runs in a Jupyter kernel; otherwise (a log file, CI, ``nohup``) the same tqdm status is written
as one plain line every :data:`LOG_STEP` of the work (:class:`LogLines`).
"""
from __future__ import annotations

import contextlib
import sys
import warnings

with warnings.catch_warnings():  # tqdm.auto warns once when a notebook lacks ipywidgets
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm
from tqdm import tqdm as _plain_tqdm

__all__ = ["tqdm", "Bar", "progress_enabled", "progress_bar", "quiet_flag", "write_above", "LogLines", "note_compiling"]

#: without a terminal, a progress line is written each time this share of the work is done
LOG_STEP = 0.05


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


class Bar(tqdm):
    """tqdm.auto's bar without tqdm's monitor thread (``monitor_interval = 0``; tqdm starts that
    thread with its first bar, even a disabled one, and leaves it running). The bars here advance
    as work ends and need no watchdog, and a thread left running would keep
    :func:`isosim.experiments.executors.fork_context` from forking the analyses that follow a
    sweep (a fork is safe only from a process with one thread), so they would run one after the
    other."""

    monitor_interval = 0


class LogLines(_plain_tqdm):
    """tqdm for a stream that is not a terminal: its status (``desc: 40% 4/10 [elapsed<left, rate]``)
    as one line each time another :data:`LOG_STEP` of the total is done, and at the end; no
    carriage returns, no bar (and, like :class:`Bar`, no monitor thread)."""

    monitor_interval = 0

    def __init__(self, *args, file=None, **kwargs):
        self._out = file or sys.stderr  # tqdm's own writes (carriage returns, the closing newline) go nowhere
        self._step, self._logged = -1, -1
        kwargs.update(ncols=0, mininterval=0, miniters=1, dynamic_ncols=False)
        super().__init__(*args, file=_Discard(), **kwargs)

    def display(self, msg=None, pos=None):
        steps = round(1 / LOG_STEP)
        step = self.n * steps // self.total if self.total else self.n
        finished = bool(self.total) and self.n >= self.total
        if self.n == self._logged or (step <= self._step and not finished):
            return True
        self._step, self._logged = step, self.n
        self._out.write(self.__str__().strip() + "\n")
        self._out.flush()
        return True


class _Discard:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def progress_bar(total: int, desc: str, progress: bool | None = None, unit: str = "run", **kwargs) -> tqdm:
    """A :class:`Bar` of ``total`` units on stderr, disabled by :func:`progress_enabled` (a disabled
    bar accepts every call and draws nothing); with ``progress=None`` and no terminal, a
    :class:`LogLines` that writes a plain line every few percent."""
    if progress is None and not progress_enabled(None) and total > 0:
        return LogLines(total=total, desc=desc, unit=unit, file=sys.stderr, **kwargs)
    return Bar(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
               disable=not progress_enabled(progress) or total <= 0, **kwargs)


def note_compiling(progress: bool | None = None) -> bool:
    """Say on stderr that the simulation kernels are being compiled, when Numba's on-disk cache
    does not hold them yet (the first run after an install or an update) and ``progress`` is
    not False. Returns whether they were missing."""
    from ..sim.run import kernels_cached

    if kernels_cached():
        return False
    if progress is not False:
        print("compiling the simulation kernels (once after an install or update, about 30 CPU-seconds; "
              "cached afterwards) ...", file=sys.stderr, flush=True)
    return True


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
