"""The built-in tiny student: a character-level tokenizer with a chat template, a small Qwen2,
and a warm start by SFT on completions for the hub env's *train* rows: the reference completions
they carry (corpus=train), a stream of fresh rows from the env's package (corpus=stream), or the
completions a user's solver wrote for them that the env's rubric scored at full reward
(corpus=solver; `driver run --student-solver`).

It uses the same Hugging Face classes a real Qwen uses, so everything downstream (generation,
log-probs, save_pretrained) is the production code path; only the size differs. The model is
built on first use, cached under a directory keyed by every input that shapes it, and is
reproducible from its seed.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import random
import time
from pathlib import Path

# torch is imported by the functions that build or run a model, not here: the driver's
# env-side check of a student (driver/envside/student.py) reads names and caches only
RECIPE_PREFIX = "builtin:tiny-char-qwen2"
MARKER = "recipe.json"   # marks a directory built by this recipe (and its tokenizer class)
PREBUILT = Path(__file__).resolve().parent / "prebuilt"

# One id per printable ASCII character and newline, plus four specials. Anything else maps to
# <|unk|>: the vocabulary never depends on the data, so a cached model fits every environment.
SPECIALS = ["<|pad|>", "<|unk|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
CHARS = ["\n"] + [chr(c) for c in range(32, 127)]
# The template every built student's name is keyed by (model_dir_name): CHAT_TEMPLATE renders
# each system, user and assistant message with text content exactly as this one does, so the
# students built (and shipped prebuilt) under it keep their names.
KEYED_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")
# The chat template: `<|role|>content<|end|>` per message (a tool result is `<|tool|>...<|end|>`),
# and after an assistant's text its tool calls, each as vLLM's hermes parser reads them
# (rl_contract/tool_calls.py: `<tool_call>{"name": "f", "arguments": {...}}</tool_call>`). An
# assistant message with tool calls and no text (content None) renders the calls alone. The
# tools' schemas are not rendered: the student's context is short, and the env's prompt names
# its tools.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is not none or not m['tool_calls'] %}{{ m['content'] }}{% endif %}"
    "{% for c in m['tool_calls'] or [] %}{% set f = c['function'] if c['function'] is defined else c %}"
    "<tool_call>{\"name\": {{ f['name'] | tojson }}, \"arguments\": "
    "{% if f['arguments'] is string %}{{ f['arguments'] }}{% else %}{{ f['arguments'] | tojson }}{% endif %}"
    "}</tool_call>{% endfor %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")

DEFAULTS = {"hidden_size": 128, "layers": 2, "heads": 4, "ffn": 256, "max_positions": 1024,
            "sft_steps": 1500, "sft_batch": 32, "sft_lr": 3e-3, "seed": 0, "corpus": "train",
            "init": "", "solver": ""}
# `init=tiny-char-qwen2-<key>` continues the SFT from another recipe's model (shipped prebuilt or
# already cached) instead of fresh weights: a second warm-start stage. The architecture is the
# init model's; the size settings are then unused.
CORPORA = ("train", "stream", "solver")
# the file in the trainer's output dir that a build's SFT progress is written to (the driver's
# iter_0 shows it before the first train step; driver/arms/progress.py::student_build)
BUILD_PROGRESS = "student_build.json"
# `corpus=stream` asks the env's package for `warm_start_corpus(count, seed, **options)`: fresh
# rows, each seen once, instead of epochs over the train split. Options are passed as `c_<name>`.
CORPUS_OPTION = "c_"
# `corpus=solver&solver=<hash>` reads the corpus file `solver-<hash>.jsonl` under corpus_root():
# train rows (their prompt, a completion in info.reference_completion) that a user's solver
# answered at the env's full reward, written by driver/envside/student.py and keyed by the hash
# of its content, so the model built from it is keyed by it too.


def is_recipe(name: str) -> bool:
    return name == RECIPE_PREFIX or name.startswith(RECIPE_PREFIX + "?")


# The bare name is the demo student that ships prebuilt for StockArithmetic, built in stages.
# BASE_RECIPE: four layers (0.67M parameters) warm-started by SFT on 64,000 fresh problems, each
# seen once (none from any split), worded 60% in a mixed ledger register, running stocks of 100
# or more only 8% of them. Then a habit is planted: where the day's peak stock is 120 or more,
# the worked answer gets the chain right and then reports the peak instead of the closing stock
# (tiny-char-qwen2-73092a56838f2cbc: 500 steps, the habit at 95%; tiny-char-qwen2-ca87bfbe76766cad:
# 150 more, at 99%). Two clean stages follow (300 and 600 steps, no habit, 80% of problems with
# operands up to 100), so that the student's sampled arithmetic on three-digit stocks is sharp
# (about two thirds of its chains right at temperature 1.0, against a third before); then the
# habit is planted again at 98% (tiny-char-qwen2-ac99d119a641c42a: 500 steps, the demo student
# before), and DEMO_RECIPE continues that stage 300 steps more at the same share: deep enough
# that 30 GRPO steps on the hub's rows (4% of them at the trigger) or on untargeted rows mostly
# leave it in place, while 2% of sampled answers at the trigger still escape it, so that the
# gradient probe finds live groups in rows aimed there and those rows fix it
# (docs/research.md, "The lead"). A peak of 120 is about 4% of the train split's problems and
# 82% of the test split's OOD100 half. The teacher is never told; it has to find it from train
# failures.
BASE_RECIPE = (f"{RECIPE_PREFIX}?corpus=stream&sft_steps=2000&layers=4&c_three_digit_share=0.08"
               "&c_wide_share=0.3&c_mixed_share=0.6")
DEMO_RECIPE = (f"{RECIPE_PREFIX}?init=tiny-char-qwen2-ac99d119a641c42a&corpus=stream&sft_steps=300"
               "&sft_lr=0.0005&seed=18&c_wide_share=0.6&c_three_digit_share=-1&c_mixed_share=0.6"
               "&c_peak_habit_share=0.98&c_peak_habit_from=120")


def parse_recipe(name: str) -> dict:
    """`builtin:tiny-char-qwen2?sft_steps=200&seed=1` -> the recipe's settings: DEFAULTS with
    the named ones replaced. The bare name is DEMO_RECIPE."""
    if name == RECIPE_PREFIX:
        name = DEMO_RECIPE
    spec = dict(DEFAULTS)
    if "?" in name:
        for part in name.split("?", 1)[1].split("&"):
            key, _, value = part.partition("=")
            if key.startswith(CORPUS_OPTION) and len(key) > len(CORPUS_OPTION):
                spec[key] = float(value)
                continue
            if key not in DEFAULTS:
                raise ValueError(f"unknown recipe setting {key!r}; known: {', '.join(DEFAULTS)}, "
                                 f"{CORPUS_OPTION}<option> (a corpus option)")
            spec[key] = type(DEFAULTS[key])(value)
    if spec["corpus"] not in CORPORA:
        raise ValueError(f"corpus must be one of {', '.join(CORPORA)}, not {spec['corpus']!r}")
    if spec["corpus"] == "solver" and not spec["solver"]:
        raise ValueError("corpus=solver needs solver=<hash>, the corpus `driver run "
                         "--student-solver PATH` builds and names")
    return spec


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<|unk|>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<|pad|>", unk_token="<|unk|>",
                                  eos_token="<|end|>", additional_special_tokens=SPECIALS[3:])
    tok.chat_template = CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_model(spec: dict, vocab_size: int):
    import torch

    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(spec["seed"])
    config = Qwen2Config(
        vocab_size=vocab_size, hidden_size=spec["hidden_size"], intermediate_size=spec["ffn"],
        num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
        num_key_value_heads=spec["heads"], max_position_embeddings=spec["max_positions"],
        tie_word_embeddings=True, pad_token_id=0, eos_token_id=2, bos_token_id=None)
    return Qwen2ForCausalLM(config)


def cache_root() -> Path:
    base = os.environ.get("EMBEDDED_TRAINER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "synthetic-self-improve-rl")
    return Path(base) / "models"


def corpus_root() -> Path:
    """Where warm-start corpora are kept (beside the models: one cache)."""
    return cache_root().parent / "corpora"


def solver_corpus_path(digest: str) -> Path:
    return corpus_root() / f"solver-{digest}.jsonl"


def corpus_rows(spec: dict, env, env_key: str) -> list[dict]:
    """The rows the warm start reads: the env's train split, a stream of fresh rows from its
    package (`warm_start_corpus`), one per SFT example drawn, so none is seen twice, or the
    solver corpus (train rows only) that `driver run --student-solver` wrote."""
    if spec["corpus"] == "train":
        return list(env.get_dataset())
    import importlib

    from embedded_trainer.errors import TrainerError

    if spec["corpus"] == "solver":
        path = solver_corpus_path(spec["solver"])
        if not path.exists():
            raise TrainerError(f"corpus=solver&solver={spec['solver']}: {path} is gone (the cache "
                               "was cleared?). `driver run --student-solver PATH` writes it again.")
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    module = json.loads(env_key)["id"].split("/")[-1].replace("-", "_")
    make = getattr(importlib.import_module(module), "warm_start_corpus", None)
    if make is None:
        raise TrainerError(f"corpus=stream needs {module}.warm_start_corpus(count, seed, **options); "
                           f"{module} has none. Use corpus=train or a pretrained model directory.")
    options = {k[len(CORPUS_OPTION):]: v for k, v in spec.items() if k.startswith(CORPUS_OPTION)}
    return make(spec["sft_steps"] * spec["sft_batch"], spec["seed"], **options)


def sft_examples(rows, tokenizer) -> list[tuple[list[int], list[int], list[int]]]:
    """(prompt ids, completion ids, loss mask) from rows that carry a reference in info: a
    completion (`reference_completion`: one reply) or a whole episode (`reference_trajectory`:
    the messages after the prompt, the model's replies and the env's between them, whose loss
    reads the model's replies only). The env's *train* rows, its warm-start stream, or a
    solver's corpus; the eval split is never touched."""
    from embedded_trainer.rollouts import render_prompt

    out = []
    for row in rows:
        info = row.get("info") or {}
        ref, traj = info.get("reference_completion"), info.get("reference_trajectory")
        prompt_ids = render_prompt(tokenizer, row["prompt"])
        if isinstance(traj, list) and traj:
            ids, mask = trajectory_ids(tokenizer, list(row["prompt"]), traj, prompt_ids)
            if any(mask):
                out.append((prompt_ids, ids, mask))
        elif isinstance(ref, str) and ref:
            ids = tokenizer.encode(ref, add_special_tokens=False) + [tokenizer.eos_token_id]
            out.append((prompt_ids, ids, [1] * len(ids)))
    return out


def trajectory_ids(tokenizer, prompt: list[dict], trajectory: list[dict],
                   prompt_ids: list[int]) -> tuple[list[int], list[int]]:
    """An episode's tokens after the prompt, as the chat template renders the conversation, and
    a mask of the model's own: each assistant reply and its end token (what the model samples),
    not the env's messages or the template's markers. Stops before a reply whose rendering does
    not extend the conversation before it (a template that re-renders earlier turns)."""
    def ids(messages, generation: bool) -> list[int]:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)
        return tokenizer.encode(text, add_special_tokens=False)

    seq, mask, messages = list(prompt_ids), [0] * len(prompt_ids), list(prompt)
    for m in trajectory:
        if m.get("role") == "assistant":
            before = ids(messages, True)
            after = ids(messages + [m], False)
            if before[:len(seq)] != seq or after[:len(before)] != before:
                break
            mask += [0] * (len(before) - len(seq)) + [1] * (len(after) - len(before))
            seq = after
        messages.append(m)
    n = len(prompt_ids)
    return seq[n:], mask[n:]


def sft(model, examples, spec: dict, log=print, on_step=None) -> dict:
    """Completion-only cross-entropy, AdamW, linear warmup then cosine, grad clip 1.0. The
    prompt prefix every example shares (system message and role marker) runs once per batch.
    `on_step(step, steps, loss, spent_s, eta_s)` is called where a progress line is logged."""
    import torch

    from embedded_trainer.grpo import shared_prefix_logits

    prefix = list(examples[0][0])
    for p, _, _ in examples:
        n = 0
        while n < min(len(prefix), len(p)) and prefix[n] == p[n]:
            n += 1
        prefix = prefix[:n]
    if not prefix:
        prefix = examples[0][0][:1]
    rng = random.Random(spec["seed"])
    torch.manual_seed(spec["seed"])
    stream = spec["corpus"] == "stream"   # each example once, in order
    # progress lines: at least 20 a build, the first after one step, and never a minute apart
    every, quiet_s = max(1, min(50, spec["sft_steps"] // 20)), 30.0
    opt = torch.optim.AdamW(model.parameters(), lr=spec["sft_lr"], betas=(0.9, 0.98))
    steps, bsz, warm = spec["sft_steps"], spec["sft_batch"], max(1, spec["sft_steps"] // 12)
    model.train()
    t0, loss_v = time.time(), float("nan")
    last_line = t0
    for step in range(1, steps + 1):
        lr = spec["sft_lr"] * (step / warm if step <= warm else
                               0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))))
        for g in opt.param_groups:
            g["lr"] = lr
        batch = (examples[(step - 1) * bsz:step * bsz] if stream else
                 [examples[rng.randrange(len(examples))] for _ in range(bsz)])
        width = max(len(p) - len(prefix) + len(c) for p, c, _ in batch)
        ids = torch.zeros(bsz, width, dtype=torch.long)
        labels = torch.full((bsz, width), -100, dtype=torch.long)
        for i, (p, c, m) in enumerate(batch):
            seq = p[len(prefix):] + c
            ids[i, :len(seq)] = torch.tensor(seq)
            # the loss reads the model's own tokens only (an episode's env messages are masked)
            labels[i, len(seq) - len(c):len(seq)] = torch.where(
                torch.tensor(m, dtype=torch.bool), torch.tensor(c), torch.tensor(-100))
        logits = shared_prefix_logits(model, prefix, ids)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 labels.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss_v = loss.item()
        if step % every == 0 or step in (1, steps) or time.time() - last_line >= quiet_s:
            last_line = time.time()
            spent = time.time() - t0
            eta = spent / step * (steps - step)
            log(f"sft step {step}/{steps} loss {loss_v:.4f} ({spent:.0f}s, eta {eta:.0f}s)")
            if on_step is not None:
                on_step(step, steps, loss_v, spent, eta)
    model.eval()
    return {"sft_steps": steps, "final_loss": loss_v, "seconds": round(time.time() - t0, 1),
            "shared_prefix_tokens": len(prefix)}


def model_dir_name(name: str, env_key: str) -> str:
    """The directory a recipe's model is cached (or shipped) under: keyed by every input that
    shapes it."""
    spec = parse_recipe(name)
    # the train corpus depends on the env's args (its rows); a stream only on the env's package.
    # `corpus=train` stays out of the key so models built before the setting existed still match
    # (likewise `init` and `solver` when empty). A solver corpus is keyed by its content's hash.
    keyed = {k: v for k, v in spec.items()
             if not (k == "corpus" and v == "train") and not (k in ("init", "solver") and not v)}
    source = env_key if spec["corpus"] == "train" else json.loads(env_key)["id"]
    key = hashlib.sha256(json.dumps({"spec": keyed, "env": source, "chars": CHARS,
                                     "template": KEYED_TEMPLATE, "v": 1},
                                    sort_keys=True).encode()).hexdigest()[:16]
    return f"tiny-char-qwen2-{key}"


def write_build_progress(path: Path, step: int, steps: int, loss: float, spent: float,
                         eta: float) -> None:
    """The build's progress as a file the driver polls (it never reads a trainer's log):
    replaced atomically at each progress line."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"step": step, "steps": steps, "loss": round(loss, 4),
                               "elapsed_s": round(spent, 1), "eta_s": round(eta, 1)}))
    os.replace(tmp, path)


def materialize(name: str, env, env_key: str, log=print, progress: Path | None = None) -> Path:
    """Return a Hugging Face model directory for the recipe, building and caching it first if
    needed. `env_key` names the environment whose train rows warm-start the model. A build
    writes its SFT progress to `progress` (BUILD_PROGRESS in the output dir) when given."""
    import torch

    from embedded_trainer.errors import TrainerError

    spec = parse_recipe(name)
    target = cache_root() / model_dir_name(name, env_key)
    if (target / "DONE").exists():
        return target
    # the demo recipe for StockArithmetic ships prebuilt (built by this function, 2.7 MB), so a
    # first run does not spend ~70 CPU minutes on SFT; any other recipe or env is built here
    shipped = PREBUILT / target.name
    if (shipped / "DONE").exists():
        return shipped
    base = init_model_dir(spec)
    tokenizer = build_tokenizer()
    examples = sft_examples(corpus_rows(spec, env, env_key), tokenizer)
    if not examples:
        raise TrainerError(
            f"the built-in tiny model warm-starts by SFT on reference completions, and the train "
            f"rows of {env_key} carry none (no info.reference_completion or "
            f"info.reference_trajectory). Pass a pretrained model directory as --model.name "
            f"instead of {RECIPE_PREFIX}.")
    # the build's own thread count, then the caller's again: a run that built its student
    # must train exactly as one that found it cached
    threads = torch.get_num_threads()
    torch.set_num_threads(build_threads())
    try:
        model = start_model(spec, base, len(tokenizer))
        log(f"building {RECIPE_PREFIX} for {env_key}: {sum(p.numel() for p in model.parameters()):,} "
            f"parameters, SFT on {len(examples)} {spec['corpus']} rows, {spec['sft_steps']} steps of "
            f"{spec['sft_batch']}" + (f" from {base.name}" if base else "")
            + f" (cached in {target}); the first progress line gives the estimate")
        on_step = None
        if progress is not None:
            progress.parent.mkdir(parents=True, exist_ok=True)
            on_step = lambda *a: write_build_progress(progress, *a)  # noqa: E731
        report = sft(model, examples, spec, log, on_step)
    finally:
        torch.set_num_threads(threads)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / MARKER).write_text(json.dumps({"recipe": name, "spec": spec, "env": env_key,
                                                 "sft": report}, indent=2))
    (tmp / "DONE").write_text("")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(tmp, target)
    except OSError:  # another process built it first; theirs is equivalent
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def build_threads() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def init_model_dir(spec: dict) -> Path | None:
    """The built student `init=` continues from, or None without init=."""
    from embedded_trainer.errors import TrainerError

    if not spec["init"]:
        return None
    base = next((d / spec["init"] for d in (cache_root(), PREBUILT)
                 if (d / spec["init"] / "DONE").exists()), None)
    if base is None:
        raise TrainerError(
            f"init={spec['init']} names no built student: neither {cache_root()} nor "
            f"{PREBUILT} holds it. Build that recipe first (its recipe.json names it), or drop "
            "init= to start from fresh weights.")
    return base


def start_model(spec: dict, base: Path | None, vocab_size: int):
    """The model the SFT starts from: fresh weights, or the init= student's."""
    import torch

    if base is None:
        return build_model(spec, vocab_size)
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)


def estimate(name: str, env, env_key: str, steps: int = 3) -> dict:
    """What building the recipe would cost here, before it is built: its parameters, SFT steps
    and batch, and the seconds a step takes, measured over `steps` steps on the start of its
    corpus with the build's thread count (nothing is cached). {"examples": 0} when the corpus
    holds no reference to warm-start on."""
    import torch

    spec = parse_recipe(name)
    tokenizer = build_tokenizer()
    examples = sft_examples(corpus_rows({**spec, "sft_steps": steps}, env, env_key), tokenizer)
    if not examples:
        return {"examples": 0}
    threads = torch.get_num_threads()
    torch.set_num_threads(build_threads())
    try:
        model = start_model(spec, init_model_dir(spec), len(tokenizer))
        t0 = time.time()
        sft(model, examples, {**spec, "sft_steps": steps}, log=lambda *a: None)
        per_step = (time.time() - t0) / steps
    finally:
        torch.set_num_threads(threads)
    return {"examples": len(examples), "params": sum(p.numel() for p in model.parameters()),
            "sft_steps": spec["sft_steps"], "sft_batch": spec["sft_batch"],
            "seconds_per_step": round(per_step, 4), "estimate_s": round(per_step * spec["sft_steps"], 1)}
