"""The base model: supervised training from scratch on teacher traces, and its per-skill error
measured against the teacher's."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from .model import GPT, GPTConfig
from .task import DIGIT0, MOD, N_SKILLS, Problems, TaskSpec, Teacher, Tokenizer, sample_problems


@dataclass(frozen=True)
class SFTConfig:
    steps: int = 1500
    batch: int = 256
    lr: float = 3e-3
    min_lr_frac: float = 0.1  # cosine decay to this fraction of lr
    warmup: int = 50
    weight_decay: float = 0.01
    time_limit_s: float = 0.0  # > 0: stop early when the wall time is spent


def sequences(tok: Tokenizer, problems: Problems, written: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token rows prompt + response and the loss mask (1 on response tokens up to <eos>)."""
    prompts = tok.encode_prompts(problems)
    resp = tok.encode_responses(written, problems.k)
    seq = np.concatenate([prompts, resp], axis=1)
    mask = np.zeros(seq.shape, dtype=bool)
    cols = np.arange(resp.shape[1])[None, :]
    mask[:, prompts.shape[1]:] = cols <= problems.k[:, None]
    return seq, mask


def teacher_batch(tok: Tokenizer, teacher: Teacher, batch: int, rng: np.random.Generator):
    probs = sample_problems(batch, tok.spec, rng)
    return sequences(tok, probs, teacher.sample_chains(probs, rng))


def sequence_loss(model: GPT, seq: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over the masked (response) tokens."""
    logits = model(seq[:, :-1])
    target, m = seq[:, 1:], mask[:, 1:]
    return F.cross_entropy(logits[m], target[m])


def train_base(spec: TaskSpec, teacher: Teacher, model_cfg: GPTConfig, sft: SFTConfig, *, device: str = "cpu",
               seed: int = 0, log=None) -> tuple[GPT, dict]:
    """Train a fresh GPT on teacher traces (AdamW, warm-up then cosine decay)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 0x5F7])
    tok = Tokenizer(spec)
    model = GPT(model_cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=sft.lr, betas=(0.9, 0.98), weight_decay=sft.weight_decay)
    t0 = time.perf_counter()
    losses, step = [], 0
    for step in range(1, sft.steps + 1):
        if step <= sft.warmup:
            lr = sft.lr * step / sft.warmup
        else:
            frac = (step - sft.warmup) / max(1, sft.steps - sft.warmup)
            lr = sft.lr * (sft.min_lr_frac + (1 - sft.min_lr_frac) * 0.5 * (1 + np.cos(np.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        seq, mask = teacher_batch(tok, teacher, sft.batch, rng)
        loss = sequence_loss(model, torch.from_numpy(seq).to(device), torch.from_numpy(mask).to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if log and (step % 250 == 0 or step == sft.steps):
            log(f"  base model step {step}/{sft.steps}: loss {np.mean(losses[-50:]):.4f} ({time.perf_counter() - t0:.0f} s)")
        if sft.time_limit_s and time.perf_counter() - t0 > sft.time_limit_s:
            break
    model.eval()
    info = {"steps": step, "final_loss": float(np.mean(losses[-50:])), "seconds": time.perf_counter() - t0,
            "params": model.num_params()}
    return model, info


@torch.no_grad()
def skill_errors(model: GPT, spec: TaskSpec, n_problems: int = 2000, *, device: str = "cpu", seed: int = 1) -> np.ndarray:
    """The model's per-skill error (3, 10): 1 - P(right digit | a right chain so far), averaged
    over every occurrence of the skill in ``n_problems`` random problems (teacher forcing)."""
    rng = np.random.default_rng([seed, 0x5E])
    tok = Tokenizer(spec)
    probs = sample_problems(n_problems, spec, rng)
    chains = probs.chains()
    seq, _ = sequences(tok, probs, chains)
    logits = model(torch.from_numpy(seq).to(device)[:, :-1]).float()
    P = spec.prompt_len
    lp = F.log_softmax(logits[:, P - 1:P - 1 + spec.k_max], dim=-1).cpu().numpy()  # predicts r_1..r_kmax
    right = np.exp(np.take_along_axis(lp, (DIGIT0 + np.maximum(chains, 0))[..., None], axis=2)[..., 0])
    skills = probs.skills()
    live = skills >= 0
    tot = np.bincount(skills[live], weights=1 - right[live], minlength=N_SKILLS)
    cnt = np.bincount(skills[live], minlength=N_SKILLS)
    return (tot / np.maximum(cnt, 1)).reshape(3, MOD)
