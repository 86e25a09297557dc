"""The classic generation: verifiers <= 0.3.1 and prime-rl 0.5.x (2026-04-09 .. 2026-05-23).

Config shape `[[orchestrator.train.env]] id=`, `rollouts_per_example`, `[ckpt] resume_step`;
output layout `OUT/{checkpoints,weights}/step_N` and `OUT/run_default/{rollouts,checkpoints,
broadcasts}/step_N`, with rollout rows in `{train,eval}_rollouts.jsonl`.
"""
from __future__ import annotations

from pathlib import Path

import tomli_w

from driver.dialects import classic_schema, knob_keys
from driver.dialects.base import parse_rendered, resume_step_value, wandb_project
from driver.dialects.knob_keys import KnobKey
from driver.errors import UsageError
from driver.run.model import Knobs, batch_problem
from rl_contract import launch
from rl_contract.classic import ClassicLayout

# the eval env name that marks selection-split rows in an eval file (evaluation.py splits on it)
SELECTION_ENV = "hub-selection"
# the eval env names of each split's stochastic draws (--eval-draws): evaluation.py reads their
# rows as draws, k per example, apart from the greedy rollout
DRAWS_ENVS = {"eval": "hub-eval-draws", "selection": "hub-selection-draws"}
# seed 003 samples its draws at temperature one
DRAW_TEMPERATURE = 1.0

# which classic config key each knob sets (driver/dialects/knob_keys.py)
KNOB_KEYS: tuple[KnobKey, ...] = (
    KnobKey("seq_len", "seq_len"),
    KnobKey("model", "model.name"),
    KnobKey("batch_size", "orchestrator.batch_size"),
    KnobKey("rollouts_per_example", "orchestrator.rollouts_per_example"),
    # a canonical --base-config keeps its own filter setting for iter_0
    KnobKey("difficulty_filter", "orchestrator.buffer.online_difficulty_filtering", unset="skip",
            iter0_flag=False),
    KnobKey("max_completion_tokens", "orchestrator.train.sampling.max_completion_tokens"),
    KnobKey("temperature", "orchestrator.train.sampling.temperature"),
    KnobKey("lr", "trainer.optim.lr", unset="skip"),
    # eval sampling does not inherit train sampling in prime-rl: every eval sets both
    KnobKey("max_completion_tokens", "orchestrator.eval.sampling.max_completion_tokens", scope="eval"),
    KnobKey("eval_temperature", "orchestrator.eval.sampling.temperature", scope="eval"),
)


def _header(comment: str) -> str:
    return "".join(f"# {line}\n" for line in comment.splitlines())


def check_batch(orch: dict, group_key: str) -> None:
    """Refuse an [orchestrator] batch that is not whole groups of enough prompts (group_key:
    the dialect's name for the group size)."""
    bs, group = orch.get("batch_size"), orch.get(group_key)
    if bs is not None and group:
        problem = batch_problem(int(bs), int(group))
        if problem:
            raise UsageError(f"[orchestrator] {problem.replace('rollouts_per_example', group_key)}. "
                             "Change --batch-size (or the config's batch_size) to a multiple of the "
                             "group size with enough prompts.")


class ClassicDialect(ClassicLayout):
    """The output layout (rl_contract.classic) plus the classic configs and their checks."""
    name = "classic"
    selection_env = SELECTION_ENV
    draws_envs = DRAWS_ENVS
    # one [orchestrator.eval.sampling] for every eval env (EvalConfig.sampling, configs/
    # orchestrator.py@09e2977): draws beside a greedy rollout need the embedded trainer, which
    # samples an eval env of several rollouts per example at its draw temperature
    per_source_eval_sampling = False
    env_kind = "environment"   # hub envs load with vf.load_environment
    forks_checkpoints = False     # arms resume from copies of iter_0's trees (arm.prestage)
    eval_view = None   # eval rows are classic rollout rows: evaluation's own numeric view
    separate_final_eval = False   # the run's own eval at max_steps is the measurement

    def final_eval_dir(self, out: Path, step: int) -> Path:
        raise UsageError("the classic generation evaluates its final weights in the run itself")

    # ---- configs -----------------------------------------------------------------------------
    def train_env_block(self, env_id: str, args: dict | None = None, name: str | None = None) -> dict:
        block: dict = {"id": env_id}
        if name:
            block["name"] = name
        if args:
            block["args"] = args
        return block

    def eval_env_block(self, hub: dict, knobs: Knobs) -> dict:
        block = {"id": hub["env_id"], "num_examples": min(knobs.eval_examples, hub["eval_size"]),
                 "rollouts_per_example": 1}
        if hub.get("env_args"):
            block["args"] = hub["env_args"]
        return block

    def eval_env_blocks(self, hub: dict, knobs: Knobs) -> list[dict]:
        """The hub's eval split (what lifts are reported on) and, when the hub env has one, its
        selection split under the name SELECTION_ENV (what the best iteration is chosen on)."""
        blocks = [self.eval_env_block(hub, knobs)]
        sel = hub.get("selection")
        if sel:   # through the env that labels its rows, where the run installed one
            blocks.append({"id": sel.get("env_id") or hub["env_id"], "name": SELECTION_ENV,
                           "num_examples": min(knobs.eval_examples, sel["size"]),
                           "rollouts_per_example": 1, "args": sel["args"]})
        if knobs.eval_draws:   # each split again, --eval-draws rollouts per example (draws)
            blocks += [{**b, "name": DRAWS_ENVS[split], "rollouts_per_example": knobs.eval_draws}
                       for split, b in zip(("eval", "selection"), blocks)]
        return blocks

    def _train_config(self, knobs: Knobs, max_steps: int, train_envs: list[dict]) -> dict:
        """The keys every training config has: its length, the knobs' train keys (KNOB_KEYS),
        its train envs, and the [trainer] and [inference] tables prime-rl requires."""
        cfg: dict = {"max_steps": max_steps}
        knob_keys.apply(cfg, KNOB_KEYS, knobs, "train")
        cfg["orchestrator"]["train"]["env"] = train_envs
        cfg.setdefault("trainer", {})
        cfg.setdefault("inference", {})
        return cfg

    def _eval(self, hub: dict, eval_knobs: Knobs, interval: int) -> dict:
        """An [orchestrator.eval] table: at the final step, the knobs' eval keys, every eval env.
        A fresh run (iter_0, run B) would also evaluate the base model at step 0
        (orchestrator.py:367@09e2977, eval_base_model = True): a whole eval epoch, run B's on
        the whole eval split, that nothing reads, so it is turned off."""
        table: dict = {"interval": interval, "eval_base_model": False}
        knob_keys.apply({"orchestrator": {"eval": table}}, KNOB_KEYS, eval_knobs, "eval")
        table["env"] = self.eval_env_blocks(hub, eval_knobs)
        return table

    def render_base(self, hub: dict, knobs: Knobs) -> str:
        cfg = self._train_config(knobs, knobs.steps_per_run, [self.hub_train_block(hub)])
        return _header("Base config for iter_0, used when no canonical configs/<env>/rl.toml is "
                       "given.") + tomli_w.dumps(cfg)

    def render_eval_overlay(self, hub: dict, knobs: Knobs) -> str:
        cfg = {"ckpt": {"interval": knobs.steps_per_run},
               "orchestrator": {"eval": self._eval(hub, knobs, knobs.steps_per_run)}}
        return _header("iter_0 overlay: exactly one checkpoint (interval = max_steps) and an "
                       "explicit eval on the hub env\n(eval sampling does not inherit train "
                       "sampling: every eval key is set).") + tomli_w.dumps(cfg)

    def render_run(self, *, arm: str, purpose: str, hub: dict, knobs: Knobs, eval_knobs: Knobs | None,
                   train_envs: list[dict], resume_step: int | None,
                   resume_from: Path | None = None) -> str:
        """An iteration / control-run config. max_steps is absolute: F + steps_per_run when
        resuming from F, steps_per_run from base. The step's trees are pre-staged into the
        arm's own output dir (arm.prestage), so `resume_from` is not read here."""
        if resume_step is not None and (type(resume_step) is not int or resume_step < 1):
            raise UsageError(f"resume_step must be a positive integer step, got {resume_step!r}")
        max_steps = (resume_step or 0) + knobs.steps_per_run
        body = self._train_config(knobs, max_steps, train_envs)
        cfg: dict = {"max_steps": max_steps, "seq_len": body.pop("seq_len")}
        if knobs.wandb == "on":   # `driver run` resolved auto to on only with credentials
            cfg["wandb"] = {"project": wandb_project(hub), "name": arm}
        cfg["model"] = body.pop("model")
        cfg["ckpt"] = {"interval": knobs.steps_per_run}
        if resume_step is not None:
            cfg["ckpt"]["resume_step"] = resume_step
        body.pop("max_steps")
        cfg.update(body)
        if eval_knobs is not None:
            cfg["orchestrator"]["eval"] = self._eval(hub, eval_knobs, max_steps)
        cfg["trainer"], cfg["inference"] = cfg.pop("trainer"), cfg.pop("inference")   # last
        return _header(f"{arm}: {purpose}") + tomli_w.dumps(cfg)

    def train_blocks(self, cfg: dict) -> list[dict]:
        return list(cfg.get("orchestrator", {}).get("train", {}).get("env", []) or [])

    def hub_train_block(self, hub: dict) -> dict:
        return self.train_env_block(hub["env_id"], hub.get("env_args"))

    def train_sources(self, package: str, hub_block: dict | None, name: str | None = None,
                      fork_name: str | None = None) -> list[dict]:
        gen = self.train_env_block(package, name=name or (package if hub_block else None))
        return [gen] if hub_block is None else [hub_block, gen]

    def render_final_eval(self, hub: dict, knobs: Knobs, broadcasts: Path, step: int,
                          output_dir: Path, served: dict | None = None) -> str:
        raise UsageError("the classic generation evaluates its final weights in the run itself")

    def served_config(self, out: Path) -> Path | None:
        return None   # the run's own server measures its final weights

    def check_final_eval(self, text: str) -> dict:
        raise UsageError("the classic generation has no standalone final-weights eval")

    def iter0_overrides(self, knobs: Knobs, output_dir: Path) -> list[str]:
        return ["--max-steps", str(knobs.steps_per_run), "--output-dir", str(output_dir),
                *knob_keys.flags(KNOB_KEYS, knobs)]

    def check_rendered(self, text: str, *, expect_resume: int | None = None,
                       fork_name: str | None = None) -> dict:
        """Parse a rendered config back and refuse what would waste a launch."""
        return self.check_effective(parse_rendered(text), expect_resume=expect_resume, complete=False)

    def check_effective(self, cfg: dict, *, expect_resume: int | None = None,
                        complete: bool = True, fork_name: str | None = None) -> dict:
        """The checks on a config: one rendered file (complete=False: an overlay may hold one
        part), or the composition of a launch's files and flags (complete=True)."""
        unknown = classic_schema.unknown_keys(cfg)
        if unknown:
            raise UsageError(f"prime-rl (classic) would reject unknown key(s): {', '.join(unknown)}. "
                             "Fix or remove them; the schema is prime-rl 09e2977's.")
        orch = cfg.get("orchestrator", {})
        check_batch(orch, "rollouts_per_example")
        ckpt = cfg.get("ckpt", {})
        if "resume_step" in ckpt:
            rs = resume_step_value(ckpt["resume_step"], "[ckpt] resume_step")
            if cfg.get("max_steps") is not None and rs >= int(cfg["max_steps"]):
                raise UsageError(f"max_steps {cfg['max_steps']} must exceed resume_step {rs} "
                                 "(max_steps is absolute)")
        if expect_resume is not None and ckpt.get("resume_step") != expect_resume:
            raise UsageError(f"config does not resume from step {expect_resume}")
        if complete and not orch.get("train", {}).get("env"):
            raise UsageError("train env missing: prime-rl would silently train on its default "
                             "env (reverse-text)")
        if complete and (mismatch := launch.client_port_mismatch(cfg, "classic")):
            raise UsageError(mismatch)
        if "eval" in orch and not orch["eval"].get("env"):
            raise UsageError("eval env missing: prime-rl would silently fall back to its default env")
        return cfg

    def foreign_run(self, out: Path, resume_step: int | None) -> list[str]:
        """What in an output dir belongs to another run: any step other than the pre-staged
        resume step, and any rollouts at all."""
        out = Path(out)
        found = []
        for d in (out / "checkpoints", out / "weights", out / "run_default" / "checkpoints",
                  out / "run_default" / "broadcasts"):
            found += [str(d / f"step_{s}") for s in self.steps(d) if s != resume_step]
        found += [str(self.rollouts_dir(out) / f"step_{s}") for s in self.steps(self.rollouts_dir(out))]
        return found

    def env_ids(self, cfg: dict) -> list[str]:
        orch = cfg.get("orchestrator", {})
        return [e["id"] for s in ("train", "eval") for e in orch.get(s, {}).get("env", [])
                if isinstance(e, dict) and e.get("id")]
