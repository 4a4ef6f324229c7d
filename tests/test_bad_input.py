"""Bad input touches nothing: every subcommand, every option, bad values (property-based).

The rule (``isosim.errors``): a user mistake gets exactly one line on stderr and exit code 2,
before any file is created; nothing already stored changes; no traceback. Each test below
takes one option of one subcommand, draws bad values for it (negative, zero, NaN, inf, huge,
wrong type, a missing input file, an output path that cannot be written: under a regular
file, in a read-only folder, a folder where a file goes or the reverse), appends it to a
valid, cheap command line and runs ``isosim.cli.main`` in-process inside a scratch folder
that may already hold the output. The functions where the work starts (simulate, the sweep
executor, the planner's predictions, the fit, the theory document, the LM validation, the
benchmarks) are replaced by a sentinel: a bad value must be refused before any of them
runs (so no bad value is ever run), and the scratch folder must be byte-for-byte as before.
``test_the_valid_base_commands_reach_the_work`` checks that each base command line is
valid, so that the sentinel is what a missed check would hit. As root a read-only folder is
writable; then ``os.access`` is made to answer as it would for a user.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isosim.cli import build_parser, main
from isosim.sim import advantages
from isosim.sim.config import _SECTION_TYPES

I64 = 2**63


class WorkStarted(Exception):
    """Raised by the sentinel that stands in for the work of a subcommand."""


def _sentinel(*args, **kwargs):
    raise WorkStarted


def _guards() -> list[str]:
    names = ["isosim.sim.run.simulate", "isosim.experiments.executors.make_executor",
             "isosim.experiments.bench.run_benchmarks", "isosim.plan.planner.predict", "isosim.theory.document",
             "isosim.analysis.fit.analyse_runs", "isosim.calibrate.calibration.calibrate"]
    try:
        import torch  # noqa: F401
    except ImportError:  # without torch, ``isosim lm validate`` refuses before any work
        return names
    return names + ["isosim.lm.validate.run_validate", "isosim.lm.bench.lm_benchmark"]


def _optional_guards() -> list[str]:
    """Work that exists only in some versions of the tree (the theory figures)."""
    try:
        import isosim.theory.figures  # noqa: F401
    except ImportError:
        return []
    return ["isosim.theory.figures.write_figure"]


GUARDS = _guards() + _optional_guards()
# Import every guarded module (and build the parser, which imports the CLI) before any patch:
# a module first imported while a patch is active would bind the sentinel for good (for example
# ``from ..sim.run import simulate`` at the top of isosim.experiments.bench), and later tests
# would meet it.
for _name in GUARDS:
    importlib.import_module(_name.rsplit(".", 1)[0])

# --- the scratch folder: inputs, and what a bad path points at -------------------------------

RUNS_CSV = "run,n,B_problem,compute,avg@4\n" + "".join(
    f"r{n}-{s},{n},8,{c * n},{0.1 + 0.05 * k + 0.01 * s}\n"
    for n in (2, 4) for s in (0, 1) for k, c in enumerate((100, 200, 400, 800)))
FILES = {
    "rates.csv": "pass_rate\n0.1\n0.5\n0.2\n0.05\n0.7\n0.3\n0.4\n0.0\n",
    "runs.csv": RUNS_CSV,
    "plain.txt": "a regular file\n",
    "garbage.csv": "a;b;c\n\"unclosed\n\x00\x01",
    "bad_rates.csv": "pass_rate\n0.5\n1.3\n",
    "nan_rates.csv": "pass_rate\n0.5\nnan\n",
    "bad.toml": "[allocation\nn = = 3\n",
    "unknown.toml": "[allocation]\nbogus = 3\n",
    "spec_bad.toml": "id = 'x'\nquestion = 'Q9'\n",
    "existing/keep.txt": "stored results\n",
    "one_n.csv": "\n".join(line for line in RUNS_CSV.splitlines() if not line.startswith("r4-")) + "\n",
    "nan_runs.csv": "\n".join(line.rsplit(",", 1)[0] + ",nan" if i == 2 else line
                               for i, line in enumerate(RUNS_CSV.splitlines())) + "\n",
    "good.toml": "[model]\nkind = 'strategies'\n",
    "bad_ensemble.toml": "[model]\nkind = 'strategies'\n#@ [[calibration.ensemble]]\n#@ lr = nan\n",
    "unknown_knob.toml": "[model]\nkind = 'strategies'\n[[calibration.ensemble]]\nbogus = 1.0\n",
}
DIRS = ("adir", "existing", "ro")


def _read_only_works(folder: Path) -> bool:
    """Whether a read-only folder refuses writes here (not for root)."""
    probe = folder / "ro" / ".probe"
    try:
        probe.write_text("x")
    except OSError:
        return True
    probe.unlink()
    return False


def make_scratch(root: Path, existing_out: bool) -> Path:
    """The scratch folder: the inputs, what bad paths point at, and (``existing_out``) stored outputs."""
    for d in DIRS:
        (root / d).mkdir()
    for name, text in FILES.items():
        (root / name).write_text(text)
    if existing_out:  # outputs that are stored already must come through unchanged
        for name in ("out.csv", "out.png", "out.md", "out.toml"):
            (root / name).write_bytes(b"stored bytes \x00\xff")
        (root / "outdir").mkdir()
        (root / "outdir" / "keep.bin").write_bytes(b"stored \x00")
    (root / "ro").chmod(0o555)
    return root


@contextlib.contextmanager
def scratch(existing_out: bool):
    """A fresh scratch folder, the working directory while it is open."""
    with tempfile.TemporaryDirectory() as tmp:
        root = make_scratch(Path(tmp), existing_out)
        try:
            with contextlib.chdir(root):
                yield root
        finally:
            (root / "ro").chmod(0o755)


@pytest.fixture(scope="module")
def scratches(tmp_path_factory):
    """One scratch folder without and one with stored outputs, shared by the examples (a bad
    value changes nothing, and the test checks that it did not)."""
    roots = {e: make_scratch(tmp_path_factory.mktemp("scratch"), e) for e in (False, True)}
    yield roots
    for root in roots.values():
        (root / "ro").chmod(0o755)


def snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root) + "/"] = None
        for f in filenames:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = Path(p).read_bytes()
    return out


_PARSER = []


def _cached_parser():
    if not _PARSER:
        _PARSER.append(build_parser())
    return _PARSER[0]


_cached_parser()


def _deny_writes_under(folder: Path):
    """``os.access`` as if ``folder`` were read-only (root may write to any folder)."""
    real = os.access
    folder = folder.resolve()

    def access(path, mode, *args, **kwargs):
        p = Path(path).resolve()
        if mode & os.W_OK and (p == folder or folder in p.parents):
            return False
        return real(path, mode, *args, **kwargs)
    return mock.patch("os.access", access)


def run_cli(argv: list[str], read_only: Path | None = None) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if read_only is not None:
            stack.enter_context(_deny_writes_under(read_only))
        stack.enter_context(mock.patch("isosim.cli.build_parser", _cached_parser))  # parsing reuses one parser
        for name in GUARDS:
            stack.enter_context(mock.patch(name, _sentinel))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(contextlib.redirect_stdout(out))
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2 if exc.code else 0
    return code, err.getvalue()


# --- bad values ---------------------------------------------------------------------------------

WORDS = st.sampled_from(["abc", "", " ", "1,2", "0x10", "1e", "None", "true", "2**", "**2", "1_0x", "--"])
NAN_INF = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "2**5000"])
NON_INTEGER = st.floats(min_value=-1e6, max_value=1e6).filter(lambda x: not x.is_integer()).map(repr)
HUGE_INT = st.integers(min_value=I64, max_value=2**256).map(str) | st.sampled_from(["1e19", "2**64", "9e30"])


def bad_int(lo: int, hi: int | None = None) -> st.SearchStrategy[str]:
    """An integer option whose valid values are lo..hi (hi: below 2**63)."""
    above = HUGE_INT if hi is None else st.integers(min_value=hi + 1, max_value=2**80).map(str) | HUGE_INT
    return (st.integers(min_value=-2**70, max_value=lo - 1).map(str) | above | NON_INTEGER | NAN_INF | WORDS)


def bad_float(lo: float | None = None, hi: float | None = None, lo_open=False, hi_open=False,
              huge: float | None = None) -> st.SearchStrategy[str]:
    """A number option, finite, in [lo, hi] (an open end excludes it); ``huge``: also too big from there."""
    parts = [NAN_INF, WORDS]
    if lo is not None:
        parts.append(st.floats(max_value=lo, allow_nan=False, allow_infinity=False).filter(
            lambda x: x < lo or (x == lo and not lo_open)).map(repr))
    if hi is not None:
        parts.append(st.floats(min_value=hi, allow_nan=False, allow_infinity=False).filter(
            lambda x: x > hi or (x == hi and not hi_open)).map(repr))
    if huge is not None:
        parts.append(st.floats(min_value=huge, allow_nan=False, allow_infinity=False).map(repr))
    return st.one_of(parts)


def bad_choice(is_valid) -> st.SearchStrategy[str]:
    return (st.text("abcdefghijklmnopqrstuvwxyz-_=@0123456789", max_size=10) | WORDS | NAN_INF).filter(
        lambda t: not is_valid(t))


def bad_int_list(lo: int) -> st.SearchStrategy[str]:
    return st.lists(bad_int(lo).filter(lambda t: "," not in t and t.strip()), min_size=1, max_size=3).map(
        lambda xs: ",".join(["1", *xs])) | st.sampled_from(["a,b", "1,,x", "1;2", "nan"])


MISSING_FILE = st.sampled_from(["missing.csv", "adir", "ro/missing.csv", "plain.txt/x.csv", ""])
# an output file: under a regular file, a folder, in a read-only folder, a missing folder under a file
BAD_OUT_FILE = st.sampled_from(["plain.txt/out{s}", "adir", "ro/out{s}", "plain.txt/sub/out{s}", "existing",
                                "ro/new/out{s}", ""])
BAD_OUT_DIR = st.sampled_from(["plain.txt/out", "plain.txt", "ro/out", "ro", "plain.txt/a/b", "ro/a/b", ""])


@dataclass(frozen=True)
class Case:
    base: tuple[str, ...]
    flag: str  # "" for a positional argument, appended last
    values: st.SearchStrategy[str]
    suffix: str = ""  # the suffix an output path takes ({s} in BAD_OUT_FILE)

    @property
    def id(self) -> str:
        return " ".join(self.base[:2] if self.base[0] == "lm" else self.base[:1]) + " " + (self.flag or "ARG")


SIM = ("simulate", "--budget=1e4", "--train-size=64", "--val-size=8", "--n-evals=1", "--out=out.csv")
SWEEP = ("sweep", "q1-easy-testing", "--out=outdir", "--quiet")
REPRODUCE = ("reproduce", "--quick", "--out=outdir", "--json", "--n-boot=2")
FIGURES = ("figures", "--quick", "--root=outdir", "--out=outdir/figs", "--json")
FIT = ("fit", "runs.csv", "--n-boot=0", "--plot=out.png")
PLAN = ("plan", "--pass-rates=rates.csv", "--budget=1e4", "--b-max=64")
# runs.csv: n = 2 and 4, two seeds each, B_problem 8 (the 8 problems of rates.csv), up to 3200 rollouts
CALIBRATE = ("calibrate", "runs.csv", "--pass-rates=rates.csv", "--metric=avg@4", "--out=out.toml", "--json")
THEORY = ("theory", "--out=out.md")
LM = ("lm", "validate", "--quick", "--out=outdir", "--json")
BENCH = ("bench", "--json", "--no-sweep")


def _valid_advantage(text: str) -> bool:
    try:
        advantages.get(text)
        return True
    except ValueError:
        return False


# the valid values of every config field (a field added later must be listed here)
CONFIG_DOMAINS = {
    "population": {
        "preset": bad_choice(lambda t: t in ("easy", "hard", "very-easy", "extremely-hard", "mixture")),
        "train_size": bad_int(0), "val_size": bad_int(1), "measure": bad_choice(lambda t: t in ("exact", "sampled")),
        "measure_samples": bad_int(1), "seed": bad_int(0),
        "length_model": bad_choice(lambda t: t in ("constant", "lognormal")),
        "length_mean": bad_float(0, lo_open=False), "length_sigma": bad_float(0, lo_open=True),
    },
    "model": {
        "kind": bad_choice(lambda t: t in ("strategies", "features", "tabular")),
        "n_strategies": bad_int(2, 4096), "rank": bad_int(0, 256), "dim": bad_int(1, 4096),
        "generality_a": bad_float(0), "generality_b": bad_float(0),
        "prior_scale": bad_float(0, lo_open=True), "embed_scale": bad_float(0, lo_open=True),
        "skill_link": bad_float(0, 1, lo_open=True, hi_open=True), "common": bad_float(0, 1, True, True),
        "execution_a": bad_float(0, lo_open=True), "execution_b": bad_float(0),
        "confidence_floor": bad_float(0, 1, lo_open=False, hi_open=True), "confidence_knee": bad_float(0),
        "world_draw": bad_choice(lambda t: t in ("random", "stratified")),
        "logit_mean": bad_float(), "logit_std": bad_float(0, lo_open=True),
        "shared": bad_float(0, lo_open=True), "local": bad_float(0, lo_open=True),
        "local_share": bad_choice(lambda t: t.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off")),
    },
    "algo": {
        "advantage": bad_choice(_valid_advantage), "std_eps": bad_float(0, lo_open=True),
        "baseline_n": bad_int(0), "kl_coef": bad_float(0, lo_open=True), "entropy_coef": bad_float(0, lo_open=True),
        "zero_var_filter": bad_choice(lambda t: t.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no",
                                                                      "off")),
        "optimizer": bad_choice(lambda t: t in ("sgd", "adam", "adamw")), "lr": bad_float(0),
        "lr_rule": bad_choice(lambda t: t in ("constant", "linear", "sqrt")), "warmup": bad_int(0),
        "beta1": bad_float(0, 1, lo_open=True), "beta2": bad_float(0, 1, lo_open=True),
        "adam_eps": bad_float(0, lo_open=True), "weight_decay": bad_float(0, lo_open=True),
        "drift": bad_float(0, lo_open=True),
    },
    # budget: > 0 (steps are not given), and n * B_problem * M below 2**63 rollouts
    "allocation": {"n": bad_int(1), "b_problem": bad_int(1, 64), "steps": bad_int(0),
                   "budget": bad_float(0, huge=float(I64))},
    "eval": {"ks": bad_int_list(1), "n_evals": bad_int(1), "every": bad_int(0), "at_steps": bad_int_list(0),
             "snapshot_steps": bad_int_list(0), "sampled": bad_int(0), "hist_bins": bad_int(0, 100),
             "train_split": bad_choice(lambda t: t.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no",
                                                                      "off"))},
}
_SKIPPED = {("population", "mixture_weights"), ("population", "val_mixture_weights"), ("population", "path"),
            ("population", "data_digest")}
_RENAMES = {("model", "kind"): "--model", ("population", "seed"): "--data-seed"}


def _config_cases() -> list[Case]:
    cases = []
    for section, cls in _SECTION_TYPES.items():
        for f in dataclasses.fields(cls):
            if (section, f.name) in _SKIPPED:
                continue
            flag = _RENAMES.get((section, f.name), "--" + f.name.replace("_", "-"))
            cases.append(Case(SIM, flag, CONFIG_DOMAINS[section][f.name]))
    return cases


MIXTURE = st.sampled_from(["hard", "hard=", "medium=1", "hard=-1", "hard=0", "hard=nan", "hard=inf", "=1",
                           "hard=0.5,", "hard=abc", ""])
EXECUTOR = [("--workers", bad_int(1, 1024)), ("--backend", bad_choice(lambda t: t in ("local", "dask", "ray")))]

CASES = [
    *_config_cases(),
    Case(SIM, "--seed", bad_int(0)),
    Case(SIM, "--out", BAD_OUT_FILE | st.sampled_from(["out.txt", "out", "out.csv.tmp"]), ".csv"),
    Case(SIM, "--config", MISSING_FILE | st.sampled_from(["bad.toml", "unknown.toml", "garbage.csv"])),
    Case(SIM, "--pass-rates", MISSING_FILE | st.sampled_from(["garbage.csv", "bad_rates.csv", "nan_rates.csv",
                                                              "plain.txt"])),
    Case(SIM, "--mixture", MIXTURE), Case(SIM, "--val-mixture", MIXTURE),
    Case(SWEEP, "--out", BAD_OUT_DIR), Case(SWEEP, "--root-seed", bad_int(0)),
    *[Case(SWEEP, f, v) for f, v in EXECUTOR],
    Case(("sweep", "--out=outdir", "--quiet"), "", MISSING_FILE | st.sampled_from(
        ["spec_bad.toml", "garbage.csv", "q9-nothing", "bad.toml"])),
    Case(("sweep", "status"), "", MISSING_FILE | st.sampled_from(["existing", "plain.txt"])),
    Case(REPRODUCE, "--out", BAD_OUT_DIR), Case(REPRODUCE, "--n-boot", bad_int(0)),
    *[Case(REPRODUCE, f, v) for f, v in EXECUTOR],
    Case(FIGURES, "--root", BAD_OUT_DIR), Case(FIGURES, "--out", BAD_OUT_DIR),
    Case(FIGURES, "--only", bad_int(1, 12).filter(lambda t: t != "1,2") | st.sampled_from(
        ["1,99", "0", "13", "1,a", "1,-1", "", ",", "1.5,2"])),
    *[Case(FIGURES, f, v) for f, v in EXECUTOR],
    Case(FIT, "", MISSING_FILE | st.sampled_from(["garbage.csv", "rates.csv", "plain.txt", "existing"])),
    Case(FIT, "--metric", st.sampled_from(["avg@8", "", "run", "nan"])),
    Case(FIT, "--bucket", bad_float(0, lo_open=True)), Case(FIT, "--n-boot", bad_int(0)),
    Case(FIT, "--seed", bad_int(0)),
    Case(FIT, "--plot", BAD_OUT_FILE | st.sampled_from(["out.txt", "out.csv", "out"]), ".png"),
    Case(PLAN, "--pass-rates", MISSING_FILE | st.sampled_from(["garbage.csv", "bad_rates.csv", "nan_rates.csv"])),
    Case(PLAN, "--budget", bad_float(2, lo_open=False, huge=float(I64))), Case(PLAN, "--b-max", bad_int(2)),
    Case(PLAN, "--metric", st.sampled_from(["avg@0", "avg@-1", "pass@x", "foo", "", "best@", "avg@1e9", "avg@4x"])),
    Case(PLAN, "--model", bad_choice(lambda t: t in ("strategies", "features", "tabular"))),
    Case(PLAN + ("--verify",), "--seeds", bad_int(1)),
    Case(PLAN, "--model-config", MISSING_FILE | st.sampled_from(["bad.toml", "unknown.toml", "garbage.csv",
                                                                 "bad_ensemble.toml", "unknown_knob.toml"])),
    Case(PLAN + ("--model-config=good.toml",), "--model", st.sampled_from(["strategies", "features", "tabular"])),
    Case(CALIBRATE, "", MISSING_FILE | st.sampled_from(["garbage.csv", "rates.csv", "plain.txt", "existing",
                                                        "one_n.csv", "nan_runs.csv"])),
    Case(CALIBRATE, "--pass-rates", MISSING_FILE | st.sampled_from(["garbage.csv", "bad_rates.csv", "nan_rates.csv",
                                                                    "plain.txt"])),
    Case(CALIBRATE, "--val-pass-rates", MISSING_FILE | st.sampled_from(["garbage.csv", "bad_rates.csv",
                                                                        "nan_rates.csv"])),
    # the pilots reach 3200 rollouts: a budget below that asks about less than they ran
    Case(CALIBRATE, "--budget", bad_float(3199.0, huge=float(I64)) | st.sampled_from(["3199", "1e3", "0"])),
    Case(CALIBRATE, "--metric", st.sampled_from(["avg@8", "", "run", "nan", "pass@4", "avg@0"])),
    Case(CALIBRATE, "--n", st.sampled_from(["", ",", "0", "-2", "4096", "2,x", "nan", "1.5"])),
    Case(CALIBRATE + ("--budget=4000",), "--n", st.sampled_from(["512", "1024,2048"])),
    Case(CALIBRATE, "--config", MISSING_FILE | st.sampled_from(["bad.toml", "unknown.toml", "garbage.csv",
                                                                "bad_ensemble.toml"])),
    Case(CALIBRATE, "--workers", bad_int(1, 64)),
    Case(CALIBRATE, "--knobs", st.sampled_from(["", ",", "nope", "lr,lr", "lr,,skill_link", "LR", "lr;local"])),
    Case(CALIBRATE, "--training-mode", st.sampled_from(["", "sometimes", "AUTO", "always"])),
    Case(CALIBRATE, "--out", BAD_OUT_FILE | st.sampled_from(["out.csv", "out", "out.json"]), ".toml"),
    Case(THEORY, "--out", BAD_OUT_FILE, ".md"),
    *([Case(("theory", "--figures=figs", "--quick"), "--only", st.sampled_from(["", ",", "0", "99", "nosuch", "1,x"])),
       Case(("theory", "--figures=figs", "--quick"), "--figures", BAD_OUT_DIR)] if _optional_guards() else []),
    Case(LM, "--out", BAD_OUT_DIR), Case(LM, "--threads", bad_int(1, 1024)),
    Case(LM, "--device", bad_choice(lambda t: t in ("cpu", "cuda"))),
    Case(BENCH, "--steps", bad_int(1)),
    Case(BENCH, "--device", bad_choice(lambda t: t in ("cpu", "cuda"))),
    Case(BENCH + ("--lm",), "--device", bad_choice(lambda t: t in ("cpu", "cuda"))),
]


def test_every_subcommand_has_cases():
    from isosim.cli import SUBCOMMANDS

    assert {c.base[0] for c in CASES} == set(SUBCOMMANDS)


def _argv(case: Case, value: str) -> list[str]:
    value = value.replace("{s}", case.suffix)
    if not case.flag:
        if case.base[0] in ("fit", "calibrate"):  # the positional argument comes first
            return [case.base[0], value, *case.base[2:]]
        return [*case.base, value]
    return [*case.base, f"{case.flag}={value}"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@settings(derandomize=True, max_examples=40, deadline=None)
@given(data=st.data())
def test_bad_value_one_line_exit_2_nothing_touched(scratches, case, data):
    value = data.draw(case.values, label="value")
    existing = data.draw(st.booleans(), label="outputs stored already")
    argv = _argv(case, value)
    root = scratches[existing]
    # as root, a read-only folder is writable: then os.access says what a user would be told
    ro = root / "ro" if value.startswith("ro") and not _read_only_works(root) else None
    before = snapshot(root)
    with contextlib.chdir(root):
        try:
            code, err = run_cli(argv, read_only=ro)
        except WorkStarted:
            pytest.fail(f"isosim {' '.join(argv)}: the work started; the bad value was not refused")
    after = snapshot(root)
    lines = err.strip().splitlines()
    assert code == 2, f"isosim {' '.join(argv)}: exit {code}, stderr {err!r}"
    assert len(lines) == 1 and lines[0].strip() and "Traceback" not in err, f"isosim {' '.join(argv)}: {err!r}"
    assert after == before, f"isosim {' '.join(argv)} changed the folder"


#: base command lines that are complete only with the positional argument their cases add
_NEED_POSITIONAL = {("sweep", "--out=outdir", "--quiet"), ("sweep", "status")}


@pytest.mark.parametrize("base", sorted({c.base for c in CASES} - _NEED_POSITIONAL), ids=" ".join)
def test_the_valid_base_commands_reach_the_work(base):
    """Every complete base command line is valid: it reaches the sentinel."""
    with scratch(existing_out=False):
        with pytest.raises(WorkStarted):
            run_cli(list(base))


@pytest.mark.parametrize("argv", [["simulate", "--n=nan"], ["fit", "missing.csv"],
                                  ["sweep", "q1-easy-testing", "--out=plain.txt/out"]])
def test_bad_input_in_a_subprocess(argv):
    """The installed entry point behaves the same (one line, exit 2, nothing created)."""
    with scratch(existing_out=False) as root:
        before = snapshot(root)
        r = subprocess.run([sys.executable, "-m", "isosim", *argv], capture_output=True, text=True, cwd=root)
        assert snapshot(root) == before
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
