"""The embedded trainer's config: the classic prime-rl `rl` schema it supports, as one typed
model, composed the way prime-rl composes it.

`@ a.toml @ b.toml --x.y-z V`: files merge left to right (tables deep-merge, lists are replaced
whole), then CLI flags win. Unknown keys are errors. Settings only this trainer has live in an
`[embedded]` table, which the driver never writes into a config meant for prime-rl.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from rl_contract.composition import CompositionError, compose

DEFAULT_MODEL = "builtin:tiny-char-qwen2"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelConfig(Strict):
    name: str = DEFAULT_MODEL


class CkptConfig(Strict):
    interval: int | None = Field(None, ge=1)
    resume_step: int | None = Field(None, ge=-1)   # -1: latest; omit to start fresh
    keep_last: int | None = None
    keep_interval: int | None = None


class WandbConfig(Strict):
    """Accepted so a prime-rl config runs unchanged; the embedded trainer logs locally only."""
    project: str = "prime-rl"
    name: str | None = None
    entity: str | None = None
    group: str | None = None
    tags: list[str] = []
    offline: bool = False
    shared: bool = True


class OptimConfig(Strict):
    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    max_norm: float = Field(1.0, gt=0)
    betas1: float = 0.9
    betas2: float = 0.99


class TrainerConfig(Strict):
    optim: OptimConfig = OptimConfig()


class EnvConfig(Strict):
    id: str = "reverse-text"
    name: str | None = None
    args: dict[str, Any] = {}
    ratio: float | None = Field(None, gt=0)


class EvalEnvConfig(EnvConfig):
    num_examples: int = -1
    rollouts_per_example: int = Field(1, ge=1)
    interval: int | None = Field(None, ge=1)


class SamplingConfig(Strict):
    temperature: float | None = Field(None, ge=0)
    max_completion_tokens: int | None = Field(None, ge=1)


class TrainConfig(Strict):
    env: list[EnvConfig] = [EnvConfig()]
    sampling: SamplingConfig = SamplingConfig()


class EvalConfig(Strict):
    env: list[EvalEnvConfig] = [EvalEnvConfig()]
    sampling: SamplingConfig = SamplingConfig()
    interval: int = Field(100, ge=1)
    num_examples: int | None = None
    rollouts_per_example: int | None = Field(None, ge=1)
    eval_base_model: bool = True
    skip_eval_on_resume: bool = True


class BufferConfig(Strict):
    """prime-rl's classic [orchestrator.buffer]; the embedded trainer has its one filter."""
    online_difficulty_filtering: bool = False   # drop groups whose mean reward is 0.0 or 1.0


class OrchestratorConfig(Strict):
    batch_size: int = Field(128, ge=1)
    rollouts_per_example: int = Field(1, ge=1)
    seq_len: int | None = None
    buffer: BufferConfig = BufferConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig | None = None

    @model_validator(mode="after")
    def _divisible(self):
        if self.batch_size % self.rollouts_per_example:
            raise ValueError(f"batch_size {self.batch_size} must be divisible by "
                             f"rollouts_per_example {self.rollouts_per_example}")
        ratios = [e.ratio is not None for e in self.train.env]
        if any(ratios) and not all(ratios):
            raise ValueError("set ratio on every train env or on none")
        return self


class GarConfig(Strict):
    """Grader-ranked advantages (embedded.advantage = "gar")."""
    grader: Literal["rule", "llm"] = "rule"
    base_url: str | None = None          # llm: an OpenAI-compatible endpoint
    model: str | None = None
    key_env: str | None = None           # the variable holding the key (never the key)
    timeout_s: float = Field(120, gt=0)

    @model_validator(mode="after")
    def _llm_needs_endpoint(self):
        if self.grader == "llm" and not (self.base_url and self.model):
            raise ValueError("embedded.gar.grader = 'llm' needs base_url and model")
        return self


class EmbeddedConfig(Strict):
    """Only the embedded trainer reads these."""
    advantage: Literal["grpo", "gar"] = "grpo"
    scale_advantages: bool = True        # divide by the group's std (seed 003); false: Dr. GRPO
    freeze_embeddings: bool = False      # leave the (tied) token embeddings out of the update
    # "response": each response's loss is the mean over its own tokens (seed 003); "constant":
    # the sum over its tokens divided by the generation limit (Dr. GRPO), no length bias
    length_normalization: Literal["response", "constant"] = "response"
    # "adamw" (prime-rl's); "sgd": plain SGD with momentum (trainer.optim.betas1), which moves
    # each weight in proportion to its gradient instead of normalising every weight's step
    optimizer: Literal["adamw", "sgd"] = "adamw"
    # with [orchestrator.buffer] online_difficulty_filtering, how many more draws of a step's
    # prompt count a step may sample to fill its batch with groups that carry a gradient
    # (prime-rl's orchestrator keeps sampling; a bound keeps an all-solved dataset from
    # stalling a step, which then trains on the groups it found)
    max_refills: int = Field(3, ge=0)
    gar: GarConfig = GarConfig()
    seed: int = 0
    clip_epsilon: float = Field(0.2, gt=0, lt=1)
    kl_beta: float = Field(0.0, ge=0)
    updates_per_batch: int = Field(2, ge=1)
    threads: int | None = Field(None, ge=1)
    device: str = "auto"                 # auto | cpu | cuda
    default_max_completion_tokens: int = Field(96, ge=1)
    # an eval env of several rollouts per example is sampled as seed 003's stochastic draws, at
    # this temperature (seed 003's is one), whatever [orchestrator.eval.sampling] says for the
    # greedy envs beside it (rl.evaluate)
    eval_draw_temperature: float = Field(1.0, gt=0, le=2)


class RLConfig(Strict):
    trainer: TrainerConfig
    orchestrator: OrchestratorConfig
    inference: dict[str, Any] | None = None   # sampling happens in-process; accepted, unused
    model: ModelConfig = ModelConfig()
    ckpt: CkptConfig | None = None
    wandb: WandbConfig | None = None
    output_dir: Path = Path("outputs")
    clean_output_dir: bool = False
    max_steps: int = Field(..., ge=1)
    seq_len: int = Field(2048, ge=16)
    embedded: EmbeddedConfig = EmbeddedConfig()


class ConfigError(Exception):
    pass


def load(argv: list[str]) -> RLConfig:
    try:
        raw = compose(argv)
    except CompositionError as e:
        raise ConfigError(str(e)) from None
    _replace_none(raw)  # prime-rl reads the TOML string "None" as None
    try:
        return RLConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            where = "--" + ".".join(str(p).replace("_", "-") for p in err["loc"])
            lines.append(f"{where}  {err['msg']}")
        raise ConfigError("invalid config:\n  " + "\n  ".join(lines)) from None


def _replace_none(node: dict) -> None:
    for k, v in list(node.items()):
        if v == "None":
            node[k] = None
        elif isinstance(v, dict):
            _replace_none(v)
