"""Make small, real TRL GRPO runs on CPU, offline, in seconds: the logs `isosim fit` and
`isosim calibrate` read in the tests and in notebooks/06_your_own_runs.

The model is a randomly initialised one-layer Qwen2 (width 32) built from a `transformers`
config, the tokenizer a word-level one built with `tokenizers` (nothing is downloaded). The
task: a prompt is three words and the completion is rewarded 1 when its first word repeats
the prompt's first word (a 0/1 reward, so TRL's `eval_reward` estimates avg@1). Each run is
one `GRPOTrainer` output directory (`trainer_state.json`, `training_args.bin`, TensorBoard
events under `runs/`) at one n (`num_generations`).

    python docs/make_trl_runs.py OUT_DIR [--n 2,4,8] [--seeds 0] [--steps 40]

Needs `trl`, `transformers`, `tokenizers`, `datasets` and `torch` (the `test` extra).
"""
from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

#: the words of the task's vocabulary (the tokenizer adds <pad> and <eos>)
WORDS = [f"w{i}" for i in range(6)]
PROMPT_WORDS = 3


def offline() -> None:
    """Nothing of a run may reach the network or a tracking service."""
    for key, value in {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                       "WANDB_DISABLED": "true", "WANDB_MODE": "disabled", "DISABLE_MLFLOW_INTEGRATION": "TRUE",
                       "HF_HUB_DISABLE_TELEMETRY": "1", "TOKENIZERS_PARALLELISM": "false",
                       "ACCELERATE_USE_CPU": "true"}.items():
        os.environ.setdefault(key, value)


def tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   unk_token="<pad>", padding_side="left")


def model(vocab_size: int, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                      pad_token_id=0, eos_token_id=1, bos_token_id=1, tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg)


def prompts(count: int, seed: int):
    from datasets import Dataset

    rng = random.Random(seed)
    return Dataset.from_dict({"prompt": [" ".join(rng.choice(WORDS) for _ in range(PROMPT_WORDS))
                                         for _ in range(count)]})


def copy_reward(prompts, completions, **_):
    """1 when the completion's first word is the prompt's first word, else 0."""
    out = []
    for p, c in zip(prompts, completions):
        words = c.split()
        out.append(1.0 if words and words[0] == p.split()[0] else 0.0)
    return out


def make_run(out: str | Path, n: int, seed: int = 0, steps: int = 40, b_problem: int = 4,
             eval_every: int = 4, lr: float = 1e-2, eval_prompts: int = 32) -> Path:
    """One GRPO run at ``n`` completions per prompt and ``b_problem`` prompts per step
    (``per_device_train_batch_size = n * b_problem``), evaluated every ``eval_every`` steps on
    ``eval_prompts`` held-out prompts (4 completions each); returns its output directory."""
    offline()
    import torch
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    out = Path(out)
    tok = tokenizer()
    args = GRPOConfig(
        output_dir=str(out), max_steps=steps, per_device_train_batch_size=n * b_problem,
        num_generations=n, per_device_eval_batch_size=16, num_generations_eval=4,
        max_completion_length=2, learning_rate=lr, lr_scheduler_type="constant", warmup_steps=0,
        logging_steps=1, eval_strategy="steps", eval_steps=eval_every, save_strategy="no",
        report_to=["tensorboard"], seed=seed, data_seed=seed,
        use_cpu=True, bf16=False, fp16=False, dataloader_num_workers=0, disable_tqdm=True,
        temperature=1.0, beta=0.0, log_completions=False, eval_on_start=True,
    )
    trainer = GRPOTrainer(model=model(len(WORDS) + 2, seed), reward_funcs=copy_reward, args=args,
                          train_dataset=prompts(512, 1000 + seed), eval_dataset=prompts(eval_prompts, 7),
                          processing_class=tok)
    trainer.remove_callback(PrinterCallback)  # the logs go to trainer_state.json and TensorBoard, not stdout
    trainer.train()
    trainer.save_state()
    trainer.save_model()
    return out


def base_pass_rates(out_csv: str | Path, seed: int = 0, problems: int = 128, samples: int = 16) -> Path:
    """The base model's pass rate on the first ``problems`` training prompts of seed ``seed``
    (``samples`` sampled completions each, as TRL samples them): a CSV with ``correct`` and
    ``samples`` columns, the ``--pass-rates`` file of ``isosim calibrate``."""
    offline()
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    tok, net = tokenizer(), model(len(WORDS) + 2, seed)
    texts = prompts(512, 1000 + seed)["prompt"][:problems]
    rows = []
    with torch.no_grad():
        for text in texts:
            ids = tok([text] * samples, return_tensors="pt")
            gen = net.generate(**ids, do_sample=True, max_new_tokens=2, temperature=1.0, top_k=0, top_p=1.0,
                               pad_token_id=0, eos_token_id=1)
            done = tok.batch_decode(gen[:, ids["input_ids"].shape[1]:], skip_special_tokens=True)
            rows.append(int(sum(copy_reward([text] * samples, done))))
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    out_csv.write_text("correct,samples\n" + "".join(f"{c},{samples}\n" for c in rows))
    return out_csv


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--n", default="2,4,8")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--pass-rates", metavar="CSV", help="also write the base model's pass rates here")
    a = ap.parse_args(argv)
    if a.pass_rates:
        print(base_pass_rates(a.pass_rates))
    for n in (int(x) for x in a.n.split(",")):
        for s in (int(x) for x in a.seeds.split(",")):
            print(make_run(Path(a.out) / f"n{n}-s{s}", n, s, a.steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
