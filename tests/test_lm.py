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
from isosim.lm.protocol import BANDS, budgets, medium_config, plan_grid, quick_config  # noqa: E402
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
                   surrogate_lrs=(0.003, 0.01, 0.03, 0.1, 0.3), time_budget_s=1e5, reserve_s=10,  # never shrinks
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
                assert p["n"] in (2, 4, 8) and p["compute"] in (256, 512, 1024)
                # one seed: the measured interval comes from resampling the validation problems alone
                assert set(p) == ({"compute", "n", "n_low", "n_high"} if key == "measured" else {"compute", "n"})
                assert key == "predicted" or p["n_low"] <= p["n"] <= p["n_high"]
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
    # two seeds double the grid's time, two workers halve it
    two = replace(cfg, seeds=2)
    assert plan_grid(two, {2: 0.01, 32: 0.02}, 0.1, 1e6)["predicted_s"] == pytest.approx(2 * fast["predicted_s"])
    assert plan_grid(two, {2: 0.01, 32: 0.02}, 0.1, 1e6, workers=2)["predicted_s"] == pytest.approx(fast["predicted_s"])
    # the medium scale never shrinks: its grid is the design (n 2..64, C_max 2^19, 8 budgets a doubling apart)
    med = medium_config()
    plan = plan_grid(med, {2: 0.05, 64: 0.3}, 0.5, med.time_budget_s - med.reserve_s, workers=2)
    assert plan["budget"] == 2**19 and plan["n_grid"] == [2, 4, 8, 16, 32, 64] and not plan["shrunk"]
    assert plan["fixed_batch"]["splits"] == [] and len(budgets(2**19, med.n_budgets)) == 8


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


# --- the shared-prefix fast path ----------------------------------------------------------------

def test_grouped_logps_and_generation_equal_the_plain_path():
    """Log-probabilities with the prompt run once per group equal those of the full sequences
    (float64), with and without gradients; sampling n continuations from one prefill draws the
    same tokens as sampling from n repeated prompts with the same generator."""
    from isosim.lm.grpo import grouped_token_logps

    spec = TaskSpec(1, 5)
    torch.manual_seed(3)
    model = GPT(GPTConfig(VOCAB_SIZE, spec.block_size, 2, 4, 32)).double()
    probs = sample_problems(4, spec, np.random.default_rng(5))
    prompts = torch.from_numpy(Tokenizer(spec).encode_prompts(probs))
    resp = torch.randint(0, VOCAB_SIZE, (12, spec.max_new_tokens))
    fast = grouped_token_logps(model, prompts, resp, 3)
    slow = token_logps(model, torch.cat([prompts.repeat_interleave(3, 0), resp], 1), spec.prompt_len)
    assert fast.shape == slow.shape == (12, spec.max_new_tokens)
    assert torch.allclose(fast, slow, atol=1e-10)
    g1 = torch.autograd.grad(fast.sum(), list(model.parameters()))
    g2 = torch.autograd.grad(slow.sum(), list(model.parameters()))
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-9)
    for seed in (0, 1):
        x = model.generate(prompts, spec.max_new_tokens, eos=EOS, repeats=3, generator=torch.Generator().manual_seed(seed))
        y = model.generate(prompts.repeat_interleave(3, 0), spec.max_new_tokens, eos=EOS,
                           generator=torch.Generator().manual_seed(seed))
        assert torch.equal(x, y)


# --- held-out scoring and the n*(C) interval: hand-made cases -----------------------------------

def test_score_prediction_hand_computed():
    from isosim.lm.heldout import score_prediction

    measured = [{"compute": 100, "n": 8, "n_low": 4, "n_high": 16}, {"compute": 200, "n": 16, "n_low": 16, "n_high": 16},
                {"compute": 400, "n": 4}, {"compute": 800, "n": 8, "n_low": 2, "n_high": 64}]
    # errors |3 - 5| = 2, |4 - 2| = 2, |2 - 3| = 1, |3 - 6| = 3; within: no (32 outside [4, 16]), no,
    # yes (one doubling), yes (64 inside [2, 64])
    got = score_prediction(measured, {100: 32, 200: 4, 400: 8, 800: 64, 1600: 2})
    assert got == {"mean_abs_log2_error": pytest.approx(8 / 4), "share_within_one_doubling": 0.5, "budgets": 4}
    assert score_prediction(measured, {100: 8})["mean_abs_log2_error"] == 0.0
    assert score_prediction(measured, {}) == {"mean_abs_log2_error": None, "share_within_one_doubling": None, "budgets": 0}


def _runs(counts, grid, budgets, samples, base):
    from isosim.lm.heldout import SubsetRuns

    return SubsetRuns("easy", grid, budgets, samples,
                      {n: {s: {c: np.asarray(v, float) for c, v in per.items()} for s, per in seeds.items()}
                       for n, seeds in counts.items()}, np.asarray(base, float))


def test_bootstrap_interval_hand_computed():
    """One problem, 10 samples: n = 2's seeds score 10/10 and 0/10 (mean 0.5), n = 4's 6/10 and
    6/10 (0.6), so n* = 4. Resampling n = 2's two seeds gives (10, 10) with probability 1/4, and
    then n* = 2; otherwise n* = 4. The 90% interval is [2, 4] and n = 2's share about 0.25."""
    from isosim.lm.heldout import bootstrap_n_star, measured_with_interval

    runs = _runs({2: {0: {100: [10]}, 1: {100: [0]}}, 4: {0: {100: [6]}, 1: {100: [6]}}}, [2, 4], [100], 10, [3])
    boot = bootstrap_n_star(runs, reps=4000, level=0.9)
    assert boot[100]["n_low"] == 2 and boot[100]["n_high"] == 4
    assert abs(boot[100]["share"][2] - 0.25) < 0.03
    m = measured_with_interval(runs, reps=4000, level=0.9)
    assert m[0]["n"] == 4 and (m[0]["n_low"], m[0]["n_high"]) == (2, 4)
    # n = 4 better on every problem and seed: the interval is the point
    clear = _runs({2: {0: {100: [2, 3]}, 1: {100: [3, 2]}}, 4: {0: {100: [8, 9]}, 1: {100: [9, 8]}}}, [2, 4], [100], 10,
                  [1, 1])
    b = bootstrap_n_star(clear, reps=500)
    assert (b[100]["n_low"], b[100]["n_high"]) == (4, 4) and b[100]["share"] == {4: 1.0}
    # best-so-far: n = 2 peaks at C = 100, so it still wins at C = 200 although it dropped
    drop = _runs({2: {0: {100: [9], 200: [1]}}, 4: {0: {100: [2], 200: [8]}}}, [2, 4], [100, 200], 10, [1])
    assert [(p["compute"], p["n"]) for p in measured_with_interval(drop, reps=100)] == [(100, 2), (200, 2)]


def test_n_star_shift_is_paired_and_three_valued():
    """Grid 2, 8, 32; budgets 100 and 800; two seeds; three problems of 10 samples. Clear move:
    n = 2 wins at 100 and n = 32 at 800 on every problem and seed, so every replicate shifts by
    +4 doublings. Flat: n = 2 wins at both. Tie at the end: n = 2 and 32 equal in mean at 800,
    with seeds that differ, so some replicates shift and some do not."""
    from isosim.lm.heldout import n_star_shift

    lo, hi = [2, 2, 2], [9, 9, 9]
    grid, budgets = [2, 8, 32], [100, 800]

    def runs(end2, end32, seeds32=None):
        return _runs({2: {s: {100: hi, 800: end2} for s in (0, 1)},
                      8: {s: {100: lo, 800: lo} for s in (0, 1)},
                      32: {s: {100: lo, 800: (seeds32[s] if seeds32 else end32)} for s in (0, 1)}},
                     grid, budgets, 10, [1, 1, 1])

    moves = n_star_shift(runs([3, 3, 3], [10, 10, 10]), reps=300)
    assert (moves["from"], moves["to"], moves["log2_shift"]) == (100, 800, 4.0)
    assert (moves["low"], moves["high"], moves["p_moves"], moves["p_rises"]) == (4.0, 4.0, 1.0, 1.0)
    assert moves["verdict"] == "moves"
    flat = n_star_shift(runs([10, 10, 10], [3, 3, 3]), reps=300)
    assert flat["log2_shift"] == 0.0 and flat["high"] == 0.0 and flat["verdict"] == "does not move"
    # best-so-far: n = 2 scored 9 at C = 100, so n = 32 needs more than 9 on average at 800
    tie = n_star_shift(runs([2, 2, 2], None, seeds32={0: [10, 10, 10], 1: [8, 8, 8]}), reps=2000)
    assert tie["verdict"] == "inconclusive" and 0.1 < tie["p_moves"] < 0.9
    assert abs(tie["p_moves"] - 0.25) < 0.05  # both seeds drawn as seed 0: mean 10 > 9; otherwise <= 9


def test_n_star_shift_from_a_registered_budget():
    """Budgets 100, 200, 800, two seeds, two problems of 10 samples. At 100 n = 2 and 32 tie in
    the mean (5.5; n = 32's seeds score 4.5 and 6.5), so the replicates split; at 200 n = 2 wins
    everywhere (9 against 1) and at 800 n = 32 does (10 against n = 2's best so far, 9). From the
    first budget the test is inconclusive; from the registered budget 200 every replicate moves
    by 4 doublings. A start that is not an evaluated budget before the last is bad input."""
    from isosim.errors import IsosimInputError
    from isosim.lm.heldout import n_star_shift

    grid, budgets = [2, 32], [100, 200, 800]
    runs = _runs({2: {s: {100: [5, 6], 200: [9, 9], 800: [3, 3]} for s in (0, 1)},
                  32: {0: {100: [4, 5], 200: [1, 1], 800: [10, 10]}, 1: {100: [6, 7], 200: [1, 1], 800: [10, 10]}}},
                 grid, budgets, 10, [1, 1])
    first = n_star_shift(runs, reps=1000)
    assert first["from"] == 100 and first["verdict"] == "inconclusive" and 0.1 < first["p_moves"] < 0.9
    registered = n_star_shift(runs, reps=1000, start=200)
    assert (registered["from"], registered["to"], registered["log2_shift"]) == (200, 800, 4.0)
    assert (registered["p_moves"], registered["verdict"], registered["registered_start"]) == (1.0, "moves", True)
    assert first["registered_start"] is False
    for bad in (150, 800):
        with pytest.raises(IsosimInputError):
            n_star_shift(runs, reps=10, start=bad)


def test_held_out_protocol_and_alternatives_hand_computed():
    """Grid 2, 4, 8, 16, C_max = 1600, budgets 100 .. 1600: pilots are n = 2 and n = 8 (the middle),
    cut at C_max / 16 = 100; the scored budgets are 200 .. 1600. Measured n* (two seeds, one
    problem of 10 samples; the budget's winner scores 5, 6, 7, 8, 9 of 10, the others 3) is
    2, 4, 4, 8, 16 over the budgets."""
    from isosim.lm.heldout import (
        STUDY_LAW,
        Predictor,
        constant,
        make_pilots,
        nearest_grid,
        scalerl_per_n,
        score_held_out,
        study_law,
        study_law_n,
    )

    grid, budgets = [2, 4, 8, 16], [100, 200, 400, 800, 1600]
    winner = {100: 2, 200: 4, 400: 4, 800: 8, 1600: 16}
    counts = {n: {s: {c: [5 + j if winner[c] == n else 3] for j, c in enumerate(budgets)} for s in (0, 1)}
              for n in grid}
    runs = _runs(counts, grid, budgets, 10, [1])
    measured = [{"compute": p["compute"], "n": p["n"]} for p in runs.n_star()]
    assert [p["n"] for p in measured] == [2, 4, 4, 8, 16]
    pil = make_pilots(runs, "two", 1600, 4, np.zeros(3), np.zeros(2), 16)
    assert sorted(pil.curves) == [2, 8] and all(set(v) == {100} for v in pil.curves.values())
    assert pil.targets == [200, 400, 800, 1600] and pil.rollouts == 2 * 2 * 100
    seen = []
    spy = Predictor(lambda p: seen.append(p) or {c: 4 for c in p.targets})
    res = score_held_out({"easy": runs}, {"easy": measured},
                         {"smallest": constant("smallest"), "largest": constant("largest"), "spy": spy,
                          "all": Predictor(spy.fn, pilots="all")}, c_max=1600, b_problem=4,
                         counts={"easy": (np.zeros(3), np.zeros(2))}, measure_samples=16)
    # measured on the scored budgets: 4, 4, 8, 16; always 2: errors 1, 1, 2, 3; always 16: 2, 2, 1, 0;
    # always 4: 0, 0, 1, 2
    assert res["smallest"]["easy"] == {"mean_abs_log2_error": 1.75, "share_within_one_doubling": 0.5, "budgets": 4}
    assert res["largest"]["easy"] == {"mean_abs_log2_error": 1.25, "share_within_one_doubling": 0.5, "budgets": 4}
    assert res["spy"]["easy"] == {"mean_abs_log2_error": 0.75, "share_within_one_doubling": 0.75, "budgets": 4}
    assert res["spy"]["pilot_rollouts"] == 400 and res["all"]["pilot_rollouts"] == 4 * 2 * 100
    assert sorted(seen[1].curves) == grid  # the "all" predictor saw every n, still cut at 100
    assert max(c for v in seen[1].curves.values() for c in v) == 100
    # the study's law at C = 10^5.84: log2 n* = L / 2 + b = 6.09 / 2 + 2.73 = 5.775, nearest of 2..64 is 64
    assert study_law_n("easy", 10**5.84) == pytest.approx(6.09 / 2 + 2.73)
    assert nearest_grid([2, 4, 8, 16, 32, 64], 5.775) == 64 and nearest_grid([2, 4], 1.5) == 2
    law = study_law().fn(make_pilots(runs, "two", 1600, 4, np.zeros(3), np.zeros(2), 16))
    q = STUDY_LAW["easy"]
    expect = q["L"] / (1 + math.exp(-q["k"] * (math.log10(200) - q["log10_C0"]))) + q["b"]  # about 2.73: n = 8
    assert law[200] == nearest_grid(grid, expect) == 8
    assert scalerl_per_n().pilots == "all"


def test_a_scalerl_fit_on_as_many_points_as_parameters_warns_nothing():
    """Three pilot points for three parameters: the covariance cannot be estimated, which the
    predictor never reads, so no OptimizeWarning reaches the user."""
    import warnings

    from isosim.lm.heldout import fit_scalerl

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = fit_scalerl({1000: 0.3, 4000: 0.42, 16000: 0.47}, 0.2)
    assert fit is not None and 0.47 <= fit[0] <= 1.0


def test_scalerl_fit_recovers_a_known_curve():
    from isosim.lm.heldout import Pilots, fit_scalerl, scalerl_curve, scalerl_per_n

    cs = [250, 500, 1000, 2000, 4000]
    pts = {c: float(scalerl_curve(c, 0.2, 0.8, 1000.0, 1.5)) for c in cs}
    a, c_mid, b = fit_scalerl(pts, 0.2)
    assert (a, c_mid, b) == (pytest.approx(0.8, abs=1e-4), pytest.approx(1000.0, rel=1e-3), pytest.approx(1.5, abs=1e-3))
    assert fit_scalerl({100: 0.5}, 0.2) is None
    # two n: n = 2 fast and low (A 0.6, C_mid 200), n = 8 slow and high (A 0.9, C_mid 2000): the curves cross
    # where 0.2 + 0.4 / (1 + 200 / C) = 0.2 + 0.7 / (1 + (2000 / C)), at C = 2200; n* is 2 before and 8 after
    curves = {2: {c: float(scalerl_curve(c, 0.2, 0.6, 200.0, 1.0)) for c in cs},
              8: {c: float(scalerl_curve(c, 0.2, 0.9, 2000.0, 1.0)) for c in cs}}
    p = Pilots("easy", curves, 4000, [1000, 2000, 4000, 16000], [2, 8], 4, 0.2, np.zeros(1), np.zeros(1), 16, 1)
    assert scalerl_per_n()(p) == {1000: 2, 2000: 2, 4000: 8, 16000: 8}


# --- seeds, workers, intervals and the held-out entry, end to end -------------------------------------

def _seeds_config():
    return replace(quick_config(), name="test-seeds", pool_size=700, train_size=32, val_size=32, n_grid=(2, 4, 8),
                   budget=1024, min_budget=1024, n_budgets=6, eval_samples=8, surrogate_seeds=1,
                   surrogate_lrs=(0.003, 0.03, 0.3), time_budget_s=1e5, reserve_s=10, seeds=2, fixed_batch=False,
                   bootstrap=200, sft=SFTConfig(steps=400, batch=128, lr=3e-3))


def test_seeds_workers_interval_and_held_out(tmp_path):
    """Two seeds per (subset, n) trained by two worker processes: every run is journalled once
    with its seed and per-problem counts; the measured n* carries an interval that contains it;
    the held-out entry scores every alternative on the budgets C_max / 8 .. C_max with the pilot
    costs of the protocol; the calibrated scores are pending. A rerun without the base model and
    the pool file trains nothing and recomputes the same comparison from the results file; a
    calibrated predictor that fails on the pilots leaves its row unscored with the reason."""
    cfg = _seeds_config()
    res = run_validate(tmp_path, config=cfg, workers=2, figures=False)
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    done = [r for r in recs if r["kind"] == "run_done"]
    assert sorted((r["subset"], r["n"], r["seed"]) for r in done) == sorted(
        (s, n, k) for s in BANDS for n in (2, 4, 8) for k in (0, 1))
    assert all(r["rollouts"] == 1024 for r in done)
    evals = [r for r in recs if r["kind"] == "eval"]
    assert all(len(r["counts"]) == 32 and r["value"] == pytest.approx(sum(r["counts"]) / (32 * 8)) for r in evals)
    # the two seeds of a run differ (different training seeds), at the same evaluation seed
    by = {(r["subset"], r["n"], r["seed"], r["compute"]): r["counts"] for r in evals if r["n"]}
    assert any(by[(s, n, 0, c)] != by[(s, n, 1, c)] for (s, n, k, c) in by if k == 0)
    js = res.to_json()
    for band in BANDS:
        pts = js["measured"][band]
        assert [p["compute"] for p in pts] == [32, 64, 128, 256, 512, 1024]
        assert all(p["n_low"] <= p["n"] <= p["n_high"] for p in pts)
    cal = js["calibrated"]
    assert cal["easy"] is None and cal["hard"] is None and cal["status"].startswith("pending")
    assert cal["protocol"]["pilot_n"] == [2, 4] and cal["protocol"]["pilot_cut"] == 64
    assert cal["protocol"]["budgets"] == [128, 256, 512, 1024]
    alt = cal["alternatives"]
    assert set(alt) == {"always_smallest_n", "always_largest_n", "study_law", "default_surrogate", "scalerl_per_n"}
    assert alt["always_smallest_n"]["pilot_rollouts"] == 2 * 2 * 2 * 64  # subsets x pilot n x seeds x cut
    assert alt["scalerl_per_n"]["pilot_rollouts"] == 2 * 3 * 2 * 64
    for band in BANDS:
        meas = {p["compute"]: p for p in js["measured"][band]}
        small = alt["always_smallest_n"][band]
        errs = [math.log2(meas[c]["n"]) - 1 for c in (128, 256, 512, 1024)]
        assert small["budgets"] == 4 and small["mean_abs_log2_error"] == pytest.approx(np.mean(errs))
        within = [e <= 1 or meas[c]["n_low"] <= 2 for e, c in zip(errs, (128, 256, 512, 1024))]
        assert small["share_within_one_doubling"] == pytest.approx(np.mean(within))
    for name in ("easy", "hard"):
        sh = js["n_star_shift"][name]
        assert (sh["from"], sh["to"]) == (32, 1024) and sh["low"] <= sh["log2_shift"] <= sh["high"]
        assert sh["verdict"] in ("moves", "does not move", "inconclusive") and 0 <= sh["p_moves"] <= sh["p_rises"] + 1e-12
    json.dumps(js, allow_nan=False)
    # rerun from the results file alone
    (tmp_path / "base.pt").unlink()
    (tmp_path / "pool.npz").unlink()
    again = run_validate(tmp_path, config=cfg, figures=False)
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert kinds.count("run_done") == 12 and kinds.count("base") == 1 and kinds.count("pool") == 1
    assert not (tmp_path / "base.pt").exists()
    assert again.measured == res.measured
    assert again.to_json()["calibrated"] == js["calibrated"]
    # a calibrated predictor that cannot calibrate on the pilots leaves its row unscored, with the
    # reason, and the rest of the result as it was
    from isosim.errors import IsosimInputError
    from isosim.lm.heldout import Predictor

    def cannot(p):
        raise IsosimInputError("cannot estimate the pilots' noise")
    failed = run_validate(tmp_path, config=cfg, figures=False, calibrated=Predictor(cannot)).to_json()
    assert failed["measured"] == js["measured"] and failed["calibrated"]["alternatives"] == js["calibrated"]["alternatives"]
    assert failed["calibrated"]["easy"] is None and failed["calibrated"]["status"].startswith("not scored")
    assert "not scored: the calibration on the pilots failed: cannot estimate" in (tmp_path / "report.md").read_text()


def test_cli_scale_errors_create_nothing(tmp_path, capsys, monkeypatch):
    import isosim.cli as cli

    if "lm" not in cli.SUBCOMMANDS:
        monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + ("lm",))
    out = tmp_path / "never"
    assert cli.main(["lm", "validate", "--quick", "--scale", "medium", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--scale" in err and not out.exists()
    assert cli.main(["lm", "validate", "--scale", "study", "--max-budget", "3000000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--max-budget" in err and not out.exists()
    with pytest.raises(SystemExit) as exc:
        cli.main(["lm", "validate", "--scale", "huge", "--out", str(out)])
    assert exc.value.code == 2 and not out.exists()
    with pytest.raises(SystemExit) as exc:
        cli.main(["lm", "validate", "--workers", "0", "--out", str(out)])
    assert exc.value.code == 2 and not out.exists()


def test_cli_lr_sets_every_runs_rate_and_bad_rates_create_nothing(tmp_path, capsys, monkeypatch):
    """``--lr`` replaces the configuration's GRPO learning rate and nothing else; a rate that is not
    a finite number above 0 is a usage error before any file is written."""
    from dataclasses import replace

    import isosim.cli as cli
    import isosim.lm.validate as validate
    from isosim.lm.protocol import study_config

    if "lm" not in cli.SUBCOMMANDS:
        monkeypatch.setattr(cli, "SUBCOMMANDS", cli.SUBCOMMANDS + ("lm",))
    seen = {}

    def fake(out, config=None, **kw):
        seen["cfg"] = config
        raise SystemExit(0)
    monkeypatch.setattr(validate, "run_validate", fake)
    with pytest.raises(SystemExit):
        cli.main(["lm", "validate", "--scale", "study", "--lr", "8.5e-4", "--out", str(tmp_path / "a")])
    study = study_config()
    assert seen["cfg"] == replace(study, grpo=replace(study.grpo, lr=8.5e-4))
    assert seen["cfg"].config_id() != study.config_id()
    out = tmp_path / "never"
    for bad in ("0", "-1e-3", "nan", "inf", "fast"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["lm", "validate", "--scale", "study", "--lr", bad, "--out", str(out)])
        assert exc.value.code == 2 and not out.exists()
        assert "--lr" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["lm", "validate", "--scale", "study", "--seeds", "12", "--out", str(tmp_path / "a")])
    assert seen["cfg"] == replace(study, seeds=12) and seen["cfg"].config_id() == study.config_id()
    for bad in ("0", "-2", "1.5", "many"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["lm", "validate", "--scale", "study", "--seeds", bad, "--out", str(out)])
        assert exc.value.code == 2 and not out.exists()
        assert "--seeds" in capsys.readouterr().err


def test_calibrated_predictor_feeds_the_pilots_to_isosim_calibrate(monkeypatch):
    """The calibrated predictor hands ``isosim.calibrate.calibrate`` the pilots' curves (seed means
    with one seed per n, else one run per seed) anchored at compute 0 on the base value, the pass rates of the measured counts, the pilots'
    B_problem, and maps the best fit's n*(C) at the target budgets to the grid."""
    import pandas as pd

    import isosim.calibrate as calmod
    from isosim.lm.heldout import Pilots, calibrated_surrogate
    from isosim.lm.protocol import quick_config

    seen = {}

    class FakeCalibration:
        knobs = {"lr": 0.01}
        details = {"training": None}

        def predict_n_star(self, budgets, ns=None, b_problem=None):
            seen.update(budgets=list(budgets), ns=list(ns), b_problem=b_problem)
            return pd.DataFrame({"compute": budgets, "n": [2, 8, 16][: len(budgets)],
                                 "n_low": [2, 4, 8][: len(budgets)], "n_high": [4, 16, 32][: len(budgets)]})

    def fake_calibrate(runs, pass_rates, metric, **kw):
        seen.update(runs=runs, pass_rates=np.asarray(pass_rates), metric=metric, **kw)
        return FakeCalibration()

    monkeypatch.setattr(calmod, "calibrate", fake_calibrate)
    cfg = replace(quick_config(), pass_rate_estimate="raw")
    curves = {2: {1000: 0.3, 2000: 0.35}, 8: {1000: 0.25, 2000: 0.4}}
    p = Pilots("easy", curves, 2000, [4000, 8000, 16000], [2, 8, 32], 4, 0.2, np.array([4, 8, 16]),
               np.array([2, 10]), 16, 2)
    got = calibrated_surrogate(cfg)(p)
    assert got == {4000: 2, 8000: 8, 16000: 8}  # 16 is one doubling from 8 and from 32: the smaller wins
    runs = seen["runs"]
    assert set(runs["B_problem"]) == {4} and seen["metric"] == "avg@1" and seen["b_problem"] == 4
    assert runs[runs["compute"] == 0]["avg@1"].tolist() == [0.2, 0.2]
    assert sorted(map(tuple, runs[runs["compute"] > 0][["n", "compute", "avg@1"]].values.tolist())) == [
        (2, 1000, 0.3), (2, 2000, 0.35), (8, 1000, 0.25), (8, 2000, 0.4)]
    assert seen["base"].algo.optimizer == "adamw" and seen["base"].algo.lr_rule == cfg.lr_rule == "constant"
    np.testing.assert_allclose(seen["pass_rates"], [0.25, 0.5, 1.0])
    np.testing.assert_allclose(seen["val_pass_rates"], [0.125, 0.625])
    assert seen["ns"] == [2, 8, 32] and seen["budgets"] == [4000, 8000, 16000]
    assert p.extra["calibrated_interval"][2] == {"compute": 16000, "n_low": 8, "n_high": 32}
    # with several seeds per pilot n, each seed is a run of its own (the noise is measured between seeds)
    p.seed_curves = {2: {0: {1000: 0.28, 2000: 0.33}, 1: {1000: 0.32, 2000: 0.37}}, 8: {0: {1000: 0.25, 2000: 0.4}}}
    calibrated_surrogate(cfg)(p)
    runs = seen["runs"]
    assert sorted(set(runs["run"])) == ["pilot-n2-seed0", "pilot-n2-seed1", "pilot-n8-seed0"]
    assert (runs["compute"] == 0).sum() == 3 and runs[runs["compute"] == 0]["avg@1"].tolist() == [0.2] * 3
    assert sorted(map(tuple, runs[runs["compute"] > 0][["run", "compute", "avg@1"]].values.tolist())) == [
        ("pilot-n2-seed0", 1000, 0.28), ("pilot-n2-seed0", 2000, 0.33), ("pilot-n2-seed1", 1000, 0.32),
        ("pilot-n2-seed1", 2000, 0.37), ("pilot-n8-seed0", 1000, 0.25), ("pilot-n8-seed0", 2000, 0.4)]
    assert seen["training"] is None and p.extra["calibrated_training"] == "none"  # no training reward logged
    # a training reward of every pilot run (three blocks or more each) is fitted beside validation, by run
    p.train_curves = {2: {0: {250: 0.2, 750: 0.3, 1500: 0.4}, 1: {250: 0.25, 750: 0.3, 1500: 0.45}},
                      8: {0: {250: 0.2, 750: 0.22, 1500: 0.3}}}
    calibrated_surrogate(cfg)(p)
    tr = seen["training"]
    assert sorted(map(tuple, tr[["run", "n", "B_problem", "compute", "train_reward"]].values.tolist()))[:3] == [
        ("pilot-n2-seed0", 2, 4, 250, 0.2), ("pilot-n2-seed0", 2, 4, 750, 0.3), ("pilot-n2-seed0", 2, 4, 1500, 0.4)]
    assert len(tr) == 9 and set(tr["run"]) == set(seen["runs"]["run"])
    assert seen["training_mode"] == "auto"
    calibrated_surrogate(cfg, training_mode="always")(p)
    assert seen["training_mode"] == "always"
    calibrated_surrogate(cfg, training=False)(p)
    assert seen["training"] is None
    del p.train_curves[8][0][1500]  # one run with two blocks: too few to fit, so none is
    calibrated_surrogate(cfg)(p)
    assert seen["training"] is None


def test_pilots_carry_the_training_reward_blocks_that_end_before_the_cut():
    """``SubsetRuns.from_evals`` reads each run's ``train_curve`` from its ``run_done`` record
    (blocks of ``train_curve_block`` steps of ``rollouts / steps`` rollouts each); a pilot cut at C
    keeps the blocks that end at or before C, each at the middle of its compute."""
    from isosim.lm.heldout import SubsetRuns, make_pilots

    grid, budgets = [2, 8], [100, 200, 400]
    counts = {n: {0: {c: [5] for c in budgets}} for n in grid}
    evals = [{"subset": "easy", "n": 0, "compute": 0, "counts": [3]}]
    evals += [{"subset": "easy", "n": n, "seed": 0, "compute": c, "counts": v}
              for n, by_s in counts.items() for c, v in by_s[0].items()]
    done = [{"subset": "easy", "n": 2, "seed": 0, "steps": 100, "rollouts": 400, "train_curve_block": 10,
             "train_curve": [0.1 * k for k in range(10)]},
            {"subset": "hard", "n": 8, "seed": 0, "steps": 10, "rollouts": 400, "train_curve_block": 1,
             "train_curve": [0.5] * 10}]
    runs = SubsetRuns.from_evals(evals, "easy", grid, budgets, 10, done=done)
    assert list(runs.train) == [2]  # the hard subset's run is not this subset's
    pil = make_pilots(runs, "two", 1600, 2, np.zeros(3), np.zeros(2), 16)  # cut at 100 rollouts
    assert pil.train_curves == {2: {0: {20.0: 0.0, 60.0: 0.1}}}  # blocks of 40 rollouts: 0-40, 40-80
    assert runs.train_curves([2], 400)[2][0][380.0] == pytest.approx(0.9)


def test_learning_rate_rule_per_run():
    """The constant rule gives every run ``grpo.lr``; the study's sqrt(B) rule gives ``grpo.lr`` at
    the reference batch and scales it by sqrt(n B_problem / reference); the rule enters the id
    (the constant default leaves stored ids as they were) and the surrogate's settings."""
    from isosim.lm.compare import surrogate_algo

    cfg = medium_config()
    assert cfg.lr_rule == "constant" and {cfg.run_lr(n, 32) for n in cfg.n_grid} == {cfg.grpo.lr}
    sq = replace(cfg, lr_rule="sqrt", lr_ref_batch=256)
    assert sq.run_lr(8, 32) == pytest.approx(cfg.grpo.lr)
    assert sq.run_lr(2, 32) == pytest.approx(cfg.grpo.lr / 2) and sq.run_lr(32, 32) == pytest.approx(2 * cfg.grpo.lr)
    g = sq.run_grpo(64, 16)
    assert (g.n, g.b_problem, g.lr) == (64, 16, pytest.approx(cfg.grpo.lr * 2)) and g.betas == cfg.grpo.betas
    assert replace(cfg, lr_rule="constant").config_id() == cfg.config_id()
    assert len({cfg.config_id(), sq.config_id(), replace(sq, lr_ref_batch=512).config_id()}) == 3
    assert surrogate_algo(sq, 0.01).lr_rule == "sqrt" and surrogate_algo(cfg, 0.01).lr_rule == "constant"
    from isosim.lm.report import _lr_text

    assert _lr_text(cfg) == "lr 0.0006 (AdamW, constant)"
    assert "sqrt(n B_problem / 256)" in _lr_text(sq) and "n=2: 0.0003" in _lr_text(sq) and "n=32: 0.0012" in _lr_text(sq)
    with pytest.raises(ValueError, match="lr_rule"):
        replace(cfg, lr_rule="linear")
    with pytest.raises(ValueError, match="lr_ref_batch"):
        replace(cfg, lr_ref_batch=0)


def test_an_interrupted_worker_pool_stops_its_workers_at_once():
    """When the loop over finished runs is interrupted (here by an error in the callback; Ctrl-C
    and, through the CLI, SIGTERM raise the same way), the spawned workers are terminated instead
    of being left to finish a long run: the call returns within seconds and no child is left."""
    import multiprocessing as mp
    import time

    from isosim.lm.validate import in_workers

    def stop(_):
        raise KeyboardInterrupt

    others = set(mp.active_children())  # children that earlier tests in this process left
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        in_workers(time.sleep, [0.0, 120.0, 120.0], 2, stop)
    assert time.perf_counter() - t0 < 60
    assert set(mp.active_children()) <= others
    got = []
    in_workers(math.sqrt, [4.0, 9.0], 2, got.append)  # uninterrupted: every result, then a clean shutdown
    assert sorted(got) == [2.0, 3.0] and set(mp.active_children()) <= others


def test_lm_validate_exits_on_sigterm_and_restores_the_handler(monkeypatch):
    """`isosim lm validate` turns SIGTERM into an exit (so the worker pool above is stopped with
    it) only while it runs; the process's own handler is back afterwards."""
    import os
    import signal

    import isosim.cli.lm as cli_lm

    seen = {}

    def fake_validate(args):
        seen["handler"] = signal.getsignal(signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli_lm, "_validate", fake_validate)
    from isosim.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["lm", "validate", "--quick", "--out", "unused"])
    assert exc.value.code == 128 + signal.SIGTERM and seen["handler"] is cli_lm._exit_on_sigterm
    assert signal.getsignal(signal.SIGTERM) == before


def test_checkpointed_run_continues_with_the_numbers_of_a_straight_run(tmp_path):
    """A Q1 run checkpointed at C_max = 64 and continued to 128 (``--max-budget`` on a configuration
    with ``checkpoints``) gives the same evaluations, training rewards and final state as a run
    trained straight to 128; the budget fields are left out of the configuration id, so the
    continued run shares the results file; the continued run trains only the new steps."""
    from isosim.lm.protocol import with_max_budget
    from isosim.lm.validate import train_q1_run

    spec = TaskSpec(1, 4)
    cfg = replace(quick_config(), name="test-ckpt", task=spec, b_problem=4, n_grid=(2, 4), budget=128, min_budget=128,
                  n_budgets=3, val_size=6, eval_samples=4, checkpoints=True, subsets=("easy",),
                  model=GPTConfig(VOCAB_SIZE, spec.block_size, n_layer=1, n_head=2, n_embd=16))
    short = with_max_budget(cfg, 64)
    assert (short.budget, short.min_budget, short.n_budgets) == (64, 64, 2)
    assert short.config_id() == cfg.config_id() != replace(cfg, checkpoints=False).config_id()
    with pytest.raises(ValueError):
        with_max_budget(cfg, 96)
    rng = np.random.default_rng(5)
    train, val = sample_problems(10, spec, rng), sample_problems(6, spec, rng)
    torch.manual_seed(0)
    base = GPT(cfg.model).state_dict()  # a fresh model of the configuration's shape
    args = (base, train, val, "easy", 2, 0)
    straight = train_q1_run(cfg, *args, 128, checkpoint=tmp_path / "a.pt")
    first = train_q1_run(short, *args, 64, checkpoint=tmp_path / "b.pt")
    cont = train_q1_run(cfg, *args, 128, checkpoint=tmp_path / "b.pt")
    assert [r["step"] for r in first[:-1]] == [4, 8] and [r["step"] for r in straight[:-1]] == [4, 8, 16]
    assert cont[-1]["resumed_from_step"] == 8 and cont[-1]["steps"] == straight[-1]["steps"] == 16
    assert [r.get("resumed", False) for r in cont[:-1]] == [True, True, False]
    for a, b in zip(straight[:-1], cont[:-1]):
        for key in ("step", "compute", "tokens", "value", "counts", "train_reward", "train_reward_since", "budget"):
            assert a[key] == b[key], key
    assert straight[-1]["train_curve"] == cont[-1]["train_curve"] and straight[-1]["tokens"] == cont[-1]["tokens"]
    sa, sb = torch.load(tmp_path / "a.pt", weights_only=False), torch.load(tmp_path / "b.pt", weights_only=False)
    assert all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])
    assert np.array_equal(sa["rewards"], sb["rewards"]) and sa["steps"] == sb["steps"] == 16
    # a shorter run does not overwrite a longer checkpoint; another run's checkpoint is not used
    again = train_q1_run(short, *args, 64, checkpoint=tmp_path / "b.pt")
    assert again[-1]["resumed_from_step"] == 0 and torch.load(tmp_path / "b.pt", weights_only=False)["steps"] == 16
    other = train_q1_run(cfg, base, train, val, "easy", 2, 1, 128, checkpoint=tmp_path / "b.pt")
    assert other[-1]["resumed_from_step"] == 0


def test_easy_only_checkpointed_grid_extends_and_reports_training_reward(tmp_path):
    """An easy-only configuration with checkpoints, run to C_max = 256 and then to 512 on the
    same folder (``--max-budget``): one results file (the configuration id leaves the budget
    out), the second invocation continues every run from its checkpoint and trains only the new
    steps, and the result holds every run's validation and training-reward curves, which the
    report tabulates; a third invocation trains nothing. A fourth with one more seed trains that
    seed's runs only, in the same results file; one with fewer seeds reports the first ones, and
    one with a later ``first_seed`` the later ones."""
    from isosim.lm.protocol import with_max_budget

    cfg = replace(quick_config(), name="test-study", pool_size=400, train_size=16, val_size=16, n_grid=(2, 4),
                  budget=512, min_budget=512, n_budgets=4, eval_samples=4, surrogate_seeds=1,
                  surrogate_lrs=(0.01, 0.1), time_budget_s=1e5, reserve_s=10, seeds=2, fixed_batch=False,
                  bootstrap=50, sft=SFTConfig(steps=250, batch=128, lr=3e-3), subsets=("easy",), checkpoints=True)
    first = run_validate(tmp_path, config=with_max_budget(cfg, 256), figures=False)
    assert set(first.measured) == {"easy"} and [p["compute"] for p in first.measured["easy"]] == [64, 128, 256]
    res = run_validate(tmp_path, config=cfg, figures=False)
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len({r["config_id"] for r in recs}) == 1 and [r["kind"] for r in recs].count("base") == 1
    done = [r for r in recs if r["kind"] == "run_done"]
    assert len(done) == 8 and sorted(r["resumed_from_step"] for r in done[4:]) == [8, 8, 16, 16]  # 256 / (n * 8)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == sorted(
        f"easy-n{n}-seed{s}.pt" for n in (2, 4) for s in (0, 1))
    js = res.to_json()
    assert [p["compute"] for p in js["measured"]["easy"]] == [64, 128, 256, 512] and "hard" not in js["measured"]
    runs = js["runs"]["easy"]
    assert [(r["n"], r["seed"]) for r in runs] == [(0, 0), (2, 0), (2, 1), (4, 0), (4, 1)]
    for r in runs[1:]:
        assert r["compute"] == [64, 128, 256, 512] and all(0 <= v <= 1 for v in r["train_reward"] + r["value"])
        assert r["correct"] == [round(v * 16 * 4) for v in r["value"]]
    # the evaluations up to 256 were carried over unchanged
    old = {(r["n"], r["seed"]): r for r in first.to_json()["runs"]["easy"]}
    assert all(r["value"][:3] == old[(r["n"], r["seed"])]["value"] for r in runs[1:])
    assert "Training reward beside validation" in (tmp_path / "report.md").read_text()
    run_validate(tmp_path, config=cfg, figures=False)
    # more seeds are more runs of the same design: the same results file, only the new seed trains;
    # fewer seeds report the first ones
    assert replace(cfg, seeds=3).config_id() == cfg.config_id() != replace(cfg, seeds=3, checkpoints=False).config_id()
    three = run_validate(tmp_path, config=replace(cfg, seeds=3), figures=False)
    recs = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    new = [r for r in recs if r["kind"] == "run_done"][8:]
    assert sorted((r["n"], r["seed"]) for r in new) == [(2, 2), (4, 2)] and len({r["config_id"] for r in recs}) == 1
    assert [r["kind"] for r in recs].count("base") == 1
    assert [(r["n"], r["seed"]) for r in three.to_json()["runs"]["easy"]] == [
        (0, 0), (2, 0), (2, 1), (2, 2), (4, 0), (4, 1), (4, 2)]
    one = run_validate(tmp_path, config=replace(cfg, seeds=1), figures=False).to_json()["runs"]["easy"]
    assert [(r["n"], r["seed"]) for r in one] == [(0, 0), (2, 0), (4, 0)]
    assert [r["value"] for r in one[1:]] == [r["value"] for r in runs if r["seed"] == 0 and r["n"] > 0]
    # first_seed picks which stored indices form the grid (here all stored: nothing trains)
    later = run_validate(tmp_path, config=replace(cfg, seeds=2, first_seed=1), figures=False).to_json()["runs"]["easy"]
    assert [(r["n"], r["seed"]) for r in later] == [(0, 0), (2, 1), (2, 2), (4, 1), (4, 2)]
    assert "2 training seed(s) per (subset, n) (indices 1 to 2)" in (tmp_path / "report.md").read_text()
    # both C_max are stored: either is recomputed from the results file alone, without training
    (tmp_path / "base.pt").unlink()
    again = run_validate(tmp_path, config=with_max_budget(cfg, 256), figures=False)
    assert again.measured == first.measured
    assert [json.loads(line)["kind"] for line in (tmp_path / "results.jsonl").read_text().splitlines()].count(
        "run_done") == 10 and not (tmp_path / "base.pt").exists()


def test_the_reports_standard_error_is_between_seeds():
    """With several seeds the report's ± s.e. is the seed mean's, sd / sqrt(seeds), at the budget
    where the best-so-far value was reached; with one seed there is none (the binomial one is used)."""
    from isosim.lm.report import _seed_se

    rows = [{"n": 8, "seed": s, "compute": [64, 128], "value": v} for s, v in enumerate(([0.5, 0.7], [0.6, 0.9]))]
    rows.append({"n": 32, "seed": 0, "compute": [64, 128], "value": [0.4, 0.8]})
    assert _seed_se(rows, 8, 128, 0.8) == pytest.approx(np.std([0.7, 0.9], ddof=1) / math.sqrt(2))
    assert _seed_se(rows, 8, 128, 0.55) == pytest.approx(np.std([0.5, 0.6], ddof=1) / math.sqrt(2))  # reached at 64
    assert _seed_se(rows, 8, 64, 0.55) == pytest.approx(0.05)
    assert _seed_se(rows, 32, 128, 0.8) is None


def test_measured_curves_average_the_seeds():
    from isosim.lm.compare import measured_curves

    evals = [{"subset": "easy", "n": 4, "compute": 64, "value": v, "seed": s} for s, v in enumerate((0.2, 0.4))]
    evals += [{"subset": "easy", "n": 0, "compute": 0, "value": 0.1}, {"subset": "hard", "n": 4, "compute": 64, "value": 0.9}]
    assert measured_curves(evals, "easy") == {4: {64: pytest.approx(0.3)}}


def test_every_scale_is_a_cli_choice_and_the_variants_differ_from_the_study_only_in_their_step():
    """``--scale`` offers exactly the registered configurations; ``study-b32`` is the study with
    B_problem 32 and twice its learning rate, ``study-lr`` the study with twice its learning rate
    to 2^20, nothing else (so the runs compare)."""
    import argparse
    from dataclasses import replace

    import isosim.cli.lm as cli_lm
    from isosim.lm.protocol import SCALES

    parser = argparse.ArgumentParser()
    cli_lm.register(parser.add_subparsers())
    validate = parser._subparsers._group_actions[0].choices["lm"]._subparsers._group_actions[0].choices["validate"]
    scale = next(a for a in validate._actions if a.dest == "scale")
    assert tuple(scale.choices) == tuple(SCALES)
    study, backup = SCALES["study"](), SCALES["study-b32"]()
    assert (backup.b_problem, backup.grpo.lr) == (32, 2 * study.grpo.lr)
    assert replace(backup, name="study", b_problem=study.b_problem, grpo=study.grpo) == study
    assert backup.checkpoints and backup.n_grid == (8, 32, 128)
    fast = SCALES["study-lr"]()
    assert fast.grpo.lr == 2 * study.grpo.lr and (fast.budget, fast.n_budgets) == (2**20, 8)
    assert replace(fast, name="study", grpo=study.grpo, budget=study.budget, min_budget=study.min_budget,
                   n_budgets=study.n_budgets) == study
    cross = SCALES["study-crossover"]()
    assert (cross.grpo.lr, cross.n_grid, cross.seeds, cross.seed) == (8.5e-4, (8, 32), 8, 1)
    assert cross.budget // 2 ** (cross.n_budgets - 1) == 2**14 and cross.budget == 2**20
    assert replace(cross, name="study-lr", grpo=fast.grpo, n_grid=fast.n_grid, seeds=fast.seeds,
                   n_budgets=fast.n_budgets, seed=fast.seed) == fast
    confirm = SCALES["study-confirm"]()
    assert (confirm.seeds, confirm.seed, confirm.budget // 2 ** (confirm.n_budgets - 1)) == (16, 2, 2**15)
    assert replace(confirm, name="study-crossover", seeds=8, n_budgets=cross.n_budgets, seed=1) == cross
    replicate = SCALES["study-replicate"]()
    assert (replicate.seed, replicate.shift_start) == (3, 2**17) and confirm.shift_start is None
    assert replace(replicate, name="study-confirm", seed=2, shift_start=None) == confirm
    # the test's first budget is analysis, not training: it leaves the configuration id
    assert replace(replicate, shift_start=None).config_id() == replicate.config_id()
    reseed = SCALES["study-reseed"]()
    assert list(reseed.seed_indices()) == list(range(16, 32)) and reseed.shift_start == 2**17
    assert replace(reseed, name="study-crossover", seeds=8, first_seed=0, shift_start=None) == cross
    # which seed indices are trained is the count's business: the id is the same run design
    assert replace(reseed, first_seed=0).config_id() == reseed.config_id()
    assert replace(cross, checkpoints=False, first_seed=4).config_id() != replace(cross, checkpoints=False).config_id()


def test_held_out_text_names_what_the_calibration_did_with_the_training_reward():
    """The report's held-out section says, per subset, whether the calibrated surrogate's fit kept
    the pilots' training reward, set it aside (with its misfit) or had none, and its knobs."""
    from types import SimpleNamespace

    from isosim.lm.report import held_out_text

    score = {"mean_abs_log2_error": 1.0, "share_within_one_doubling": 0.5, "budgets": 4}
    h = {"protocol": {"pilot_n": [8, 32], "pilot_cut": 64, "budgets": [128, 256], "interval": 0.9},
         "easy": score, "pilot_rollouts": 10, "predicted": {"easy": [{"compute": 128, "n": 32}]}, "status": "scored",
         "alternatives": {}, "details": {"easy": {"calibrated_knobs": {"lr": 0.325, "skill_link": 0.95},
                                                  "calibrated_training": "set aside",
                                                  "calibrated_training_misfit": 4.73}}}
    text = "\n".join(held_out_text(SimpleNamespace(held_out=h, measured={"easy": []})))
    assert "easy: its training reward set aside (the best fit with it missed it by 4.7 times its noise)" in text
    assert "knobs lr 0.325, skill_link 0.95" in text
    h["details"]["easy"]["calibrated_training"] = "kept"
    assert "its training reward fitted beside validation" in "\n".join(
        held_out_text(SimpleNamespace(held_out=h, measured={"easy": []})))
