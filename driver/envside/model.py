"""The env-side job that makes a trained arm's weights loadable with `from_pretrained`: the
base model's config, generation config and tokenizer, saved into a directory beside the arm's
weight shards. prime-rl's current broadcast (`run/broadcasts/step_N`) holds the shards only
(rl_contract/current.py); its tensors carry Hugging Face names, so those files complete it.

Runs in the training interpreter (prime-rl's venv, whose transformers and Hugging Face cache
downloaded the base model for training), by path, importing no driver module.
"""
from __future__ import annotations


def base_files(request: dict) -> dict:
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    model, dest = request["model"], request["dest"]
    AutoConfig.from_pretrained(model).save_pretrained(dest)
    AutoTokenizer.from_pretrained(model).save_pretrained(dest)
    written = ["config", "tokenizer"]
    try:
        GenerationConfig.from_pretrained(model).save_pretrained(dest)
        written.append("generation_config")
    except (OSError, ValueError):   # a model without one generates with its config's defaults
        pass
    return {"written": written}


JOBS = {"base_files": base_files}
