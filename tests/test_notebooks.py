"""The notebooks of notebooks/: each committed ``.ipynb`` is the executed form of its paired
jupytext source (``.py``, percent format), run top to bottom, with no forced backend.

Running them is nbmake's job: ``--nbmake`` in pyproject.toml's pytest options and
``notebooks`` in its test paths, so ``python -m pytest`` executes every notebook in a fresh
kernel (``notebooks/conftest.py`` sets the Agg backend through the environment).
``python notebooks/execute.py`` regenerates the committed notebooks from their sources.
"""
import json
import re
from pathlib import Path

import jupytext
import pytest

HERE = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(HERE.glob("*.ipynb"))
SOURCES = sorted(HERE.glob("[0-9][0-9]_*.py"))


def _cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def test_the_notebooks_and_their_sources_pair_up():
    prefixes = [p.name[:3] for p in NOTEBOOKS]
    assert prefixes == ["01_", "02_", "03_", "04_", "05_", "06_"], [p.name for p in NOTEBOOKS]
    assert [p.stem for p in SOURCES] == [p.stem for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_matches_its_paired_source(path):
    """The committed notebook and its source cannot drift: same cells, same text, paired."""
    source = path.with_suffix(".py")
    nb, src = jupytext.read(path), jupytext.read(source)
    assert _cells(nb) == _cells(src), (
        f"{path.name} differs from {source.name}: edit the .py and run python notebooks/execute.py {path.name[:2]}")
    for meta in (nb.metadata, src.metadata):
        assert meta["jupytext"]["formats"] == "ipynb,py:percent"
        assert meta["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed_in_order(path):
    """Executed once, top to bottom, in a fresh kernel (no hidden state), without errors, with
    figures inline, and with no backend forced by the notebook."""
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no inline figure"
    text = "".join("".join(c["source"]) for c in code)
    assert not re.search(r"matplotlib\.use\(|MPLBACKEND|%matplotlib|switch_backend", text)


def test_progress_bars_follow_the_terminal(capsys, monkeypatch):
    """Long work shows a tqdm.auto bar on stderr (a widget or text bar in a notebook): by
    default when stderr is a terminal or in a Jupyter kernel, plain lines otherwise; ``--quiet`` / ``--json``
    (``quiet_flag``) turn it off, ``progress=True`` forces it."""
    import sys

    from isosim.experiments import progress

    assert progress.progress_enabled(None) is False  # pytest captures stderr: not a terminal
    assert progress.quiet_flag(True) is False and progress.quiet_flag(False) is None
    with progress.progress_bar(3, "quiet", False) as bar:
        bar.update(3)
    assert capsys.readouterr().err == ""
    with progress.progress_bar(3, "logged", None) as bar:  # no terminal: plain lines, no bar
        bar.update(3)
    assert capsys.readouterr().err.splitlines()[-1].startswith("logged: 100% 3/3")
    with progress.progress_bar(3, "forced", True) as bar:
        bar.update(3)
    assert "forced" in capsys.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert progress.progress_enabled(None) is True
