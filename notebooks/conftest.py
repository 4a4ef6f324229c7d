"""pytest runs the notebooks here through nbmake (``--nbmake`` in pyproject.toml); their
kernels inherit this process's environment, so figures go to matplotlib's Agg backend (no
display, nothing rendered inline). The notebooks themselves force no backend."""
import os

os.environ.setdefault("MPLBACKEND", "Agg")
