"""The small-LM validation (isosim.lm): task, tokenizer and teacher; GRPO advantage and loss
identities against hand-computed cases; compute accounting; KV-cache generation; a short
real GRPO run that raises pass@1; and a miniature ``isosim lm validate`` end to end."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch  # noqa: E402  (the test extra installs it: a missing torch must fail, not skip)

from isosim.lm import (  # noqa: E402
    GPT,
    GPTConfig,
    GRPOConfig,
    GRPOTrainer,
    SFTConfig,
    TaskSpec,
    Teacher,
    Tokenizer,
    aggregate,
    group_advantages,
    pass_rates,
    policy_loss,
    rollouts_for,
    run_validate,
    sample_problems,
    score,
    steps_for,
)
from isosim.lm.compare import n_star  # noqa: E402
from isosim.lm.grpo import response_mask, token_logps  # noqa: E402
from isosim.lm.protocol import BANDS, plan_grid, quick_config  # noqa: E402
from isosim.lm.task import EOS, PAD, VOCAB_SIZE, Problems  # noqa: E402

torch.set_num_threads(1)


# --- task, tokenizer, teacher ----------------------------------------------------------------

def test_task_chain_tokens_and_score():
    spec = TaskSpec(1, 4)
    p = Problems(np.array([3]), np.array([[0, 2, 1, -1]]), np.array([[4, 2, 1, -1]]), np.array([3]))
    assert p.text(0) == "3+4*2-1="
    assert p.chains()[0].tolist() == [7, 4, 3, -1] and p.answers().tolist() == [3]
    tok = Tokenizer(spec)
    assert tok.decode(tok.encode_prompts(p)[0]) == "<bos>3+4*2-1__=" and len(tok.encode_prompts(p)[0]) == spec.prompt_len
    right = tok.encode_responses(p.chains(), p.k)
    assert tok.decode(right[0]) == "743<eos>"
    cases = {
        "743<eos>": (1.0, True, False),
        "713<eos>": (1.0, True, False),  # intermediate steps are not checked
        "742<eos>": (0.0, True, False),  # wrong answer
        "73<eos>": (0.0, False, False),  # too few steps
        "7433<eos>": (0.0, False, False),  # too many steps
        "7+3<eos>": (0.0, False, False),  # not a digit
        "743333": (0.0, False, True),  # past the length limit: reward 0
    }
    ids = {s: i for i, s in enumerate(tok.vocab)}
    for text, (rew, wf, trunc) in cases.items():
        toks = []
        rest = text
        while rest:
            if rest.startswith("<eos>"):
                toks.append(EOS)
                rest = rest[5:]
            else:
                toks.append(ids[rest[0]])
                rest = rest[1:]
        toks += [PAD] * (spec.max_new_tokens - len(toks))
        sc = score(p, np.array([toks]))
        assert (sc["reward"][0], bool(sc["well_formed"][0]), bool(sc["truncated"][0])) == (rew, wf, trunc), text


def test_teacher_pass_rates_are_exact():
    spec = TaskSpec(1, 4)
    teacher = Teacher.default(0, 0.25, 2.0)
    rng = np.random.default_rng(0)
    probs = sample_problems(40, spec, rng)
    exact = teacher.pass_rates(probs)
    reps = 4000
    big = probs.subset(np.repeat(np.arange(40), reps))
    written = teacher.sample_chains(big, rng)
    hit = (written[np.arange(len(big)), big.k - 1] == big.answers()).reshape(40, reps).mean(axis=1)
    se = np.sqrt(exact * (1 - exact) / reps) + 1e-9
    assert np.all(np.abs(hit - exact) <= 5 * se + 1e-3)
    # zero error: every chain right
    perfect = Teacher(np.zeros((3, 10)))
    assert np.allclose(perfect.pass_rates(probs), 1.0)


# --- advantages and loss: hand-computed cases ---------------------------------------------------

def test_group_advantages_hand_computed():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]])
    # group means 0.5 and 0.75; unbiased group stds sqrt(1/3) and 0.5
    none = group_advantages(r, "none")
    assert torch.allclose(none, torch.tensor([[0.5, -0.5, -0.5, 0.5], [0.25, 0.25, 0.25, -0.75]]))
    g = group_advantages(r, "group", eps=0.0)
    s = math.sqrt(1 / 3)
    assert torch.allclose(g, torch.tensor([[0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s], [0.5, 0.5, 0.5, -1.5]]))
    # batch: group means, std of all 8 rewards (mean 5/8, unbiased: sqrt(15/56))
    b = group_advantages(r, "batch", eps=0.0)
    assert torch.allclose(b, none / math.sqrt(15 / 56))
    # all-equal group: zero advantage in every mode (eps keeps it finite)
    z = torch.ones(1, 4)
    for mode in ("group", "batch", "none"):
        assert torch.all(group_advantages(z, mode) == 0)
    with pytest.raises(ValueError):
        group_advantages(r, "sequence")


def test_loss_aggregation_hand_computed():
    per = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    assert aggregate(per, mask, "token-mean").item() == pytest.approx((1 + 2 + 3 + 4) / 4)
    assert aggregate(per, mask, "seq-mean-token-mean").item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate(per, mask, "seq-mean-token-sum").item() == pytest.approx((6.0 + 4.0) / 2)
    assert aggregate(per, mask, "seq-mean-token-sum-norm").item() == pytest.approx(10.0 / (2 * 4))
    assert aggregate(per, mask, "seq-mean-token-sum-norm", max_len=5).item() == pytest.approx(10.0 / (2 * 5))
    with pytest.raises(ValueError):
        aggregate(per, mask, "sum")


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_on_policy_loss_is_the_policy_gradient(agg):
    """Ratio 1 (old = current, detached): d loss / d logp_t = -A_i w_t with the aggregation's
    token weights w, and the clip never binds; the loss value is -sum w A."""
    logp = torch.tensor([[-0.1, -0.7, -2.0], [-0.3, -0.2, -1.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([1.5, -0.5])
    cfg = GRPOConfig(loss_agg=agg)
    loss, stats = policy_loss(logp, logp.detach(), adv, mask, cfg)
    loss.backward()
    w = {"token-mean": torch.tensor([[1, 1, 0], [1, 1, 1]]) / 5.0,
         "seq-mean-token-mean": torch.tensor([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3]]) / 2,
         "seq-mean-token-sum": torch.tensor([[1, 1, 0], [1, 1, 1]]) / 2.0,
         "seq-mean-token-sum-norm": torch.tensor([[1, 1, 0], [1, 1, 1]]) / 6.0}[agg]
    assert torch.allclose(logp.grad, -adv[:, None] * w)
    assert loss.item() == pytest.approx(float(-(adv[:, None] * w).sum()))
    assert stats["clip_frac"] == 0.0


def test_clipped_ratio_off_policy():
    """rho = e^0.5 > 1.2 with A > 0: clipped, no gradient; rho = e^-0.5 < 0.8 with A > 0: unclipped."""
    logp = torch.tensor([[0.0, 0.0]], requires_grad=True)
    old = torch.tensor([[-0.5, 0.5]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    loss, stats = policy_loss(logp, old, torch.tensor([1.0]), mask, GRPOConfig(loss_agg="token-mean"))
    loss.backward()
    rho = math.exp(-0.5)
    assert logp.grad[0, 0].item() == pytest.approx(0.0)
    assert logp.grad[0, 1].item() == pytest.approx(-rho / 2)
    assert loss.item() == pytest.approx(-(1.2 + rho) / 2)
    assert stats["clip_frac"] == pytest.approx(0.5)
    # with a negative advantage the lower clip binds instead
    logp.grad = None
    loss, _ = policy_loss(logp, old, torch.tensor([-1.0]), mask, GRPOConfig(loss_agg="token-mean"))
    loss.backward()
    assert logp.grad[0, 1].item() == pytest.approx(0.0)
    assert logp.grad[0, 0].item() == pytest.approx(math.exp(0.5) / 2)


def test_kl_term_k3():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -2.0]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    cfg = GRPOConfig(kl_coef=0.1, loss_agg="token-mean")
    loss, stats = policy_loss(logp, logp, torch.tensor([0.0]), mask, cfg, ref)
    k3 = math.exp(-0.5) + 0.5 - 1
    assert stats["kl"] == pytest.approx(k3 / 2)
    assert loss.item() == pytest.approx(0.1 * k3 / 2)


def test_response_mask_counts_eos_and_truncation():
    resp = torch.tensor([[7, 8, EOS, PAD, PAD], [7, 7, 7, 7, 7], [EOS, PAD, PAD, PAD, PAD]])
    assert response_mask(resp).int().tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]


# --- the model -----------------------------------------------------------------------------------

def _tiny(spec: TaskSpec, seed: int = 0, dtype=torch.float64) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(VOCAB_SIZE, spec.block_size, n_layer=2, n_head=2, n_embd=16)).to(dtype).eval()


def test_kv_cache_generation_equals_no_cache():
    spec = TaskSpec(1, 4)
    model = _tiny(spec)
    prompts = torch.from_numpy(Tokenizer(spec).encode_prompts(sample_problems(64, spec, np.random.default_rng(1))))
    a = model.generate(prompts, spec.max_new_tokens, eos=-1, greedy=True, use_cache=True)
    b = model.generate(prompts, spec.max_new_tokens, eos=-1, greedy=True, use_cache=False)
    assert torch.equal(a, b)
    # and the cached logits match the full forward pass at every position
    seq = torch.cat([prompts, a], dim=1)
    full = model(seq)
    from isosim.lm.model import KVCache

    cache = KVCache(model.config, len(seq), "cpu", torch.float64)
    step = [model(seq[:, :spec.prompt_len], cache, 0)]
    for t in range(spec.prompt_len, seq.shape[1]):
        step.append(model(seq[:, t:t + 1], cache, t))
    assert torch.allclose(torch.cat(step, dim=1), full, atol=1e-10)
    # sampling with the same generator state gives the same tokens on both paths
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    s1 = model.generate(prompts, spec.max_new_tokens, eos=EOS, use_cache=True, generator=g1)
    s2 = model.generate(prompts, spec.max_new_tokens, eos=EOS, use_cache=False, generator=g2)
    assert torch.equal(s1, s2)
    assert torch.all(s1[(torch.cumsum((s1 == EOS).long(), 1) - (s1 == EOS).long()) > 0] == PAD)


def test_compute_accounting_sums_to_budget():
    spec = TaskSpec(1, 4)
    model = _tiny(spec, dtype=torch.float32)
    probs = sample_problems(10, spec, np.random.default_rng(2))
    cfg = GRPOConfig(n=4, b_problem=3, lr=1e-3)
    budget = 7 * 4 * 3 + 5  # not a multiple: M = floor(C / (n B_problem))
    M = steps_for(cfg, budget)
    assert M == 7
    tr = GRPOTrainer(model, spec, probs, cfg, seed=0)
    per_step, seen = [], []
    for _ in range(M):
        before_r, before_t = tr.rollouts, tr.tokens
        out = tr.step()
        per_step.append(tr.rollouts - before_r)
        assert 0 < tr.tokens - before_t <= cfg.n * cfg.b_problem * spec.max_new_tokens
        seen.append(out["rollouts"])
    assert sum(per_step) == tr.rollouts == rollouts_for(cfg, M) == cfg.n * cfg.b_problem * M
    assert seen[-1] == tr.rollouts
    # evaluation does not count
    pass_rates(model, spec, probs, 4)
    assert tr.rollouts == cfg.n * cfg.b_problem * M
    # problems are drawn epoch by epoch without replacement: 21 draws over 10 problems
    tr2 = GRPOTrainer(model, spec, probs, cfg, seed=1)
    draws = np.concatenate([tr2.next_problems() for _ in range(M)])
    for e in range(2):
        assert sorted(draws[10 * e:10 * (e + 1)].tolist()) == list(range(10))


def test_num_iterations_one_is_on_policy():
    """With one iteration the update equals the plain policy gradient (ratio 1), for a real batch."""
    spec = TaskSpec(1, 3)
    model = _tiny(spec, dtype=torch.float32)
    seq = torch.from_numpy(np.concatenate([Tokenizer(spec).encode_prompts(sample_problems(6, spec, np.random.default_rng(3))),
                                           np.full((6, spec.max_new_tokens), 5)], axis=1))
    mask = torch.ones(6, spec.max_new_tokens, dtype=torch.bool)
    adv = torch.linspace(-1, 1, 6)
    logp = token_logps(model, seq, spec.prompt_len)
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, GRPOConfig())
    g1 = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    logp = token_logps(model, seq, spec.prompt_len)
    pg = -(adv[:, None] * logp).sum() / mask.sum()
    g2 = torch.autograd.grad(pg, list(model.parameters()), allow_unused=True)
    for a, b in zip(g1, g2):
        if a is not None:
            assert torch.allclose(a, b, atol=1e-6)


# --- end to end: a miniature validation, then real GRPO on its base model -----------------------

def _micro_config():
    return replace(quick_config(), name="test", pool_size=900, train_size=64, val_size=48, n_grid=(2, 4, 8),
                   budget=1024, min_budget=256, n_budgets=3, eval_samples=8, surrogate_seeds=1,
                   surrogate_lrs=(0.003, 0.01, 0.03, 0.1, 0.3), time_budget_s=120, reserve_s=10,
                   fb_steps=16, fb_min_steps=4, fb_n_budgets=3,
                   sft=SFTConfig(steps=900, batch=128, lr=3e-3))


def _mean_abs_log2_error(measured, predicted, key):
    """Mean |log2 n_measured - log2 n_predicted| over the points (matched on ``key``), and their count;
    every measured point must have a prediction."""
    meas = {p[key]: p["n"] for p in measured}
    pred = {p[key]: p["n"] for p in predicted}
    assert set(meas) == set(pred)
    keys = sorted(meas)
    diff = np.log2([meas[k] for k in keys]) - np.log2([pred[k] for k in keys])
    return float(np.mean(np.abs(diff))), len(keys)


@pytest.fixture(scope="module")
def micro(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm")
    res = run_validate(out, config=_micro_config())
    return out, res


def test_micro_validation_outputs(micro):
    out, res = micro
    js = res.to_json()
    assert set(js) >= {"measured", "predicted", "agreement", "device"} and js["device"] == "cpu"
    for band in BANDS:
        assert js["measured"][band] and js["predicted"][band]
        for key in ("measured", "predicted"):
            for p in js[key][band]:
                assert set(p) == {"compute", "n"} and p["n"] in (2, 4, 8) and p["compute"] in (256, 512, 1024)
        # the agreement is the mean |log2 n*_measured - log2 n*_predicted| over the budgets, and the
        # constant predictors score mean |log2 n*_measured - log2 g| (the grid ends g = 2 and 8)
        err, count = _mean_abs_log2_error(js["measured"][band], js["predicted"][band], "compute")
        assert js["agreement"][band] == {"mean_abs_log2_error": pytest.approx(err, abs=1e-12), "budgets": count}
        n_meas = np.array([p["n"] for p in js["measured"][band]])
        grid = js["plan"]["n_grid"]
        assert js["baselines"][band] == {f"always_n={g}": pytest.approx(np.mean(np.abs(np.log2(n_meas) - np.log2(g))),
                                                                        abs=1e-12) for g in (grid[0], grid[-1])}
    json.dumps(js)
    for f in ("results.jsonl", "base.pt", "pool.npz", "report.md", "lm_validation.png", "lm_base.png"):
        assert (out / f).exists(), f
    recs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    kinds = [r["kind"] for r in recs]
    assert kinds.count("run_done") == 6 and "plan" in kinds and kinds[-1] == "result"
    # the fixed-batch grid: B = B_problem * (middle n) = 32, splits over n in (2, 4, 8), M = 4, 8, 16
    fb = js["fixed_batch"]
    assert fb["B"] == 32 and fb["m_max"] == 16 and fb["splits"] == [[2, 16], [4, 8], [8, 4]]
    for band in BANDS:
        for key in ("measured", "predicted"):
            pts = fb[key][band]
            assert [p["M"] for p in pts] == [4, 8, 16]
            for p in pts:
                assert set(p) == {"M", "n", "B_problem"} and p["n"] * p["B_problem"] == 32 and p["n"] in (2, 4, 8)
        err, count = _mean_abs_log2_error(fb["measured"][band], fb["predicted"][band], "M")
        assert fb["agreement"][band] == {"mean_abs_log2_error": pytest.approx(err, abs=1e-12), "steps": count}
    fb_done = [r for r in recs if r["kind"] == "run_fb_done"]
    assert len(fb_done) == 6 and kinds.count("prediction_fb") == 2
    for r in fb_done:  # every fixed-batch run has n * B_problem = B, and its rollouts are n * B_problem * M
        assert r["n"] * r["b_problem"] == r["B"] == 32 and r["steps"] == 16
        assert r["rollouts"] == r["n"] * r["b_problem"] * r["steps"]
    for r in recs:
        if r["kind"] == "eval_fb":
            assert r["grid"] == "fixed_batch" and r["compute"] == 32 * r["step"] and r["step"] in (4, 8, 16)
    assert "Fixed-batch grid" in (out / "report.md").read_text()
    # rerun: everything is read back (no training), same measured n*
    again = run_validate(out, config=_micro_config(), figures=False)
    assert again.measured == res.measured
    kinds2 = [json.loads(line)["kind"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert kinds2.count("run_done") == 6 and kinds2.count("run_fb_done") == 6 and kinds2.count("base") == 1
    assert again.fixed_batch["measured"] == res.fixed_batch["measured"]
    # an interruption during the last run (its run_done never written, a line cut short):
    # the rerun redoes that run only, and gets the same numbers
    journal = out / "results.jsonl"
    lines = journal.read_text().splitlines()
    cut = max(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "run_done")
    journal.write_text("\n".join(lines[:cut]) + '\n{"kind": "ev')
    resumed = run_validate(out, config=_micro_config(), figures=False)
    assert journal.read_text().splitlines()[cut] == '{"kind": "ev'  # the cut line stays, alone
    kinds3 = [json.loads(line)["kind"] for line in journal.read_text().splitlines()[cut + 1:]]
    assert kinds3.count("run_done") == 1 and kinds3.count("base") == 0
    assert resumed.measured == res.measured
    assert resumed.fixed_batch["measured"] == res.fixed_batch["measured"]


def test_base_histogram_not_degenerate(micro):
    out, res = micro
    data = np.load(out / "pool.npz")
    rates = data["correct"] / 16.0
    hist = np.histogram(rates, bins=16, range=(0, 1))[0] / len(rates)
    assert (hist >= 0.02).sum() >= 6  # mass spread over many bins
    assert hist.max() < 0.5
    for lo, hi in BANDS.values():
        assert np.mean((rates >= lo) & (rates <= hi)) >= 0.1
    # the base model has learned the teacher's skills (per-skill error close to the teacher's)
    assert res.base["skill_error_mean_abs_diff"] < 0.15


def test_grpo_raises_training_pass_rate(micro):
    """A short real GRPO run on CPU raises the training pool's pass@1 by more than 4 standard
    errors of the difference of the two sampled estimates (fixed seeds)."""
    out, res = micro
    cfg = _micro_config()
    state = torch.load(out / "base.pt", weights_only=True)
    model = GPT(cfg.model)
    model.load_state_dict(state["model"])
    data = np.load(out / "pool.npz")
    rates = data["correct"] / 16.0
    pool = Problems.from_arrays(data)
    train = pool.subset(np.flatnonzero((rates >= 0.2) & (rates <= 0.7))[:64])
    m = 16
    before = pass_rates(model, cfg.task, train, m, seed=7)
    tr = GRPOTrainer(model, cfg.task, train, GRPOConfig(n=8, b_problem=8, lr=3e-4), seed=0)
    for _ in range(40):
        tr.step()
    after = pass_rates(model, cfg.task, train, m, seed=8)
    assert tr.rollouts == 8 * 8 * 40
    # each estimate's variance: sum_i p_i (1 - p_i) / m over D problems, divided by D^2
    D = len(train)
    var = (np.sum(before * (1 - before)) + np.sum(after * (1 - after))) / (m * D**2)
    margin = 4 * math.sqrt(var)
    assert after.mean() - before.mean() > margin, (before.mean(), after.mean(), margin)


# --- planning, n*, CLI ------------------------------------------------------------------------------

def test_n_star_argmax_of_best_so_far():
    curves = {2: {100: 0.5, 200: 0.4, 400: 0.6}, 4: {200: 0.45, 400: 0.6}, 8: {400: 0.55}}
    got = n_star(curves, [100, 200, 400])
    assert [(p["compute"], p["n"]) for p in got] == [(100, 2), (200, 2), (400, 2)]  # tie at 400 -> smaller n
    assert got[1]["value"] == 0.5 and got[1]["runner_up"] == 4


def test_plan_shrinks_budget_then_grid():
    cfg = replace(quick_config(), budget=8192, min_budget=1024, n_grid=(2, 4, 8, 16, 32), n_budgets=4)
    fast = plan_grid(cfg, {2: 0.01, 32: 0.02}, 0.1, 1e6)
    assert fast["budget"] == 8192 and not fast["shrunk"]
    fb = fast["fixed_batch"]  # B = 8 * 8; every grid n divides it
    assert fb["B"] == 64 and fb["splits"] == [[2, 32], [4, 16], [8, 8], [16, 4], [32, 2]]
    assert fb["m_max"] == cfg.fb_steps and not fb["shrunk"]
    slow = plan_grid(cfg, {2: 0.1, 32: 0.2}, 0.1, 60)
    assert slow["budget"] < 8192 and slow["predicted_s"] <= 60 * (1 - cfg.fb_share)
    assert slow["predicted_total_s"] <= 60 and slow["fixed_batch"]["m_max"] < cfg.fb_steps
    very = plan_grid(cfg, {2: 1.0, 32: 2.0}, 0.1, 10)
    assert very["budget"] == 1024 and len(very["n_grid"]) == 3


def test_cli_lm_errors(capsys, monkeypatch):
    import isosim.cli as cli

    if "lm" not in cli.SUBCOMMANDS:
        monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + ("lm",))
    if not torch.cuda.is_available():
        assert cli.main(["lm", "validate", "--device", "cuda", "--out", "unused"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "CUDA" in err
    with pytest.raises(SystemExit) as exc:
        cli.main(["lm", "validate", "--device", "tpu"])
    assert exc.value.code == 2
