"""A small GPT in one readable file (after nanoGPT): token and learned position embeddings,
pre-norm blocks of causal self-attention and an MLP, a tied output head; batched sampling
with a key-value cache, and the plain no-cache path (recompute the whole prefix each token)
for checks and the benchmark.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 18
    block_size: int = 24  # longest sequence: prompt + response
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.n_head, self.n_embd = cfg.n_head, cfg.n_embd
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, cache: "KVCache | None" = None, layer: int = 0, start: int = 0) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
        drop = self.dropout if self.training else 0.0
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
        else:
            k, v = cache.update(layer, start, k, v)  # all keys and values up to start + T
            if T == 1 and drop == 0.0:  # one new token attends to every cached position
                # softmax(q k^T / sqrt(hd)) v written out: for one query row this is cheaper on a CPU
                # than the fused kernel's set-up
                att = torch.softmax((q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(k.shape[-1])), dim=-1)
                y = att @ v
            elif T == 1:
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop)
            elif start == 0:
                y = F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True)
            else:  # a block of T new tokens after `start` cached ones
                qpos = torch.arange(start, start + T, device=x.device)[:, None]
                mask = torch.arange(start + T, device=x.device)[None, :] <= qpos
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def forward_grouped(self, xp: torch.Tensor, xr: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention for G shared prefixes ``xp`` (G, P, C) and N = G * n continuations ``xr``
        (N, R, C), row i * n + j continuing prefix i. The prefix attends causally to itself; a
        continuation token at offset r attends to the P prefix positions of its group and to
        continuation offsets 0..r: the same as the causal attention over the concatenated
        sequence, without repeating the prefix n times. Scores are q . k / sqrt(head dim), one
        softmax over the P + r + 1 visible keys."""
        G, P, C = xp.shape
        N, R, _ = xr.shape
        H, hd = self.n_head, C // self.n_head
        qp, kp, vp = (t.view(G, P, H, hd).transpose(1, 2) for t in self.c_attn(xp).split(self.n_embd, dim=2))
        qr, kr, vr = (t.view(N, R, H, hd).transpose(1, 2) for t in self.c_attn(xr).split(self.n_embd, dim=2))
        drop = self.dropout if self.training else 0.0
        yp = F.scaled_dot_product_attention(qp, kp, vp, dropout_p=drop, is_causal=True)
        scale = 1.0 / math.sqrt(hd)
        # (G, H, n * R, hd): every continuation query of a group against the group's prefix keys
        qg = qr.reshape(G, n, H, R, hd).transpose(1, 2).reshape(G, H, n * R, hd)
        s_pre = (qg @ kp.transpose(-1, -2)) * scale  # (G, H, n R, P)
        s_own = (qr @ kr.transpose(-1, -2)) * scale  # (N, H, R, R)
        causal = torch.ones(R, R, dtype=torch.bool, device=xr.device).tril()
        s_own = s_own.masked_fill(~causal, float("-inf"))
        s_pre = s_pre.reshape(G, H, n, R, P).transpose(1, 2).reshape(N, H, R, P)
        att = torch.softmax(torch.cat([s_pre, s_own], dim=-1), dim=-1)
        if drop > 0:
            att = F.dropout(att, drop)
        a_pre = att[..., :P].reshape(G, n, H, R, P).transpose(1, 2).reshape(G, H, n * R, P)
        yr = (a_pre @ vp).reshape(G, H, n, R, hd).transpose(1, 2).reshape(N, H, R, hd) + att[..., P:] @ vr
        yp = yp.transpose(1, 2).contiguous().view(G, P, C)
        yr = yr.transpose(1, 2).contiguous().view(N, R, C)
        return self.resid_dropout(self.c_proj(yp)), self.resid_dropout(self.c_proj(yr))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x, cache=None, layer=0, start=0):
        x = x + self.attn(self.ln_1(x), cache, layer, start)
        return x + self.mlp(self.ln_2(x))

    def forward_grouped(self, xp, xr, n):
        ap, ar = self.attn.forward_grouped(self.ln_1(xp), self.ln_1(xr), n)
        xp, xr = xp + ap, xr + ar
        return xp + self.mlp(self.ln_2(xp)), xr + self.mlp(self.ln_2(xr))


class KVCache:
    """Keys and values of every layer for a batch, preallocated to ``block_size`` positions."""

    def __init__(self, cfg: GPTConfig, batch: int, device, dtype):
        hd = cfg.n_embd // cfg.n_head
        shape = (cfg.n_layer, batch, cfg.n_head, cfg.block_size, hd)
        self.k = torch.empty(shape, device=device, dtype=dtype)
        self.v = torch.empty(shape, device=device, dtype=dtype)

    def repeat_rows(self, n: int) -> "KVCache":
        """Each row's cache repeated ``n`` times (row i becomes rows i * n .. i * n + n - 1)."""
        self.k = self.k.repeat_interleave(n, dim=1)
        self.v = self.v.repeat_interleave(n, dim=1)
        return self

    def update(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        end = start + k.shape[2]
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters()) - self.wpe.weight.numel()

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None, start: int = 0) -> torch.Tensor:
        """Logits (B, T, vocab) for tokens ``idx`` (B, T) at positions start .. start + T - 1."""
        T = idx.shape[1]
        if start + T > self.config.block_size:
            raise ValueError(f"sequence of {start + T} tokens exceeds block_size {self.config.block_size}")
        pos = torch.arange(start, start + T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for i, block in enumerate(self.blocks):
            x = block(x, cache, i, start)
        return self.lm_head(self.ln_f(x))

    def forward_grouped(self, prompts: torch.Tensor, cont: torch.Tensor, n: int) -> torch.Tensor:
        """Logits of G prompts (G, P) each continued by n rows of ``cont`` (G * n, R), row
        i * n + j continuing prompt i: (G * n, 1 + R, vocab), the logits at positions P - 1 .. P + R - 1
        of the concatenated sequences (the last prompt position's logits repeated for the n rows).
        Equal to ``self(cat(prompts repeated, cont))[:, P - 1:]``, but the prompt's activations are
        computed once per prompt, not n times."""
        G, P = prompts.shape
        R = cont.shape[1]
        if P + R > self.config.block_size:
            raise ValueError(f"sequence of {P + R} tokens exceeds block_size {self.config.block_size}")
        dev = prompts.device
        xp = self.drop(self.wte(prompts) + self.wpe(torch.arange(P, device=dev)))
        xr = self.drop(self.wte(cont) + self.wpe(torch.arange(P, P + R, device=dev)))
        for block in self.blocks:
            xp, xr = block.forward_grouped(xp, xr, n)
        last = self.lm_head(self.ln_f(xp[:, -1:])).repeat_interleave(n, dim=0)  # (G * n, 1, V)
        return torch.cat([last, self.lm_head(self.ln_f(xr))], dim=1)

    @torch.no_grad()
    def generate(self, prompts: torch.Tensor, max_new_tokens: int, *, eos: int, pad: int = 0,
                 temperature: float = 1.0, greedy: bool = False, use_cache: bool = True,
                 generator: torch.Generator | None = None, repeats: int = 1) -> torch.Tensor:
        """Sample continuations of equal-length ``prompts`` (B, P); returns (B * repeats,
        max_new_tokens) tokens with ``pad`` after each row's ``eos``; rows i * repeats ..
        i * repeats + repeats - 1 continue prompt i. With the cache, the prompt is run once per
        prompt and its keys and values are repeated (``repeats`` samples share one prefill).
        Stops early once every row has ended."""
        if repeats > 1 and not use_cache:
            prompts = prompts.repeat_interleave(repeats, dim=0)
            repeats = 1
        B0, P = prompts.shape
        B = B0 * repeats
        out = torch.full((B, max_new_tokens), pad, dtype=torch.long, device=prompts.device)
        done = torch.zeros(B, dtype=torch.bool, device=prompts.device)
        cache = KVCache(self.config, B0, prompts.device, self.wte.weight.dtype) if use_cache else None
        logits = self(prompts, cache, 0)[:, -1]
        if repeats > 1:
            cache.repeat_rows(repeats)
            logits = logits.repeat_interleave(repeats, dim=0)
        for t in range(max_new_tokens):
            if greedy:
                nxt = logits.argmax(dim=-1)
            else:
                probs = F.softmax(logits.float() / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            nxt = torch.where(done, torch.full_like(nxt, pad), nxt)
            out[:, t] = nxt
            done |= nxt == eos
            if t + 1 == max_new_tokens or bool(done.all()):
                break
            if use_cache:
                logits = self(nxt[:, None], cache, P + t)[:, -1]
            else:
                logits = self(torch.cat([prompts, out[:, :t + 1]], dim=1))[:, -1]
        return out
