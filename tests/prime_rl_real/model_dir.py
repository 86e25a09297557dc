"""A tiny, offline "model" directory for prime-rl's CPU tests (a stand-in for a real checkpoint).

prime-rl's orchestrator and renderers only need a tokenizer (with a chat template) and a
`config.json` from `model.name`; its trainer and vLLM engine, which would need weights, are
stood in for (inference_standin.py, trainer_standin_*.py). So this writes, in about a second
and without the network:

    tokenizer.json          byte-level BPE trained with `tokenizers` on the small text below
    tokenizer_config.json   PreTrainedTokenizerFast, eos `<|im_end|>`, pad `<|endoftext|>`,
                            a ChatML chat template (`add_generation_prompt` supported)
    special_tokens_map.json
    config.json             a minimal Qwen3-style config whose vocab_size matches the tokenizer
    generation_config.json

Local paths skip prime-rl's hub download (`src/prime_rl/trainer/model.py:77@559b447`).

    python model_dir.py OUT        # or: make_model_dir(Path(OUT))
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

VERSION = "1"   # bump when what is written changes; an existing dir with this stamp is kept
STAMP = ".prl_model_dir"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 512

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- elif message['content'] is not none -%}"
    "{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}{%- endfor -%}"
    "{%- endif -%}"
    "{{ '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

TEXT = """\
yes no yes no maybe. Yes, the answer is yes. No, the answer is no.
You are a helpful assistant. Answer the question with yes or no.
Is the sky blue? Is two plus two four? What is the capital of France? Paris.
The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 11 12 + - * / = ( ) [ ] { }
system user assistant tool question answer reward correct wrong true false
Please reason step by step, and put your final answer within \\boxed{}.
"""


def _train_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 4, trainer=trainer)
    return tok


def make_model_dir(path: Path) -> Path:
    """Write the tiny model dir at `path` (idempotent: a dir already stamped with VERSION is kept)."""
    path = Path(path)
    stamp = path / STAMP
    if stamp.is_file() and stamp.read_text().strip() == VERSION:
        return path
    path.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer()
    ids = {t: tok.token_to_id(t) for t in SPECIAL}
    vocab = tok.get_vocab_size(with_added_tokens=True)
    files = {
        "tokenizer.json": tok.to_str(),
        "tokenizer_config.json": json.dumps({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": 4096,
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "clean_up_tokenization_spaces": False,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
            "added_tokens_decoder": {str(i): {"content": t, "special": True, "lstrip": False, "rstrip": False,
                                              "normalized": False, "single_word": False}
                                     for t, i in ids.items()},
            "chat_template": CHAT_TEMPLATE,
        }, indent=2),
        "special_tokens_map.json": json.dumps({
            "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"]}, indent=2),
        "config.json": json.dumps({
            "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": vocab,
            "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": True, "torch_dtype": "float32",
            "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
        }, indent=2),
        "generation_config.json": json.dumps({
            "eos_token_id": ids["<|im_end|>"], "pad_token_id": ids["<|endoftext|>"]}, indent=2),
    }
    for name, text in files.items():
        fd, tmp = tempfile.mkstemp(dir=path, prefix=f".{name}.")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path / name)
    stamp.write_text(VERSION + "\n")
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python model_dir.py OUT")
    print(make_model_dir(Path(sys.argv[1])))
