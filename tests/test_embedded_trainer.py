"""The embedded trainer: prime-rl's classic contract, GRPO math, exact resume, real learning."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from embedded_trainer import config

ROOT = Path(__file__).resolve().parent.parent
TOY = "builtin:tiny-char-qwen2?sft_steps=60&sft_lr=0.01&hidden_size=32&ffn=64&layers=1&heads=2"


# ---- config: composition and schema (no torch) -----------------------------------------------

def _toml(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_composition_later_files_and_cli_win_and_lists_are_replaced(tmp_path):
    a = _toml(tmp_path / "a.toml", """max_steps = 5
[trainer.optim]
lr = 0.1
[orchestrator]
batch_size = 32
rollouts_per_example = 4
[[orchestrator.train.env]]
id = "one"
[[orchestrator.train.env]]
id = "two"
""")
    b = _toml(tmp_path / "b.toml", """max_steps = 7
[orchestrator]
batch_size = 64
[[orchestrator.train.env]]
id = "three"
""")
    cfg = config.load(["@", a, "@", b, "--max-steps", "9", "--trainer.optim.lr", "0.5",
                       "--no-clean-output-dir"])
    assert cfg.max_steps == 9                          # CLI beats both files
    assert cfg.orchestrator.batch_size == 64           # later file wins
    assert cfg.orchestrator.rollouts_per_example == 4  # tables deep-merge
    assert [e.id for e in cfg.orchestrator.train.env] == ["three"]  # lists replaced whole
    assert cfg.trainer.optim.lr == 0.5 and cfg.clean_output_dir is False


@pytest.mark.parametrize("text, needle", [
    ("max_steps = 3\n[trainer]\n[orchestrator]\nbatch_sise = 4\n", "batch-sise"),
    ("max_steps = 3\n[trainer]\n[orchestrator]\n[bogus]\n", "bogus"),
    ("max_steps = 3\n[orchestrator]\n", "--trainer"),
    ("max_steps = 3\n[trainer]\n[orchestrator]\nbatch_size = 10\nrollouts_per_example = 4\n", "divisible"),
    ("max_steps = 3\n[trainer]\n[orchestrator]\n[ckpt]\nresume_step = -2\n", "resume-step"),
])
def test_unknown_keys_and_bad_values_are_errors(tmp_path, text, needle):
    with pytest.raises(config.ConfigError, match=needle):
        config.load(["@", _toml(tmp_path / "c.toml", text)])


def test_a_driver_rendered_config_validates_unchanged_and_has_no_embedded_only_keys(tmp_path):
    from driver.dialects.classic import ClassicDialect
    from driver.run.model import Knobs

    d = ClassicDialect()
    hub = {"env_id": "stock_arithmetic", "eval_size": 200}
    knobs = Knobs.for_backend("prime_rl", model="builtin:tiny-char-qwen2", batch_size=64, rollouts_per_example=4,
                  steps_per_run=30, eval_examples=200, max_completion_tokens=96)
    text = d.render_run(arm="iter_1", purpose="test", hub=hub, knobs=knobs, eval_knobs=knobs,
                        train_envs=[d.train_env_block("stock_arithmetic_iter_1")], resume_step=30)
    raw = tomllib.loads(text)
    assert "embedded" not in raw                       # prime-rl would reject the table
    cfg = config.load(["@", _toml(tmp_path / "rl.toml", text)]
                      + d.iter0_overrides(knobs, tmp_path / "out")[6:])
    assert cfg.max_steps == 60 and cfg.ckpt.resume_step == 30
    assert cfg.orchestrator.eval.env[0].num_examples == 200
    assert cfg.orchestrator.train.sampling.max_completion_tokens == 96


def test_prompts_per_step_follow_env_ratios_and_streams_are_stateless():
    from embedded_trainer.rl import allocate, draw

    assert allocate(16, [1.0, 1.0]) == [8, 8]
    assert allocate(16, [3.0, 1.0]) == [12, 4]
    assert sum(allocate(17, [1.0, 1.0, 1.0])) == 17
    # one epoch is a permutation of every row; the stream continues across epochs, and any
    # window is a pure function of (seed, env, position): what a resumed run needs
    epoch = draw(10, 0, "env", 0, 10)
    assert sorted(epoch) == list(range(10))
    assert draw(10, 0, "env", 7, 6) == (epoch + draw(10, 0, "env", 10, 10))[7:13]
    assert draw(10, 1, "env", 0, 10) != epoch


# ---- GRPO math ---------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
from embedded_trainer import grpo  # noqa: E402


def test_constant_groups_get_exactly_zero_advantage_and_others_are_normalised():
    r = torch.tensor([[0.1, 0.1, 0.1, 0.1], [1.0, 0.0, 0.0, 1.0], [0.3, 0.3, 0.3, 0.3]])
    adv, constant = grpo.group_advantages(r)
    assert constant.tolist() == [True, False, True]
    assert (adv[0] == 0).all() and (adv[2] == 0).all()
    # population std of [1,0,0,1] is 0.5: advantages are +-1 (up to the 1e-8 guard)
    assert torch.allclose(adv[1], torch.tensor([1.0, -1.0, -1.0, 1.0]), atol=1e-6)


def _surrogate_grad(new: float, old: float, a: float, eps: float = 0.2):
    x = torch.tensor([[new]], dtype=torch.float64, requires_grad=True)
    loss = grpo.clipped_surrogate(x, torch.tensor([[old]], dtype=torch.float64),
                                  torch.tensor([a], dtype=torch.float64),
                                  torch.ones(1, 1, dtype=torch.bool), eps)
    loss.backward()
    return loss.item(), x.grad.item()


@pytest.mark.parametrize("a", [2.0, -2.0])
def test_clipped_surrogate_sign_and_gradient_inside_the_trust_region(a):
    import math

    loss, grad = _surrogate_grad(math.log(1.05), 0.0, a)
    # inside the clip range: loss = -rho*A and d/dlogp = -rho*A
    assert loss == pytest.approx(-1.05 * a) and grad == pytest.approx(-1.05 * a)
    # descending the loss raises log-prob for A > 0 and lowers it for A < 0
    assert (grad < 0) == (a > 0)


@pytest.mark.parametrize("log_ratio, a, clipped", [
    (0.5, 1.0, True),    # rho > 1+eps with A > 0: clipped, no gradient
    (-0.5, -1.0, True),  # rho < 1-eps with A < 0: clipped, no gradient
    (0.5, -1.0, False),  # rho > 1+eps with A < 0: the unclipped term is the min, gradient flows
    (-0.5, 1.0, False),  # rho < 1-eps with A > 0: unclipped, gradient flows
])
def test_clipped_surrogate_clipped_branches(log_ratio, a, clipped):
    import math

    loss, grad = _surrogate_grad(log_ratio, 0.0, a)
    rho = math.exp(log_ratio)
    if clipped:
        assert grad == 0.0
        assert loss == pytest.approx(-min(rho * a, max(0.8, min(1.2, rho)) * a))
    else:
        assert grad == pytest.approx(-rho * a) and loss == pytest.approx(-rho * a)


def test_surrogate_averages_tokens_then_responses():
    new = torch.zeros(2, 3, dtype=torch.float64)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([1.0, 3.0], dtype=torch.float64)
    # each response's mean over its own tokens is -A; then the mean over responses
    assert grpo.clipped_surrogate(new, new, adv, mask, 0.2).item() == pytest.approx(-2.0)
    # a constant normaliser (Dr. GRPO): sums over tokens / 3, so the long response weighs 3x:
    # (-1 * 1 / 3 + -3 * 3 / 3) / 2
    assert grpo.clipped_surrogate(new, new, adv, mask, 0.2, length_norm=3).item() == \
        pytest.approx((-1 / 3 - 3.0) / 2)


def test_exact_kl_matches_torch_kl_div_in_float64():
    g = torch.Generator().manual_seed(0)
    p_logits = torch.randn(2, 5, 11, generator=g, dtype=torch.float64) * 3
    q_logits = torch.randn(2, 5, 11, generator=g, dtype=torch.float64) * 3
    mask = torch.ones(2, 5, dtype=torch.bool)
    ours = grpo.exact_kl(p_logits, q_logits, mask, block=3)  # blocks that cut rows unevenly
    logp = torch.log_softmax(p_logits, -1)
    logq = torch.log_softmax(q_logits, -1)
    ref = torch.nn.functional.kl_div(logq, logp, log_target=True, reduction="none").sum(-1).mean()
    assert torch.allclose(ours, ref, atol=1e-12, rtol=0)


def test_shared_prefix_forward_equals_a_full_forward_and_sampling_logprobs_match():
    pytest.importorskip("transformers")
    from embedded_trainer import recipe
    from embedded_trainer.rollouts import sample

    tok = recipe.build_tokenizer()
    spec = dict(recipe.DEFAULTS, hidden_size=32, ffn=64, layers=2, heads=2)
    model = recipe.build_model(spec, len(tok)).double()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # sharp, context-dependent distributions: a lost cache would show
        for p in model.parameters():
            p.normal_(0, 0.5, generator=g)
    prompt = torch.randint(6, 90, (17,), generator=g).tolist()
    comps = torch.randint(6, 90, (3, 6), generator=g)
    split = grpo.shared_prefix_logits(model, prompt, comps)
    full = model(input_ids=torch.cat([torch.tensor([prompt] * 3), comps], 1)).logits[:, 16:-1]
    assert torch.allclose(split, full.float(), atol=1e-5)
    # gradients agree too: the prefix's cache keeps its graph
    model.zero_grad()
    split.logsumexp(-1).sum().backward()
    g_split = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    full.logsumexp(-1).sum().backward()
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g_split, [p.grad for p in model.parameters()]))
    # behaviour log-probs captured while sampling (left-padded batch, KV cache) equal the
    # training forward's log-probs for the same tokens, so the first update's ratio is 1
    model = model.float()
    prompts = [prompt, prompt[:9]]
    res = sample(model, prompts, 2, 5, 1.0, eos_id=2, pad_id=0, generator=torch.Generator().manual_seed(3))
    for k in range(4):
        p = prompts[k // 2]
        n = int(res["lengths"][k])
        lp = grpo.token_logprobs(grpo.shared_prefix_logits(model, p, res["tokens"][k:k + 1, :n]),
                                 res["tokens"][k:k + 1, :n], 1.0)
        assert torch.allclose(lp[0], res["logps"][k, :n], atol=1e-4)
        # and a forward that ignored the prompt would not
        alone = grpo.token_logprobs(grpo.shared_prefix_logits(model, p[-1:], res["tokens"][k:k + 1, :n]),
                                    res["tokens"][k:k + 1, :n], 1.0)
        assert not torch.allclose(alone[0], res["logps"][k, :n], atol=1e-2)


def _sharp_model(seed: int):
    """A small random model with sharp, context-dependent distributions (a slot that saw the
    wrong keys, or a draw from the wrong random numbers, would show in its tokens)."""
    from embedded_trainer import recipe

    tok = recipe.build_tokenizer()
    model = recipe.build_model(dict(recipe.DEFAULTS, hidden_size=32, ffn=64, layers=2, heads=2), len(tok))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5, generator=g)
    return model.eval(), tok, g


def test_a_group_sharing_its_prompt_cache_samples_what_a_copied_cache_samples():
    """The shared layout (one cache row per prompt, a 4D mask) against the per-completion copy
    that attention implementations without custom masks get: the same generator draws the same
    tokens with the same log-probs, and the shared mask really isolates the completions."""
    pytest.importorskip("transformers")
    from embedded_trainer import rollouts

    model, _, g = _sharp_model(4)
    assert rollouts.shares_prompt_cache(model)   # transformers' default here: SDPA
    prompts = [torch.randint(6, 90, (n,), generator=g).tolist() for n in (13, 7, 10)]
    shared = rollouts.sample(model, prompts, 3, 8, 1.0, eos_id=2, pad_id=0,
                             generator=torch.Generator().manual_seed(5))
    copied = rollouts.sample(model, prompts, 3, 8, 1.0, eos_id=2, pad_id=0,
                             generator=torch.Generator().manual_seed(5), copy_prompt_cache=True)
    assert torch.equal(shared["tokens"], copied["tokens"])
    assert torch.equal(shared["lengths"], copied["lengths"])
    assert torch.allclose(shared["logps"], copied["logps"], atol=1e-4)
    # the group's completions differ (so a mask that let them see each other would change them)
    assert len({tuple(shared["tokens"][k].tolist()) for k in range(3)}) > 1


def test_a_greedy_slot_beside_the_draws_decodes_the_greedy_pass_and_samples_the_draws_alone():
    """Seed 003's two measurements of a split in one pass: each prompt's greedy completion rides
    in its shared cache beside the draws. What comes back is what a greedy call decodes and what
    a draws-only call with the same generator samples, token for token."""
    pytest.importorskip("transformers")
    from embedded_trainer import sampling

    model, _, g = _sharp_model(6)
    prompts = [torch.randint(6, 90, (n,), generator=g).tolist() for n in (13, 7, 10, 4)]
    both = sampling.sample(model, prompts, 3, 8, 1.0, eos_id=2, pad_id=0,
                           generator=torch.Generator().manual_seed(7), greedy_slot=True)
    greedy = sampling.sample(model, prompts, 1, 8, 0.0, eos_id=2, pad_id=0, generator=None)
    drawn = sampling.sample(model, prompts, 3, 8, 1.0, eos_id=2, pad_id=0,
                            generator=torch.Generator().manual_seed(7))
    g_rows = torch.arange(0, 4 * 4, 4)
    d_rows = torch.tensor([k for k in range(16) if k % 4])
    for key in ("tokens", "lengths", "truncated"):
        assert torch.equal(both[key][g_rows], greedy[key]), key
        assert torch.equal(both[key][d_rows], drawn[key]), key
    assert torch.allclose(both["logps"][d_rows], drawn["logps"], atol=1e-4)
    # the draws differ from the greedy completion (a slot that copied another would not)
    assert any(not torch.equal(both["tokens"][k], both["tokens"][4 * (k // 4)]) for k in d_rows.tolist())
    # a greedy slot needs draws to ride on and a cache to share
    for kwargs in ({"temperature": 0.0}, {"temperature": 1.0, "copy_prompt_cache": True}):
        with pytest.raises(ValueError, match="greedy slot"):
            sampling.sample(model, prompts, 3, 8, eos_id=2, pad_id=0, generator=None,
                            greedy_slot=True, **kwargs)


def test_an_eval_measures_a_split_greedy_and_by_draws_in_one_pass_with_the_rows_of_two(tmp_path, monkeypatch):
    """The trainer's eval pairs a greedy env with the draws env of the same examples (the
    driver renders each split both ways) and writes the rows, in the same order, that sampling
    each env alone writes; an env of other arguments, or greedy at a set temperature, is not
    paired."""
    pytest.importorskip("transformers")
    from types import SimpleNamespace

    from embedded_trainer import rl

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "envs"))
    model, tok, _ = _sharp_model(8)
    text = TOY_CONFIG.format(max_steps=1, model=TOY, kl=0.0).replace(
        "[orchestrator.eval.sampling]\nmax_completion_tokens = 6\n",
        "[orchestrator.eval.sampling]\nmax_completion_tokens = 8\n").replace(
        "[trainer.optim]", '[[orchestrator.eval.env]]\nid = "parity_toy"\nname = "other-args"\n'
        'num_examples = 40\nargs = {with_reference = false}\n'
        '[[orchestrator.eval.env]]\nid = "parity_toy"\nname = "draws"\nnum_examples = 40\n'
        "rollouts_per_example = 4\n[trainer.optim]")
    cfg = config.load(["@", _toml(tmp_path / "rl.toml", text)])
    blocks = cfg.orchestrator.eval.env
    run = SimpleNamespace(cfg=cfg, model=model, tok=tok, device=torch.device("cpu"), seq_len=512,
                          eval_blocks=blocks, eval_envs=[rl.load_env(b) for b in blocks])
    examples = [rl.eval_examples(run, b, e) for b, e in zip(blocks, run.eval_envs)]
    assert rl.eval_pairs(run, examples) == {0: 2}

    def eval_rows(out: Path) -> list[tuple]:
        run.out = out
        rl.evaluate(run, 1)
        return [(x["env_name"], x["example_id"], json.dumps(x["completion"]), x["reward"],
                 x["is_truncated"]) for x in rows(out / "run_default" / "rollouts" / "step_1" / "eval_rollouts.jsonl")]

    paired = eval_rows(tmp_path / "paired")
    monkeypatch.setattr(rl, "eval_pairs", lambda run, examples: {})
    alone = eval_rows(tmp_path / "alone")
    assert paired == alone
    assert [n for n, *_ in alone] == ["parity_toy"] * 40 + ["other-args"] * 40 + ["draws"] * 160
    monkeypatch.undo()
    cfg.orchestrator.eval.sampling.temperature = 0.7
    assert rl.eval_pairs(run, examples) == {}


def test_a_saved_recipe_model_reloads_with_the_same_tokenization(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import verifiers as vf

    from embedded_trainer import common, recipe

    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "envs"))
    env = vf.load_environment("parity_toy")
    path = recipe.materialize(TOY.replace("sft_steps=60", "sft_steps=2"), env, "toy", lambda *a: None)
    assert (path / recipe.MARKER).exists()
    cfg = config.load(["--max-steps", "1", "--trainer.optim.lr", "0.1", "--orchestrator.batch-size",
                       "4", "--model.name", str(path)])
    _, tok, _ = common.load_model(cfg.model.name, env, "toy")
    text = '<think>24 +48=72</think>{"final_stock": 80}\n x ~'
    assert tok.encode(text, add_special_tokens=False) == \
        recipe.build_tokenizer().encode(text, add_special_tokens=False)
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_an_init_recipe_continues_from_the_named_student_and_a_missing_one_is_refused(
        tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    import torch
    import verifiers as vf
    from transformers import AutoModelForCausalLM

    from embedded_trainer import recipe
    from embedded_trainer.errors import TrainerError

    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "envs"))
    env = vf.load_environment("parity_toy")
    quiet = lambda *a: None  # noqa: E731
    first = recipe.materialize(TOY.replace("sft_steps=60", "sft_steps=2"), env, "toy", quiet)
    # a second stage at a vanishing lr stays at the first stage's weights; fresh weights would not
    second = recipe.materialize(f"{recipe.RECIPE_PREFIX}?init={first.name}&sft_steps=1&sft_lr=1e-12",
                                env, "toy", quiet)
    fresh = recipe.materialize(TOY.replace("sft_steps=60", "sft_steps=1").replace(
        "sft_lr=0.01", "sft_lr=1e-12"), env, "toy", quiet)
    assert second != first and second.parent == first.parent
    load = lambda d: AutoModelForCausalLM.from_pretrained(d).state_dict()  # noqa: E731
    a, b, c = load(first), load(second), load(fresh)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert not all(torch.allclose(a[k], c[k], atol=1e-3) for k in a)
    assert json.loads((second / recipe.MARKER).read_text())["spec"]["init"] == first.name
    with pytest.raises(TrainerError, match="names no built student"):
        recipe.materialize(f"{recipe.RECIPE_PREFIX}?init=tiny-char-qwen2-0000&sft_steps=1",
                           env, "toy", quiet)


# ---- the trainer as a process ------------------------------------------------------------------

def trainer_env(tmp_path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "envs"), env.get("PYTHONPATH", "")])
    env["EMBEDDED_TRAINER_CACHE"] = str(tmp_path.parent / "embedded-cache")
    return env


TOY_CONFIG = """max_steps = {max_steps}
[model]
name = "{model}"
[ckpt]
interval = 2
[orchestrator]
batch_size = 32
rollouts_per_example = 4
[orchestrator.train.sampling]
max_completion_tokens = 6
[[orchestrator.train.env]]
id = "parity_toy"
[orchestrator.eval]
interval = 2
[orchestrator.eval.sampling]
max_completion_tokens = 6
[[orchestrator.eval.env]]
id = "parity_toy"
num_examples = 40
[trainer.optim]
lr = 0.003
[embedded]
threads = 1
kl_beta = {kl}
"""


def start_trainer(tmp_path, out: Path, *flags: str, max_steps: int = 4, kl: float = 0.0,
                  model: str = TOY) -> subprocess.Popen:
    cfg = tmp_path / f"rl-{out.name}.toml"
    cfg.write_text(TOY_CONFIG.format(max_steps=max_steps, model=model, kl=kl))
    return subprocess.Popen([sys.executable, "-m", "embedded_trainer.rl", "@", str(cfg),
                             "--output-dir", str(out), *flags], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=trainer_env(tmp_path))


def finish(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_trainer(tmp_path, out: Path, *flags: str, **kw) -> subprocess.CompletedProcess:
    return finish(start_trainer(tmp_path, out, *flags, **kw))


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_layout_row_fields_learning_signal_and_split_hygiene(tmp_path):
    out = tmp_path / "out"
    r = run_trainer(tmp_path, out, max_steps=4)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RL training finished!" in r.stdout
    for step in (2, 4):
        assert (out / "checkpoints" / f"step_{step}" / "trainer" / "state.pt").exists()
        assert (out / "checkpoints" / f"step_{step}" / "STABLE").exists()
        for f in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"):
            assert (out / "weights" / f"step_{step}" / f).exists(), f
        assert (out / "run_default" / "checkpoints" / f"step_{step}" / "orchestrator" / "progress.json").exists()
        assert (out / "run_default" / "broadcasts" / f"step_{step}" / "model.safetensors").exists()
    rd = out / "run_default" / "rollouts"
    # evals at step 0 (base model), at the interval and at the end
    assert sorted(p.name for p in rd.iterdir() if (p / "eval_rollouts.jsonl").exists()) == \
        ["step_0", "step_2", "step_4"]
    # the batch of step s filed under step_{s-1}, as classic prime-rl files it: steps 1-4 in 0-3
    train = [row for s in range(0, 4) for row in rows(rd / f"step_{s}" / "train_rollouts.jsonl")]
    assert len(train) == 4 * 32 and not (rd / "step_4" / "train_rollouts.jsonl").exists()
    required = {"example_id", "prompt", "completion", "reward", "metrics", "is_completed",
                "is_truncated", "answer", "info", "advantage", "env_name", "timing"}
    assert all(required <= set(row) for row in train)
    assert all(row["info"]["n"] % 5 for row in train)              # train rows only ...
    ev = rows(rd / "step_4" / "eval_rollouts.jsonl")
    assert len(ev) == 40 and all(row["info"]["n"] % 5 == 0 for row in ev)  # ... eval rows only
    assert {type(row["reward"]) for row in ev} == {float}
    # the rubric scored them, and groups carried real, zero-mean advantages
    assert {row["reward"] for row in train} == {0.0, 1.0}
    adv = [row["advantage"] for row in train]
    assert any(a != 0 for a in adv) and abs(sum(adv)) < 1e-3
    # the weights moved, and held-out accuracy is reported
    from safetensors.torch import load_file

    w0 = load_file(str(out / "run_default" / "broadcasts" / "step_2" / "model.safetensors"))
    w4 = load_file(str(out / "run_default" / "broadcasts" / "step_4" / "model.safetensors"))
    assert any(not torch.equal(w0[k], w4[k]) for k in w0)
    assert "eval step 4 parity_toy: mean reward" in r.stdout


# the second case runs the bench-only variants too (online difficulty filtering with refills,
# SGD, Dr. GRPO's constant normaliser) with the KL term: their draws and optimiser state must
# survive a resume exactly as the defaults' do
FILTERED = ("--orchestrator.buffer.online-difficulty-filtering", "--embedded.max-refills", "2",
            "--embedded.optimizer", "sgd", "--trainer.optim.lr", "0.05",
            "--embedded.length-normalization", "constant")


# both in the extended command (40 s and more each): a trainer resumed mid-run, step for step
@pytest.mark.extended
@pytest.mark.parametrize("kl, flags", [(0.0, ()), (0.05, FILTERED)], ids=["adamw", "filtered-sgd-kl"])
def test_interrupted_and_resumed_equals_continuous(tmp_path, kl, flags):
    cont, part = tmp_path / "continuous", tmp_path / "resumed"
    # one thread each (TOY_CONFIG), so the two can share the cores without changing results
    both = [start_trainer(tmp_path, cont, *flags, max_steps=4, kl=kl),
            start_trainer(tmp_path, part, *flags, max_steps=2, kl=kl)]   # "interrupted" after step 2
    for r in map(finish, both):
        assert r.returncode == 0, r.stderr[-3000:]
    r = run_trainer(tmp_path, part, *flags, "--ckpt.resume-step", "2", max_steps=4, kl=kl)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "resumed from step 2" in r.stdout
    a = torch.load(cont / "checkpoints" / "step_4" / "trainer" / "state.pt", weights_only=True)
    b = torch.load(part / "checkpoints" / "step_4" / "trainer" / "state.pt", weights_only=True)
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i])
    assert ("momentum" in a["optimizer"]["param_groups"][0]) == bool(flags)   # SGD when asked
    rd = "run_default/rollouts"
    for s in (2, 3):  # steps 3-4's batches: the same rollouts, sampled identically (refills too)
        ra = rows(cont / rd / f"step_{s}" / "train_rollouts.jsonl")
        rb = rows(part / rd / f"step_{s}" / "train_rollouts.jsonl")
        assert [x["example_id"] for x in ra] == [x["example_id"] for x in rb]
        assert [x["completion"] for x in ra] == [x["completion"] for x in rb]
        assert [x["is_filtered"] for x in ra] == [x["is_filtered"] for x in rb]
    pa = json.loads((cont / "run_default/checkpoints/step_4/orchestrator/progress.json").read_text())
    pb = json.loads((part / "run_default/checkpoints/step_4/orchestrator/progress.json").read_text())
    assert pa == pb
    if flags:
        check_filtered_batches(cont / rd, steps=4, prompts=32 // 4)
        assert "filtered " in r.stdout


def check_filtered_batches(rollouts: Path, steps: int, prompts: int) -> None:
    """Online difficulty filtering: every group in a step's batch carries a gradient; every
    group left out had none (or came after the batch was full) and says so, with advantage 0;
    and some step sampled a refill draw."""
    refilled = 0
    for s in range(0, steps):   # the batches of steps 1..steps (filed one dir below)
        got = rows(rollouts / f"step_{s}" / "train_rollouts.jsonl")
        groups = [got[i:i + 4] for i in range(0, len(got), 4)]   # written a group at a time
        assert all(len({(x["example_id"], x["is_filtered"]) for x in g}) == 1 for g in groups)
        batch = [g for g in groups if not g[0]["is_filtered"]]
        dropped = [g for g in groups if g[0]["is_filtered"]]
        assert all(len({x["reward"] for x in g}) > 1 for g in batch)
        for g in dropped:
            (reason,) = g[0]["filters"]
            assert reason == "batch_full" or len({x["reward"] for x in g}) == 1
            assert all(x["advantage"] == 0.0 for x in g)
        assert len(batch) <= prompts
        refilled += len(batch) + len(dropped) > prompts
    assert refilled, "no step drew more prompts, so the refill path was never exercised"


def test_refusals_name_the_problem(tmp_path, monkeypatch, capsys):
    # in-process (the same main() the module runs) to spare five interpreter start-ups
    from embedded_trainer import rl

    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path.parent / "embedded-cache"))
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "envs"))

    def main(out, *flags, max_steps=2, model=TOY):
        cfg = tmp_path / "rl.toml"
        cfg.write_text(TOY_CONFIG.format(max_steps=max_steps, model=model, kl=0.0))
        code = rl.main(["@", str(cfg), "--output-dir", str(out), *flags])
        return code, capsys.readouterr().err

    out = tmp_path / "out"
    assert main(out)[0] == 0
    code, err = main(out, "--ckpt.resume-step", "2")
    assert code == 1 and "max_steps is absolute" in err
    # a resumed run trains with the config in hand, not the hyperparameters the optimizer
    # state was saved with (iterations resume iter_0's checkpoint with their own lr)
    code, err = main(out, "--ckpt.resume-step", "2", "--trainer.optim.lr", "0.0005",
                     "--trainer.optim.weight-decay", "0.01", max_steps=3)
    assert code == 0, err
    saved = torch.load(out / "checkpoints" / "step_3" / "trainer" / "state.pt", weights_only=True)
    assert {(g["lr"], g["weight_decay"]) for g in saved["optimizer"]["param_groups"]} == {(0.0005, 0.01)}
    code, err = main(out)                                     # fresh start over another run
    assert code == 1 and "already holds checkpoints" in err
    code, err = main(tmp_path / "o2", "--ckpt.resume-step", "7", max_steps=9)
    assert code == 1 and "missing" in err and "step_7" in err
    code, err = main(tmp_path / "o3", model="Org/not-on-disk")
    assert code == 1 and "model directory" in err
    code, err = main(tmp_path / "o4", "--orchestrator.train.sampling.temprature", "1")
    assert code == 1 and "temprature" in err
    # an env whose train rows carry no reference completion cannot warm-start the tiny model
    cfg = tmp_path / "noref.toml"
    cfg.write_text(TOY_CONFIG.format(max_steps=2, model=TOY, kl=0.0).replace(
        'id = "parity_toy"', 'id = "parity_toy"\nargs = { with_reference = false }'))
    assert rl.main(["@", str(cfg), "--output-dir", str(tmp_path / "o5")]) == 1
    err = capsys.readouterr().err
    assert "carry none" in err and "pretrained model directory" in err


def test_stream_corpus_recipe_settings_and_the_default_key_unchanged(tmp_path, monkeypatch):
    import verifiers as vf

    from embedded_trainer import recipe
    from embedded_trainer.errors import TrainerError

    spec = recipe.parse_recipe("builtin:tiny-char-qwen2?corpus=stream&c_three_digit_share=0.05")
    assert spec["corpus"] == "stream" and spec["c_three_digit_share"] == 0.05
    with pytest.raises(ValueError, match="corpus must be one of"):
        recipe.parse_recipe("builtin:tiny-char-qwen2?corpus=books")
    # an env whose package has no warm_start_corpus cannot stream: said, with what to do
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "envs"))
    with pytest.raises(TrainerError, match="warm_start_corpus"):
        recipe.corpus_rows(recipe.parse_recipe("builtin:tiny-char-qwen2?corpus=stream"),
                           vf.load_environment("parity_toy"), '{"args": {}, "id": "parity_toy"}')
    # the streamed rows come from the env's package, one per SFT example
    spec = recipe.parse_recipe("builtin:tiny-char-qwen2?corpus=stream&sft_steps=3&sft_batch=4")
    rows = recipe.corpus_rows(spec, None, '{"args": {}, "id": "stock_arithmetic"}')
    assert len(rows) == 12 and all(r["info"]["split"] == "warm_start" for r in rows)
    # the default recipe's cache key did not move: the shipped student is still found
    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path))
    got = recipe.materialize(recipe.RECIPE_PREFIX, None, '{"args": {}, "id": "stock_arithmetic"}')
    assert got.parent == recipe.PREBUILT
    # and the stages it continues from ship too, each under the name the next one gives it,
    # back to the first (BASE_RECIPE), so every stage can be rebuilt from the one before
    base = recipe.materialize(recipe.BASE_RECIPE, None, '{"args": {}, "id": "stock_arithmetic"}')
    assert base.parent == recipe.PREBUILT and base != got
    chain, stage = [got], got
    while stage != base:
        init = json.loads((stage / recipe.MARKER).read_text())["spec"]["init"]
        assert init, f"{stage.name} starts from fresh weights, not from {base.name}"
        stage = recipe.PREBUILT / init
        assert (stage / "DONE").exists() and stage not in chain, stage
        chain.append(stage)
    assert len(chain) >= 3   # the demo student, at least one stage between, BASE_RECIPE


@pytest.mark.extended   # keeps the main suite inside its 5 minutes
def test_an_eval_env_of_several_rollouts_is_sampled_as_seeded_draws_beside_the_greedy_one(tmp_path):
    """Seed 003's two measurements in one eval: the greedy env one rollout per example at the
    eval temperature (0), the draws env k per example at the draw temperature (1.0), from
    random numbers fixed by the env and the batch: the same draws on a second run."""
    cfg = TOY_CONFIG.format(max_steps=1, model=TOY, kl=0.0).replace(
        "[orchestrator.eval.sampling]\nmax_completion_tokens = 6\n",
        "[orchestrator.eval.sampling]\nmax_completion_tokens = 6\ntemperature = 0.0\n").replace(
        "[trainer.optim]", '[[orchestrator.eval.env]]\nid = "parity_toy"\nname = "draws"\n'
        "num_examples = 40\nrollouts_per_example = 4\n[trainer.optim]")
    files = []
    for run in ("a", "b"):
        path = tmp_path / f"rl-{run}.toml"
        path.write_text(cfg)
        out = tmp_path / run
        r = subprocess.run([sys.executable, "-m", "embedded_trainer.rl", "@", str(path), "--output-dir", str(out)],
                           capture_output=True, text=True, env=trainer_env(tmp_path), timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        files.append(rows(out / "run_default" / "rollouts" / "step_1" / "eval_rollouts.jsonl"))
    ev = files[0]
    greedy = [x for x in ev if x["env_name"] == "parity_toy"]
    drawn = [x for x in ev if x["env_name"] == "draws"]
    assert len(greedy) == 40 and len({x["example_id"] for x in greedy}) == 40
    assert len(drawn) == 160 and {sum(1 for x in drawn if x["example_id"] == i) for i in
                                  {x["example_id"] for x in drawn}} == {4}
    # sampled, not greedy: an example's four draws are not all one text
    texts = {}
    for x in drawn:
        texts.setdefault(x["example_id"], set()).add(json.dumps(x["completion"]))
    assert any(len(t) > 1 for t in texts.values())
    # fixed seeds: the second run drew the same
    assert [x["completion"] for x in files[1] if x["env_name"] == "draws"] == [x["completion"] for x in drawn]
