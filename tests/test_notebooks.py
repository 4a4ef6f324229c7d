"""Every notebook's code cells run top to bottom without error (no Jupyter needed)."""
import json
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    nb = json.loads(path.read_text())
    namespace: dict = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            exec(compile(src, f"{path.name}", "exec"), namespace)
