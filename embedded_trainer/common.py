"""What the embedded trainer's two entry points share (`rl`, the training run, and `probe`,
the gradient probe): loading a student, quiet libraries, seeded randomness, atomic JSONL."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from embedded_trainer.errors import TrainerError


def log(msg: str) -> None:
    print(msg, flush=True)


def hash_seed(*parts) -> int:
    """A 60-bit seed from any parts: every random draw is a function of (seed, purpose, step)."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:15], 16)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Whole-file atomic write: a poller counting rows never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
    os.replace(tmp, path)


def quiet_libraries() -> None:
    """Progress bars and advisory warnings would bury the one-line-per-step log."""
    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def check_model_name(name: str) -> None:
    """Refuse a model that is neither the built-in recipe nor a directory on disk, before torch
    (seconds on a CPU) is imported."""
    from embedded_trainer import recipe

    if not recipe.is_recipe(name) and not Path(name).expanduser().is_dir():
        raise TrainerError(
            f"model {name!r} is neither a model directory on disk nor {recipe.RECIPE_PREFIX}. "
            "The embedded trainer loads local Hugging Face directories only (download the model "
            "first, then pass its path as --model.name).")


def load_model(name: str, warm_env, warm_key: str, progress: Path | None = None):
    """(policy, tokenizer, anchor path). `name` is a Hugging Face directory or the built-in
    recipe; hub names need the network, which this trainer never uses. A recipe built here
    writes its progress to `progress` (recipe.materialize)."""
    check_model_name(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from embedded_trainer import recipe

    if recipe.is_recipe(name):
        try:
            path = recipe.materialize(name, warm_env, warm_key, log, progress)
        except ValueError as e:
            raise TrainerError(str(e)) from None
    else:
        path = Path(name).expanduser()
    if (path / recipe.MARKER).exists():
        # AutoTokenizer would pick Qwen2's tokenizer class from config.json and re-tokenize
        # the character vocabulary differently; the tokenizer.json is authoritative here.
        from transformers import PreTrainedTokenizerFast
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
        # the recipe's template as it stands: one built before tool calls were rendered renders
        # every other message the same, and the calls as the trainer parses them
        tokenizer.chat_template = recipe.CHAT_TEMPLATE
    else:
        tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if tokenizer.eos_token_id is None:
        raise TrainerError(f"the tokenizer in {path} has no eos token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, path
