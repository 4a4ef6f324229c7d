"""isosim works without PyTorch: nothing outside isosim.lm imports it, and ``isosim lm`` says
in one line how to install it."""
import subprocess
import sys

CODE = """
import sys
sys.modules["torch"] = None  # as if torch were not installed
import isosim, isosim.cli as cli
assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
if "lm" not in cli.SUBCOMMANDS:
    cli.SUBCOMMANDS = cli.SUBCOMMANDS + ("lm",)
cli.build_parser()
sys.exit(cli.main(["lm", "validate", "--quick", "--out", "unused-dir"]))
"""


def test_isosim_without_torch():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and 'pip install -e ".[lm]"' in res.stderr
