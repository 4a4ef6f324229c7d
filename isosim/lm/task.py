"""The chained modular-arithmetic task, its tokenizer, a teacher with known per-skill error
rates, and problem pools of controllable difficulty. NumPy only (no torch).

A problem is a start digit ``s`` and ``k`` operations ``(op_j, d_j)`` with ``op`` in
``+ - *`` and ``d`` a digit; the chain is ``r_0 = s``, ``r_j = (r_{j-1} op_j d_j) mod 10``,
and the answer is ``r_k``. A *skill* is an ``(op, digit)`` pair (30 skills).

Text form (one character per token)::

    prompt    <bos> 3 + 4 * 2 - 1 _ _ _ _ =       (k = 3 of k_max = 5 slots, blanks fill the rest)
    response  7 4 3 <eos>                         (r_1 .. r_k written step by step, then <eos>)

Every prompt has the same length ``2 k_max + 3`` (unused operation slots are the blank
token ``_``), so the j-th operation always sits at the same position and prompts batch
without padding. The reward is 1 only if the response is well formed (exactly ``k``
digits, then ``<eos>``, within the length limit) and its last digit is the answer; the
intermediate digits are the chain of thought and are not checked.

The :class:`Teacher` writes chains with a per-skill error rate ``e[op, d]``: at a step with
skill (op, d) it writes the right result with probability ``1 - e`` and otherwise a fixed
wrong digit ``(right + shift[op, d]) mod 10`` (a "misconception"), then continues from what
it wrote. :meth:`Teacher.pass_rates` gives each problem's exact probability of a right
answer (a dynamic programme over the 10 possible written states).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OPS = "+-*"
MOD = 10
N_SKILLS = len(OPS) * MOD

# --- vocabulary -----------------------------------------------------------------------------
PAD, BOS, EOS, EQ, BLANK = 0, 1, 2, 3, 4
DIGIT0 = 5  # tokens 5..14 are the digits 0..9
OP0 = DIGIT0 + MOD  # tokens 15..17 are + - *
VOCAB = ("<pad>", "<bos>", "<eos>", "=", "_", *[str(d) for d in range(MOD)], *OPS)
VOCAB_SIZE = len(VOCAB)


def apply_op(op: np.ndarray | int, a: np.ndarray | int, d: np.ndarray | int) -> np.ndarray:
    """``(a op d) mod 10`` elementwise, with op codes 0 ``+``, 1 ``-``, 2 ``*``."""
    op, a, d = np.asarray(op), np.asarray(a), np.asarray(d)
    return np.where(op == 0, a + d, np.where(op == 1, a - d, a * d)) % MOD


#: RESULT[op, d, a] = (a op d) mod 10
RESULT = apply_op(np.arange(3)[:, None, None], np.arange(MOD)[None, None, :], np.arange(MOD)[None, :, None])


@dataclass(frozen=True)
class TaskSpec:
    """Problem shape: ``k`` operations per problem, ``k_min <= k <= k_max``."""

    k_min: int = 1
    k_max: int = 6

    def __post_init__(self):
        if not (1 <= self.k_min <= self.k_max <= 16):
            raise ValueError(f"need 1 <= k_min <= k_max <= 16, got {self.k_min}, {self.k_max}")

    @property
    def prompt_len(self) -> int:
        return 2 * self.k_max + 3

    @property
    def max_new_tokens(self) -> int:
        """The length limit of a response: k_max digits, <eos>, and one token of slack."""
        return self.k_max + 2

    @property
    def block_size(self) -> int:
        return self.prompt_len + self.max_new_tokens


@dataclass
class Problems:
    """A set of problems as arrays: ``start`` (N,), ``ops`` and ``digits`` (N, k_max) with -1 in
    unused slots, ``k`` (N,)."""

    start: np.ndarray
    ops: np.ndarray
    digits: np.ndarray
    k: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def k_max(self) -> int:
        return int(self.ops.shape[1])

    def subset(self, idx) -> "Problems":
        idx = np.asarray(idx)
        return Problems(self.start[idx], self.ops[idx], self.digits[idx], self.k[idx])

    def chains(self) -> np.ndarray:
        """The right intermediate results r_1..r_k (N, k_max), -1 after step k."""
        out = np.full(self.ops.shape, -1, dtype=np.int64)
        cur = self.start.astype(np.int64).copy()
        for j in range(self.k_max):
            live = self.k > j
            cur = np.where(live, apply_op(np.maximum(self.ops[:, j], 0), cur, np.maximum(self.digits[:, j], 0)), cur)
            out[:, j] = np.where(live, cur, -1)
        return out

    def answers(self) -> np.ndarray:
        return self.chains()[np.arange(len(self)), self.k - 1]

    def skills(self) -> np.ndarray:
        """Skill index ``op * 10 + d`` of each step (N, k_max), -1 in unused slots."""
        return np.where(self.ops >= 0, self.ops * MOD + self.digits, -1)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"start": self.start, "ops": self.ops, "digits": self.digits, "k": self.k}

    @classmethod
    def from_arrays(cls, d) -> "Problems":
        return cls(*(np.asarray(d[key], dtype=np.int64) for key in ("start", "ops", "digits", "k")))

    @classmethod
    def concat(cls, parts: list["Problems"]) -> "Problems":
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("start", "ops", "digits", "k")))

    def text(self, i: int) -> str:
        """The prompt of problem i as text, without <bos> and blanks, e.g. ``3+4*2-1=``."""
        s = str(self.start[i])
        for j in range(self.k[i]):
            s += OPS[self.ops[i, j]] + str(self.digits[i, j])
        return s + "="


def sample_problems(n: int, spec: TaskSpec, rng: np.random.Generator, k: int | None = None) -> Problems:
    """``n`` problems with k uniform in [k_min, k_max] (or fixed ``k``), ops and digits uniform."""
    ks = np.full(n, k, dtype=np.int64) if k is not None else rng.integers(spec.k_min, spec.k_max + 1, n)
    ops = rng.integers(0, 3, (n, spec.k_max))
    digits = rng.integers(0, MOD, (n, spec.k_max))
    unused = np.arange(spec.k_max)[None, :] >= ks[:, None]
    ops[unused] = -1
    digits[unused] = -1
    return Problems(rng.integers(0, MOD, n).astype(np.int64), ops.astype(np.int64), digits.astype(np.int64), ks)


# --- tokenizer ------------------------------------------------------------------------------

class Tokenizer:
    """Maps problems and chains to token arrays and back (one character per token)."""

    def __init__(self, spec: TaskSpec):
        self.spec = spec
        self.vocab = VOCAB
        self.vocab_size = VOCAB_SIZE

    def encode_prompts(self, problems: Problems) -> np.ndarray:
        """(N, 2 k_max + 3) int64: <bos> s op_1 d_1 ... op_kmax d_kmax =, blanks in unused slots."""
        if problems.k_max != self.spec.k_max:
            raise ValueError(f"problems have k_max {problems.k_max}, the tokenizer {self.spec.k_max}")
        n, km = len(problems), self.spec.k_max
        out = np.empty((n, self.spec.prompt_len), dtype=np.int64)
        out[:, 0] = BOS
        out[:, 1] = DIGIT0 + problems.start
        out[:, 2:2 + 2 * km:2] = np.where(problems.ops >= 0, OP0 + problems.ops, BLANK)
        out[:, 3:3 + 2 * km:2] = np.where(problems.digits >= 0, DIGIT0 + problems.digits, BLANK)
        out[:, -1] = EQ
        return out

    def encode_responses(self, written: np.ndarray, k: np.ndarray) -> np.ndarray:
        """(N, max_new_tokens): the written digits r_1..r_k, <eos>, then <pad>."""
        n = written.shape[0]
        out = np.full((n, self.spec.max_new_tokens), PAD, dtype=np.int64)
        cols = np.arange(written.shape[1])[None, :]
        out[:, :written.shape[1]] = np.where(cols < k[:, None], DIGIT0 + np.maximum(written, 0), PAD)
        out[np.arange(n), k] = EOS
        return out

    def decode(self, tokens) -> str:
        return "".join(self.vocab[int(t)] if int(t) > EOS else ("" if int(t) == PAD else self.vocab[int(t)])
                       for t in tokens)


def score(problems: Problems, responses: np.ndarray) -> dict[str, np.ndarray]:
    """Rewards of responses (N, R) (tokens after the prompt, <pad> after <eos>).

    Returns ``reward`` (1.0 if well formed and right), ``well_formed`` (exactly k digits then
    <eos>), ``truncated`` (no <eos> within the R tokens: the length limit; reward 0) and
    ``length`` (tokens up to and including <eos>, or R when truncated).
    """
    responses = np.asarray(responses)
    n, r = responses.shape
    is_eos = responses == EOS
    has_eos = is_eos.any(axis=1)
    eos_at = np.where(has_eos, is_eos.argmax(axis=1), r)
    length = np.where(has_eos, eos_at + 1, r)
    is_digit = (responses >= DIGIT0) & (responses < DIGIT0 + MOD)
    cols = np.arange(r)[None, :]
    digits_ok = np.where(cols < eos_at[:, None], is_digit, True).all(axis=1)
    well_formed = has_eos & (eos_at == problems.k) & digits_ok
    last = responses[np.arange(n), np.clip(problems.k - 1, 0, r - 1)] - DIGIT0
    reward = (well_formed & (last == problems.answers())).astype(np.float64)
    return {"reward": reward, "well_formed": well_formed, "truncated": ~has_eos, "length": length}


# --- the teacher ----------------------------------------------------------------------------

@dataclass
class Teacher:
    """Writes chains with known per-skill error rates ``error[op, d]`` (3, 10); a wrong step
    writes ``(right + shift[op, d]) mod 10`` with ``shift`` in 1..9."""

    error: np.ndarray
    shift: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __post_init__(self):
        self.error = np.asarray(self.error, dtype=np.float64)
        if self.error.shape != (3, MOD) or np.any((self.error < 0) | (self.error >= 1)):
            raise ValueError("error must be a (3, 10) array of rates in [0, 1)")
        if self.shift is None:
            self.shift = np.ones((3, MOD), dtype=np.int64)
        self.shift = np.asarray(self.shift, dtype=np.int64)

    @classmethod
    def default(cls, seed: int = 0, mean_error: float = 0.2, concentration: float = 2.0) -> "Teacher":
        """Per-skill error rates ~ Beta with the given mean (concentration a + b), so skills range
        from nearly always right to often wrong; shifts uniform in 1..9."""
        rng = np.random.default_rng([seed, 0x7EAC])
        a = mean_error * concentration
        err = np.clip(rng.beta(a, concentration - a, (3, MOD)), 0.0, 0.9)
        return cls(err, rng.integers(1, MOD, (3, MOD)))

    def transition(self) -> np.ndarray:
        """T[op, d, a, b] = P(write b | previous written a, skill (op, d))."""
        t = np.zeros((3, MOD, MOD, MOD))
        for op in range(3):
            for d in range(MOD):
                for a in range(MOD):
                    right = RESULT[op, d, a]
                    t[op, d, a, right] += 1 - self.error[op, d]
                    t[op, d, a, (right + self.shift[op, d]) % MOD] += self.error[op, d]
        return t

    def sample_chains(self, problems: Problems, rng: np.random.Generator) -> np.ndarray:
        """Written results (N, k_max), -1 after step k; each step from the previous written one."""
        n = len(problems)
        out = np.full(problems.ops.shape, -1, dtype=np.int64)
        cur = problems.start.astype(np.int64).copy()
        for j in range(problems.k_max):
            live = problems.k > j
            op, d = np.maximum(problems.ops[:, j], 0), np.maximum(problems.digits[:, j], 0)
            right = RESULT[op, d, cur]
            wrong = rng.random(n) < self.error[op, d]
            cur = np.where(live, np.where(wrong, (right + self.shift[op, d]) % MOD, right), cur)
            out[:, j] = np.where(live, cur, -1)
        return out

    def pass_rates(self, problems: Problems) -> np.ndarray:
        """Exact probability that the teacher's final written digit is the answer."""
        t = self.transition()
        n = len(problems)
        dist = np.zeros((n, MOD))
        dist[np.arange(n), problems.start] = 1.0
        for j in range(problems.k_max):
            live = problems.k > j
            op, d = np.maximum(problems.ops[:, j], 0), np.maximum(problems.digits[:, j], 0)
            new = np.einsum("na,nab->nb", dist, t[op, d])
            dist = np.where(live[:, None], new, dist)
        return dist[np.arange(n), problems.answers()]


def difficulty_pool(n: int, spec: TaskSpec, teacher: Teacher, rng: np.random.Generator,
                    band: tuple[float, float] = (0.0, 1.0), max_draws: int = 200) -> Problems:
    """``n`` problems whose teacher pass rate lies in ``band``: controllable difficulty.

    Draws batches from :func:`sample_problems` and keeps those in the band (raises
    ``ValueError`` if the band is too rare to fill in ``max_draws`` batches).
    """
    lo, hi = band
    kept, have = [], 0
    for _ in range(max_draws):
        cand = sample_problems(max(4 * n, 1024), spec, rng)
        p = teacher.pass_rates(cand)
        sel = np.flatnonzero((p >= lo) & (p <= hi))
        kept.append(cand.subset(sel[: n - have]))
        have += min(len(sel), n - have)
        if have >= n:
            return Problems.concat(kept)
    raise ValueError(f"band {band} too rare: found {have} of {n} problems")


def mixed_pool(n: int, spec: TaskSpec, teacher: Teacher, rng: np.random.Generator,
               bands: dict[tuple[float, float], float]) -> Problems:
    """A pool of ``n`` problems drawn from teacher-pass-rate bands with the given shares."""
    total = sum(bands.values())
    counts = [int(round(n * w / total)) for w in bands.values()]
    counts[-1] = n - sum(counts[:-1])
    parts = [difficulty_pool(c, spec, teacher, rng, b) for b, c in zip(bands, counts) if c > 0]
    pool = Problems.concat(parts)
    return pool.subset(rng.permutation(len(pool)))


def per_skill_counts(problems: Problems) -> np.ndarray:
    """How often each skill (op * 10 + d) occurs in ``problems``."""
    s = problems.skills()
    return np.bincount(s[s >= 0], minlength=N_SKILLS)
