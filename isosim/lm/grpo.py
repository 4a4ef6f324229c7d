"""GRPO for the small GPT, with the settings practitioners know from TRL and verl.

One step: draw ``b_problem`` problems (epoch by epoch, without replacement), sample ``n``
responses to each at temperature 1, score them (0/1; a response past the length limit gets
0), compute group-relative advantages, and take one AdamW step (constant learning rate) on
the clipped-ratio policy loss aggregated over the response tokens. Compute is counted as
rollouts (``n * b_problem`` per step, so ``C = n * b_problem * M``) and as generated tokens;
evaluation rollouts are not counted.

Option names in TRL (``GRPOConfig``) and verl (``algorithm.*``, ``actor_rollout_ref.actor.*``,
``actor_rollout_ref.rollout.*``, ``data.*``); docs/lm.md has the details:

==============================  =========================================  ==============================================
setting here                    TRL                                        verl
==============================  =========================================  ==============================================
``n``                           ``num_generations``                        ``rollout.n``
``b_problem``                   prompts per generation batch               ``data.train_batch_size``
``scale_rewards="group"``       ``scale_rewards="group"`` (or ``True``)    ``algorithm.norm_adv_by_std_in_grpo=True``
``scale_rewards="batch"``       ``scale_rewards="batch"``                  (no option)
``scale_rewards="none"``        ``scale_rewards="none"`` (or ``False``)    ``algorithm.norm_adv_by_std_in_grpo=False``
``std_eps``                     1e-4 (fixed)                               1e-6 (fixed)
``loss_agg="token-mean"``       ``loss_type="dapo"`` (``"bnpo"``)          ``actor.loss_agg_mode="token-mean"``
``"seq-mean-token-mean"``       ``loss_type="grpo"``                       ``actor.loss_agg_mode="seq-mean-token-mean"``
``"seq-mean-token-sum"``        (none)                                     ``actor.loss_agg_mode="seq-mean-token-sum"``
``"seq-mean-token-sum-norm"``   ``loss_type="dr_grpo"``                    ``actor.loss_agg_mode="seq-mean-token-sum-norm"`` (N sequences: N times larger, see ``aggregate``)
``clip_low`` / ``clip_high``    ``epsilon`` / ``epsilon_high``             ``actor.clip_ratio_low`` / ``clip_ratio_high``
``kl_coef`` (default 0)         ``beta`` (k3 estimator in the loss)        ``actor.use_kl_loss``, ``kl_loss_coef``, ``kl_loss_type="low_var_kl"``
``num_iterations`` (1)          ``num_iterations``                         ``actor.ppo_epochs``
``lr``, constant                ``learning_rate``, ``lr_scheduler_type="constant"``  ``actor.optim.lr``, no warm-up
``max_grad_norm``               ``max_grad_norm``                          ``actor.grad_clip``
``temperature``                 ``temperature``                            ``rollout.temperature``
length limit                    ``max_completion_length``                  ``data.max_response_length``
==============================  =========================================  ==============================================
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch.nn import functional as F

from .model import GPT
from .task import EOS, PAD, Problems, TaskSpec, Tokenizer, score

SCALE_REWARDS = ("group", "batch", "none")
LOSS_AGG = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


@dataclass(frozen=True)
class GRPOConfig:
    n: int = 8  # rollouts per problem (group size)
    b_problem: int = 8  # problems per step
    lr: float = 1e-3  # AdamW, constant (no schedule, no warm-up)
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.0
    scale_rewards: str = "group"
    std_eps: float = 1e-4  # TRL adds 1e-4 to the std, verl 1e-6
    loss_agg: str = "token-mean"
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    num_iterations: int = 1  # optimiser steps per batch of rollouts; 1 = on-policy (ratio == 1)
    max_grad_norm: float = 1.0  # 0 = no clipping
    temperature: float = 1.0

    def validate(self) -> "GRPOConfig":
        if self.scale_rewards not in SCALE_REWARDS:
            raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {self.scale_rewards!r}")
        if self.loss_agg not in LOSS_AGG:
            raise ValueError(f"loss_agg must be one of {LOSS_AGG}, got {self.loss_agg!r}")
        if self.n < 2:
            raise ValueError("GRPO needs n >= 2 rollouts per problem")
        if self.b_problem < 1 or self.num_iterations < 1 or self.lr <= 0:
            raise ValueError("b_problem and num_iterations must be >= 1 and lr > 0")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


# --- advantages and the loss (pure functions: the identities the tests check) --------------------

def group_advantages(rewards: torch.Tensor, scale_rewards: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """Advantages of rewards (G, n): ``r - mean(group)``, divided by ``std + eps`` where std is
    the group's (``"group"``), the whole batch's (``"batch"``) or not at all (``"none"``).
    Standard deviations use Bessel's correction (ddof 1, ``torch.std``'s default, as in TRL and
    verl), unlike the population std (ddof 0) of the surrogate and :mod:`isosim.theory`: for the
    same rewards these std-scaled advantages are smaller by ``sqrt((n - 1) / n)``."""
    adv = rewards - rewards.mean(dim=1, keepdim=True)
    if scale_rewards == "group":
        return adv / (rewards.std(dim=1, keepdim=True) + eps)
    if scale_rewards == "batch":
        return adv / (rewards.std() + eps)
    if scale_rewards == "none":
        return adv
    raise ValueError(f"scale_rewards must be one of {SCALE_REWARDS}, got {scale_rewards!r}")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_len: int | None = None) -> torch.Tensor:
    """Reduce a per-token loss (N, T) over the response tokens ``mask`` (N, T).

    ``token-mean``: sum over all tokens / number of tokens; ``seq-mean-token-mean``: mean
    over sequences of each sequence's token mean; ``seq-mean-token-sum``: mean over sequences
    of each sequence's token sum; ``seq-mean-token-sum-norm``: sum over all tokens / (N *
    max_len) (Dr. GRPO and TRL's ``dr_grpo``; ``max_len`` defaults to T). verl's mode of that
    name divides the sum by the padded length T only, so its loss is N times this one.
    """
    m = mask.to(per_token.dtype)
    if mode == "token-mean":
        return (per_token * m).sum() / m.sum().clamp(min=1)
    if mode == "seq-mean-token-mean":
        return ((per_token * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)).mean()
    if mode == "seq-mean-token-sum":
        return (per_token * m).sum(dim=1).mean()
    if mode == "seq-mean-token-sum-norm":
        return (per_token * m).sum() / (per_token.shape[0] * (max_len or per_token.shape[1]))
    raise ValueError(f"loss_agg must be one of {LOSS_AGG}, got {mode!r}")


def policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
                cfg: GRPOConfig, ref_logp: torch.Tensor | None = None, max_len: int | None = None) -> tuple[torch.Tensor, dict]:
    """The clipped-ratio GRPO loss. ``logp``, ``old_logp``, ``ref_logp`` and ``mask`` are (N, T);
    ``adv`` is (N,). Per token ``-min(rho A, clip(rho, 1 - clip_low, 1 + clip_high) A)`` with
    ``rho = exp(logp - old_logp)``, plus ``kl_coef`` times the k3 estimate of KL(pi || ref)."""
    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    per_token = -torch.minimum(ratio * a, torch.clamp(ratio, 1 - cfg.clip_low, 1 + cfg.clip_high) * a)
    stats = {}
    if cfg.kl_coef > 0 and ref_logp is not None:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1
        per_token = per_token + cfg.kl_coef * kl
        stats["kl"] = float(aggregate(kl.detach(), mask, "token-mean"))
    with torch.no_grad():
        clipped = ((ratio < 1 - cfg.clip_low) & (a < 0)) | ((ratio > 1 + cfg.clip_high) & (a > 0))
        stats["clip_frac"] = float(aggregate(clipped.to(logp.dtype), mask, "token-mean"))
    return aggregate(per_token, mask, cfg.loss_agg, max_len), stats


def token_logps(model: GPT, seq: torch.Tensor, prompt_len: int, temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities (N, R) of the response tokens seq[:, prompt_len:] under ``model``."""
    logits = model(seq[:, :-1])[:, prompt_len - 1:].float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), 2, seq[:, prompt_len:, None]).squeeze(2)


def grouped_token_logps(model: GPT, prompts: torch.Tensor, resp: torch.Tensor, n: int,
                        temperature: float = 1.0) -> torch.Tensor:
    """:func:`token_logps` of the sequences ``cat(prompts[i], resp[i * n + j])`` for G prompts
    (G, P) with n responses each (G * n, R), the prompt's activations computed once per prompt
    (:meth:`GPT.forward_grouped`): the same log-probabilities, fewer operations."""
    logits = model.forward_grouped(prompts, resp[:, :-1], n).float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.gather(F.log_softmax(logits, dim=-1), 2, resp[:, :, None]).squeeze(2)


def response_mask(resp: torch.Tensor) -> torch.Tensor:
    """1 on generated tokens up to and including <eos> (all of them when truncated)."""
    eos = (resp == EOS).long()
    return (torch.cumsum(eos, dim=1) - eos) == 0


# --- sampling and evaluation ---------------------------------------------------------------

def sample(model: GPT, spec: TaskSpec, problems: Problems, n: int, *, device: str, generator: torch.Generator,
           temperature: float = 1.0, use_cache: bool = True, batch_size: int = 4096) -> tuple[np.ndarray, dict]:
    """``n`` sampled responses per problem (row i * n + j is sample j of problem i) and their scores."""
    tok = Tokenizer(spec)
    prompts = tok.encode_prompts(problems)
    per = max(1, batch_size // n)  # prompts per generation batch (each sampled n times from one prefill)
    outs = []
    for lo in range(0, len(prompts), per):
        p = torch.from_numpy(prompts[lo:lo + per]).to(device)
        outs.append(model.generate(p, spec.max_new_tokens, eos=EOS, pad=PAD, temperature=temperature,
                                   use_cache=use_cache, generator=generator, repeats=n).cpu().numpy())
    resp = np.concatenate(outs) if outs else np.zeros((0, spec.max_new_tokens), dtype=np.int64)
    return resp, score(problems.subset(np.repeat(np.arange(len(problems)), n)), resp)


def pass_rates(model: GPT, spec: TaskSpec, problems: Problems, samples: int = 16, *, device: str = "cpu",
               seed: int = 0, batch_size: int = 4096) -> np.ndarray:
    """avg@``samples``: each problem's share of right answers among ``samples`` sampled responses."""
    gen = make_generator(device, seed)
    was_training = model.training
    model.eval()
    _, sc = sample(model, spec, problems, samples, device=device, generator=gen, batch_size=batch_size)
    model.train(was_training)
    return sc["reward"].reshape(len(problems), samples).mean(axis=1)


def make_generator(device: str, seed: int) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed) % (2**63))
    return gen


# --- the trainer ---------------------------------------------------------------------------

class GRPOTrainer:
    """GRPO on a fixed training pool; ``step()`` is one update, counters keep the compute."""

    def __init__(self, model: GPT, spec: TaskSpec, problems: Problems, cfg: GRPOConfig, *, device: str = "cpu",
                 seed: int = 0, use_cache: bool = True, shared_prefix: bool = True):
        self.cfg = cfg.validate()
        self.model, self.spec, self.problems, self.device = model, spec, problems, device
        self.tok = Tokenizer(spec)
        self.use_cache = use_cache
        self.shared_prefix = shared_prefix  # log-probs with the prompt run once per group (same values, faster)
        self.ref = None
        if cfg.kl_coef > 0:
            self.ref = copy.deepcopy(model).eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        # foreach: one multi-tensor update for all parameters instead of a Python loop over them
        self.opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=cfg.weight_decay,
                                     foreach=True)
        self.rng = np.random.default_rng([seed, 0x6790])
        self.gen = make_generator(device, seed * 7919 + 17)
        self.order = np.zeros(0, dtype=np.int64)
        self.steps = 0
        self.rollouts = 0  # compute C, in rollouts
        self.tokens = 0  # compute in generated tokens
        self.seconds = 0.0

    def next_problems(self) -> np.ndarray:
        """The next ``b_problem`` problem indices, epoch by epoch without replacement."""
        out = []
        need = self.cfg.b_problem
        while need:
            if self.order.size == 0:
                self.order = self.rng.permutation(len(self.problems))
            take = self.order[:need]
            self.order = self.order[need:]
            out.append(take)
            need -= take.size
        return np.concatenate(out)

    def step(self) -> dict:
        cfg, t0 = self.cfg, time.perf_counter()
        idx = self.next_problems()
        probs = self.problems.subset(idx)
        self.model.eval()  # sampling: no dropout
        resp, sc = sample(self.model, self.spec, probs, cfg.n, device=self.device, generator=self.gen,
                          temperature=cfg.temperature, use_cache=self.use_cache)
        self.model.train()
        rewards = torch.from_numpy(sc["reward"]).to(self.device, torch.float32).view(cfg.b_problem, cfg.n)
        adv = group_advantages(rewards, cfg.scale_rewards, cfg.std_eps).reshape(-1)
        prompts = torch.from_numpy(self.tok.encode_prompts(probs)).to(self.device)
        resp_t = torch.from_numpy(resp).to(self.device)
        mask = response_mask(resp_t)
        if self.shared_prefix:
            def logps(model):
                return grouped_token_logps(model, prompts, resp_t, cfg.n, cfg.temperature)
        else:
            seq = torch.cat([prompts.repeat_interleave(cfg.n, dim=0), resp_t], dim=1)

            def logps(model):
                return token_logps(model, seq, prompts.shape[1], cfg.temperature)
        old_logp = ref_logp = None
        with torch.no_grad():
            if cfg.num_iterations > 1:
                old_logp = logps(self.model)
            if self.ref is not None:
                ref_logp = logps(self.ref)
        stats: dict = {}
        for _ in range(cfg.num_iterations):
            logp = logps(self.model)
            # on-policy (one iteration): the old policy is the current one, so the ratio is exactly 1
            loss, stats = policy_loss(logp, logp.detach() if old_logp is None else old_logp, adv, mask, cfg,
                                      ref_logp, self.spec.max_new_tokens)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.opt.step()
        self.model.eval()
        n_tok = int(mask.sum())
        self.steps += 1
        self.rollouts += cfg.n * cfg.b_problem
        self.tokens += n_tok
        self.seconds += time.perf_counter() - t0
        r = sc["reward"]
        return {"step": self.steps, "rollouts": self.rollouts, "tokens": self.tokens, "loss": loss.item(),
                "reward": float(r.mean()), "truncated": float(sc["truncated"].mean()),
                "well_formed": float(sc["well_formed"].mean()),
                "zero_var_frac": float(np.mean(r.reshape(cfg.b_problem, cfg.n).std(axis=1) == 0)), **stats}


def rollouts_for(cfg: GRPOConfig, steps: int) -> int:
    """Compute of ``steps`` GRPO steps in rollouts: C = n * B_problem * M."""
    return cfg.n * cfg.b_problem * steps


def steps_for(cfg: GRPOConfig, budget: float) -> int:
    """M = floor(C / (n * B_problem))."""
    return int(math.floor(budget / (cfg.n * cfg.b_problem)))
