"""The README's console blocks, run as shown and compared with what the README prints.

Every ```console block of README.md is a list of ``$ command`` lines, each followed by the
output the README shows for it. A block whose output has no ``...`` line is compared exactly;
an abridged one (lines with ``...``) line by line in order: every shown line must be an output
line, or a part of one (the README wraps long prose lines), and the pieces around a ``...`` must
appear in that order. Optional parts written ``[--flag X]`` and trailing ``# comments`` are left
out of the command. Blocks that take over a minute are listed in LONG with the reason, and every
other block runs, so that a new block cannot go unchecked.

After a change that moves the numbers of an exactly compared block (a new default model),
``python tests/test_readme.py`` rewrites those outputs in README.md from the commands.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: blocks not run, by their first command's first words, with why
LONG = {
    "isosim sweep my-q1.toml": "runs an 8-run sweep of 4e6 rollouts per run (minutes on 2 cores), "
                               "and needs the spec file the README shows beside it",
}


@dataclass
class Step:
    command: str  # as the README writes it
    shown: list[str]  # the output lines the README shows


@dataclass
class Block:
    start: int  # index of the fence line in README.md
    steps: list[Step]

    @property
    def key(self) -> str:
        return " ".join(self.steps[0].command.split()[:3])

    @property
    def abridged(self) -> bool:
        return any("..." in line for s in self.steps for line in s.shown)


def console_blocks(text: str) -> list[Block]:
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start, steps = i, []
            i += 1
            while lines[i].strip() != "```":
                if lines[i].startswith("$ "):
                    steps.append(Step(lines[i][2:], []))
                elif steps:
                    steps[-1].shown.append(lines[i])
                i += 1
            blocks.append(Block(start, steps))
        i += 1
    return blocks


def runnable(command: str) -> list[str]:
    """The command as run: without ``[optional parts]`` and ``# comments``; ``isosim`` as
    ``python -m isosim``."""
    command = re.sub(r"\s+#.*$", "", command)
    command = re.sub(r"\s*\[[^\]]*\]", "", command)
    argv = command.split()
    assert argv[0] == "isosim", command
    return [sys.executable, "-m", "isosim", *argv[1:]]


def run(command: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run(runnable(command), capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, f"{command}: exit {r.returncode}\n{r.stderr[-2000:]}"
    return r.stdout


def check_abridged(shown: list[str], output: str) -> None:
    """Every shown line (its pieces around ``...``) in the output, in order (see the module docstring)."""
    out = output.splitlines()
    at = 0
    for line in shown:
        for piece in (p.strip() for p in line.split("...")):
            if not piece:
                continue
            j = next((k for k in range(at, len(out)) if piece in out[k]), None)
            assert j is not None, f"README line not printed (in this order): {piece!r}\noutput:\n{output}"
            at = j


BLOCKS = console_blocks(README.read_text())


def test_every_console_block_is_run_or_listed_as_long():
    keys = [b.key for b in BLOCKS]
    assert len(keys) >= 4 and len(set(keys)) == len(keys)
    assert set(LONG) <= set(keys), f"LONG names a block the README no longer has: {set(LONG) - set(keys)}"


def test_abridged_check_catches_a_changed_number():
    output = "a 1\nrecommended: n = 128, B_problem = 32\nR^2 0.991; saturation 9.09\n"
    check_abridged(["recommended: n = 128, ...", "R^2 0.991; saturation 9.09"], output)
    with pytest.raises(AssertionError, match="not printed"):
        check_abridged(["R^2 0.990; saturation 9.09"], output)
    with pytest.raises(AssertionError, match="not printed"):  # out of order
        check_abridged(["R^2 0.991", "recommended: n = 128"], output)
    assert runnable("isosim plan --b-max 4096 [--metric M] [--json]   # note")[-2:] == ["--b-max", "4096"]


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.key not in LONG], ids=lambda b: b.key)
def test_readme_console_block_prints_what_the_readme_shows(block):
    for step in block.steps:
        output = run(step.command)
        if block.abridged:
            check_abridged(step.shown, output)
        else:
            assert output.rstrip("\n").splitlines() == step.shown, (
                f"{step.command} now prints:\n{output}\n(python tests/test_readme.py rewrites the README's "
                "exactly compared blocks)")


def test_readme_counts_the_reproductions_sweeps_and_runs():
    """The README's count of the sweeps and runs of ``isosim reproduce`` (and ``--quick``) is the
    registry's: every finding sweep, every run, and the distinct ones (by the run key that the sweep
    driver simulates once)."""
    import re

    from isosim.study.findings import sweep_specs

    m = re.search(r"(\d+) sweeps, (\d+) runs of\s+which (\d+) distinct, (\d+) and (\d+) with `--quick`",
                  README.read_text())
    assert m, "the README no longer counts the reproduction's sweeps and runs"
    counts = []
    for scale in ("full", "quick"):
        specs = sweep_specs(scale)
        runs = [r.key for s in specs.values() for r in s.runs(0)]
        counts.append((len(specs), len(runs), len(set(runs))))
    (n_sweeps, n_runs, n_distinct), (_, q_runs, q_distinct) = counts
    assert tuple(int(x) for x in m.groups()) == (n_sweeps, n_runs, n_distinct, q_runs, q_distinct)


def regenerate() -> list[str]:
    """Rewrite the output of every exactly compared, runnable block of README.md from its commands."""
    lines = README.read_text().splitlines()
    changed = []
    for block in reversed(console_blocks("\n".join(lines))):
        if block.key in LONG or block.abridged:
            continue
        body = []
        for step in block.steps:
            body += [f"$ {step.command}", *run(step.command).rstrip("\n").splitlines()]
        end = block.start + 1 + sum(1 + len(s.shown) for s in block.steps)
        if lines[block.start + 1:end] != body:
            lines[block.start + 1:end] = body
            changed.append(block.key)
    README.write_text("\n".join(lines) + "\n")
    return changed


if __name__ == "__main__":
    print("rewrote: " + (", ".join(regenerate()) or "nothing (every block already matches)"))


#: what the shipped text must not say: files outside the repository (the study is cited as the
#: paper), the project's issue numbers, and the computer a measurement was made on as "this machine"
OFF_LIMITS = re.compile(r"PAPER_NOTES|\.\./shared/|\bissues? #?\d+|this machine|project's machines", re.IGNORECASE)


def test_shipped_text_cites_the_paper_and_speaks_of_the_product():
    files = [README, *ROOT.glob("docs/**/*.md"), *ROOT.glob("paper_figures/*.md"), *ROOT.glob("isosim/**/*.py"),
             *ROOT.glob("paper_figures/**/*.py"), *ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("tests/*.py")]
    hits = [f"{f.relative_to(ROOT)}:{i}: {m.group(0)}" for f in files
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1)
            for m in OFF_LIMITS.finditer(line) if f != Path(__file__).resolve()]
    assert not hits, "\n".join(hits)
