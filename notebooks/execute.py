"""Regenerate the committed notebooks from their paired sources.

Each ``NN_name.py`` here (jupytext percent format, the file to edit and review) becomes
``NN_name.ipynb``, executed top to bottom in a fresh kernel with inline figures, outputs
saved, so that it reads on a repository page without running::

    python notebooks/execute.py           # every notebook
    python notebooks/execute.py 02 04     # some, by number or name prefix

Needs the ``test`` extra (jupytext, nbclient, ipykernel). ``tests/test_notebooks.py`` checks
that every committed notebook matches its source and was run in order; the notebooks
themselves run under pytest through nbmake (``python -m pytest notebooks``).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jupytext
import nbclient

HERE = Path(__file__).resolve().parent


def sources(prefixes: list[str]) -> list[Path]:
    found = sorted(p for p in HERE.glob("[0-9][0-9]_*.py"))
    if not prefixes:
        return found
    chosen = [p for p in found if any(p.stem.startswith(x) for x in prefixes)]
    if not chosen:
        raise SystemExit(f"no notebook source starts with {', '.join(prefixes)}: {[p.stem for p in found]}")
    return chosen


def execute(source: Path) -> float:
    nb = jupytext.read(source)
    for i, cell in enumerate(nb.cells):  # stable ids: a rerun changes only what the code changed
        cell["id"] = f"cell-{i:02d}"
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                            coalesce_streams=True, resources={"metadata": {"path": str(HERE)}}).execute()
    seconds = time.perf_counter() - start
    jupytext.write(nb, source.with_suffix(".ipynb"))
    return seconds


def main(argv: list[str]) -> int:
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend draws the committed figures
    for source in sources(argv):
        seconds = execute(source)
        print(f"{source.with_suffix('.ipynb').name}: executed in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
