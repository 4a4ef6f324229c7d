"""Throughput of the small GPT: generated tokens/s with and without the KV cache, training
tokens/s (forward + backward + AdamW), and whole GRPO steps with and without the cache, and
with the update's log-probabilities computed on full sequences instead of once per prompt."""
from __future__ import annotations

import time

import numpy as np
import torch

from .base import sequence_loss, teacher_batch
from .grpo import GRPOConfig, GRPOTrainer, make_generator
from .model import GPT, GPTConfig
from .task import PAD, VOCAB_SIZE, TaskSpec, Teacher, Tokenizer, sample_problems


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _timed(fn, device: str, repeats: int) -> float:
    fn()  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / repeats


def lm_benchmark(device: str = "cpu", *, batch: int | None = None, repeats: int = 3,
                 model: GPTConfig | None = None, task: TaskSpec | None = None) -> dict:
    """Tokens per second on ``device`` for the validation's model shape (``full`` on CUDA,
    ``quick`` on CPU unless given). Generation runs to the full length limit (no early stop
    helps either path), so both paths generate the same number of tokens."""
    cuda = str(device).startswith("cuda")
    task = task or (TaskSpec(1, 6) if cuda else TaskSpec(1, 4))
    cfg = model or (GPTConfig(VOCAB_SIZE, task.block_size, 2, 4, 128) if cuda
                    else GPTConfig(VOCAB_SIZE, task.block_size, 1, 4, 64))
    batch = batch or (4096 if cuda else 256)
    torch.manual_seed(0)
    net = GPT(cfg).to(device).eval()
    rng = np.random.default_rng(0)
    tok = Tokenizer(task)
    prompts = torch.from_numpy(tok.encode_prompts(sample_problems(batch, task, rng))).to(device)
    gen = make_generator(device, 0)
    new = task.max_new_tokens

    def generate(cache: bool):
        # eos=-1: never stops early, so every row generates exactly `new` tokens
        return lambda: net.generate(prompts, new, eos=-1, pad=PAD, use_cache=cache, generator=gen)

    out = {"device": str(device), "batch": batch, "params": net.num_params(), "new_tokens": new,
           "prompt_tokens": task.prompt_len}
    for cache in (True, False):
        secs = _timed(generate(cache), device, repeats)
        out[f"generate_tokens_per_s_{'kv_cache' if cache else 'no_cache'}"] = batch * new / secs
    out["kv_cache_speedup"] = out["generate_tokens_per_s_kv_cache"] / out["generate_tokens_per_s_no_cache"]

    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    teacher = Teacher.default(0)
    seq, mask = teacher_batch(tok, teacher, batch, rng)
    seq_t, mask_t = torch.from_numpy(seq).to(device), torch.from_numpy(mask).to(device)

    def train_step():
        loss = sequence_loss(net, seq_t, mask_t)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    out["train_tokens_per_s"] = batch * (seq.shape[1] - 1) / _timed(train_step, device, repeats)

    problems = sample_problems(max(64, batch // 16), task, rng)
    for key, cache, shared in (("kv_cache", True, True), ("no_cache", False, True), ("full_sequences", True, False)):
        # full_sequences: the log-probabilities of the update from the n full prompt + response rows,
        # not from the prompt run once per group (the same values; see GRPOTrainer's shared_prefix)
        tr = GRPOTrainer(net, task, problems, GRPOConfig(n=16, b_problem=max(4, batch // 16), lr=1e-5), device=device,
                         seed=0, use_cache=cache, shared_prefix=shared)
        tok0 = []

        def grpo_step():
            tok0.append(tr.tokens)
            tr.step()

        secs = _timed(grpo_step, device, repeats)
        per_step = (tr.tokens - tok0[1]) / repeats
        out[f"grpo_generated_tokens_per_s_{key}"] = per_step / secs
    return out


def format_lm_benchmark(res: dict) -> str:
    """The lines ``isosim bench --lm`` prints."""
    return "\n".join([
        f"small-LM benchmark on {res['device']} ({res['params']:,}-parameter GPT, batch {res['batch']}, "
        f"{res['prompt_tokens']} prompt + {res['new_tokens']} generated tokens)",
        f"  generation, KV cache:   {res['generate_tokens_per_s_kv_cache']:>12,.0f} tokens/s",
        f"  generation, no cache:   {res['generate_tokens_per_s_no_cache']:>12,.0f} tokens/s  "
        f"(cache speed-up {res['kv_cache_speedup']:.1f}x)",
        f"  training (fwd+bwd+AdamW): {res['train_tokens_per_s']:>10,.0f} tokens/s",
        f"  GRPO step, KV cache:    {res['grpo_generated_tokens_per_s_kv_cache']:>12,.0f} generated tokens/s",
        f"  GRPO step, no cache:    {res['grpo_generated_tokens_per_s_no_cache']:>12,.0f} generated tokens/s",
        f"  GRPO step, KV cache, update on full sequences (prompt not shared): "
        f"{res['grpo_generated_tokens_per_s_full_sequences']:,.0f} generated tokens/s",
    ])
