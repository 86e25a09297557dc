"""The current generation: prime-rl v0.8.1.dev57 .. dev67 with verifiers v1 tasksets.

Configs: `[[orchestrator.train.source]]` / `[[orchestrator.eval.source]]` with an `env.taskset`
block (the taskset's own config fields beside `id`) and an explicit single-turn agent (no
harness, a local subprocess runtime: left out, prime-rl runs a `bash` harness in a remote
sandbox); `group_size`; `[resume] dir` forks iter_0's checkpoint into an arm without copying;
a fixed `run.name`; the filesystem weight broadcast, so every arm leaves loadable final weights.

Every single-source arm names its train source TRAIN_SOURCE: prime-rl refuses a resume whose
train-source names differ from the checkpoint's, while the taskset behind a name may change.
The run evaluates its final weights only where M+1 falls on an eval interval
(rl_contract.current SOURCES), so an arm's measurement is a separate launch of
prime-rl's `evals` in online mode, which loads the final broadcast into the served base model
(render_final_eval, rl_contract/final_eval.py); in-run evals are left off.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import tomli_w

from driver.dialects import current_schema, knob_keys
from driver.dialects.base import parse_rendered, resume_step_value, wandb_project
from driver.dialects.classic import DRAW_TEMPERATURE, DRAWS_ENVS, SELECTION_ENV, check_batch
from driver.dialects.knob_keys import KnobKey
from driver.errors import UsageError
from driver.run.model import Knobs
from rl_contract import launch
from rl_contract.current import ENGINE_PORT_OFFSET, RUN_NAME, CurrentLayout, eval_view

TRAIN_SOURCE = "train"
HUB_SOURCE = "hub-train"      # run B's second source: the hub taskset itself
EVAL_SOURCE = "hub-eval"
# single-turn tasks: no harness, a subprocess runtime (the defaults are bash + a remote sandbox)
NULL_AGENT = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
# where a final-weights `evals` launch reaches the inference server that serves those weights
EVAL_SERVER_PORT = 8000
_CHECKPOINT = re.compile(r"(?:^|/)step_(\d+)/?$")

# which current config key each knob sets (driver/dialects/knob_keys.py)
KNOB_KEYS: tuple[KnobKey, ...] = (
    KnobKey("seq_len", "seq_len"),
    KnobKey("model", "model.name"),
    KnobKey("lr", "trainer.optim.lr", unset="skip"),
    KnobKey("batch_size", "orchestrator.batch_size"),
    KnobKey("rollouts_per_example", "orchestrator.group_size"),
    KnobKey("max_completion_tokens", "orchestrator.train.sampling.max_completion_tokens"),
    KnobKey("temperature", "orchestrator.train.sampling.temperature"),
    # current prime-rl filters zero-advantage groups by default already: said explicitly
    KnobKey("difficulty_filter", "orchestrator.train.filter_zero_advantages", unset="skip",
            iter0_flag=False),
    # eval sampling does not inherit train sampling: every eval sets both
    KnobKey("max_completion_tokens", "orchestrator.eval.sampling.max_completion_tokens", scope="eval"),
    KnobKey("eval_temperature", "orchestrator.eval.sampling.temperature", scope="eval"),
)


def _header(comment: str) -> str:
    return "".join(f"# {line}\n" for line in comment.splitlines())


class CurrentDialect(CurrentLayout):
    """The output layout (rl_contract.current) plus the current configs and their checks."""
    name = "current"
    selection_env = SELECTION_ENV
    draws_envs = DRAWS_ENVS
    # an eval source's own sampling overrides the eval's, field by field
    # (EvalSourceConfig.sampling and EvalConfig.resolve_env_defaults, configs/orchestrator.py:
    # 249-251, 323-332@559b447), so the draws are a source at temperature one beside the greedy one
    per_source_eval_sampling = True
    env_kind = "taskset"       # hub envs are v1 tasksets (driver.tasksets)
    eval_view = staticmethod(eval_view)
    # arms start from iter_0's checkpoint by `[resume] dir`, not by copying it in
    forks_checkpoints = True
    separate_final_eval = True    # `rl` never evaluates v(max_steps): arm.final_eval does

    # ---- config blocks -----------------------------------------------------------------------
    def train_env_block(self, env_id: str, args: dict | None = None, name: str | None = None,
                        ratio: float | None = None) -> dict:
        block: dict = {"name": name or TRAIN_SOURCE}
        if ratio is not None:
            block["ratio"] = ratio
        block["env"] = {"taskset": {"id": env_id, **(args or {})}, "agent": NULL_AGENT}
        return block

    def eval_env_blocks(self, hub: dict, knobs: Knobs) -> list[dict]:
        """The hub's eval split (what lifts are reported on) and, when the hub taskset has one,
        its selection split under SELECTION_ENV (what the best iteration is chosen on)."""
        blocks = [{"name": EVAL_SOURCE, "num_examples": min(knobs.eval_examples, hub["eval_size"]),
                   "group_size": 1, "env": {"taskset": {"id": hub["env_id"], **(hub.get("env_args") or {}),
                                                        **(hub.get("eval_args") or {})},
                                            "agent": NULL_AGENT}}]
        sel = hub.get("selection")
        if sel:
            blocks.append({"name": SELECTION_ENV, "num_examples": min(knobs.eval_examples, sel["size"]),
                           "group_size": 1, "env": {"taskset": {"id": hub["env_id"], **sel["args"]},
                                                    "agent": NULL_AGENT}})
        if knobs.eval_draws:
            # vLLM samples them with no fixed seed: EvalSamplingConfig has no seed, and one in
            # extra_body would give each of an example's group_size requests the same draw
            blocks += [{**b, "name": DRAWS_ENVS[split], "group_size": knobs.eval_draws,
                        "sampling": {"temperature": DRAW_TEMPERATURE}}
                       for split, b in zip(("eval", "selection"), blocks)]
        return blocks

    def hub_train_args(self, hub: dict) -> dict:
        """The taskset fields that select the hub's train split (hub_env.json `train_args`)."""
        return {**(hub.get("env_args") or {}), **(hub.get("train_args") or {})}

    def hub_train_block(self, hub: dict) -> dict:
        return self.train_env_block(hub["env_id"], self.hub_train_args(hub))

    def train_blocks(self, cfg: dict) -> list[dict]:
        return list(cfg.get("orchestrator", {}).get("train", {}).get("source", []) or [])

    def train_sources(self, package: str, hub_block: dict | None, name: str | None = None,
                      fork_name: str | None = None) -> list[dict]:
        """An arm's train sources. An arm that forks iter_0 has one source, which keeps iter_0's
        name (`fork_name`, a canonical config's; TRAIN_SOURCE when the driver rendered iter_0);
        an arm that also trains on the hub taskset (from base) has both, half the task draws
        each."""
        if hub_block is None:
            return [self.train_env_block(package, name=fork_name or TRAIN_SOURCE)]
        return [{**hub_block, "name": HUB_SOURCE, "ratio": 0.5},
                self.train_env_block(package, name=name or package, ratio=0.5)]

    def check_final_eval(self, text: str) -> dict:
        cfg = tomllib.loads(text)
        unknown = current_schema.unknown_keys(cfg, current_schema.EVALS_SCHEMA)
        if unknown:
            raise UsageError(f"prime-rl's evals would reject unknown key(s): {', '.join(unknown)}")
        for b in cfg.get("eval", {}).get("source", []):
            if (b.get("env") or {}).get("agent") != NULL_AGENT:
                raise UsageError(f"eval source {b.get('name')!r} needs the null/subprocess agent")
        return cfg

    def _common(self, knobs: Knobs, max_steps: int, sources: list[dict]) -> dict:
        cfg: dict = {"max_steps": max_steps, "run": {"name": RUN_NAME},
                     "ckpt": {"interval": knobs.steps_per_run},
                     "weight_broadcast": {"type": "filesystem"}}
        knob_keys.apply(cfg, KNOB_KEYS, knobs, "train")
        cfg["orchestrator"]["train"]["source"] = sources
        cfg.setdefault("trainer", {})
        cfg.setdefault("inference", {})
        return cfg

    # ---- configs -----------------------------------------------------------------------------
    def render_base(self, hub: dict, knobs: Knobs) -> str:
        cfg = self._common(knobs, knobs.steps_per_run, [self.hub_train_block(hub)])
        return _header("Base config for iter_0 (current prime-rl): trains on the hub taskset.\n"
                       "Its final weights are measured by a separate `evals` launch.") + tomli_w.dumps(cfg)

    def render_eval_overlay(self, hub: dict, knobs: Knobs) -> str:
        # the in-run eval would measure v(max_steps - 1) at best, never the final weights: the
        # overlay only pins one checkpoint at the final step and the loadable broadcast
        return (_header("iter_0 overlay: one checkpoint at the final step and the filesystem\n"
                        "weight broadcast (the final weights are evaluated by `evals`).")
                + tomli_w.dumps({"ckpt": {"interval": knobs.steps_per_run},
                                 "weight_broadcast": {"type": "filesystem"}}))

    def render_run(self, *, arm: str, purpose: str, hub: dict, knobs: Knobs, eval_knobs: Knobs | None,
                   train_envs: list[dict], resume_step: int | None,
                   resume_from: Path | None = None) -> str:
        """An iteration / control-run config. max_steps is absolute: F + steps_per_run when
        forking iter_0's step F (`resume_from` = iter_0's output dir), steps_per_run from base."""
        if resume_step is not None and (type(resume_step) is not int or resume_step < 1):
            raise UsageError(f"resume_step must be a positive integer step, got {resume_step!r}")
        if resume_step is not None and resume_from is None:
            raise UsageError("the current dialect forks a checkpoint: resume_from (the output dir "
                             "holding step F) is needed with resume_step")
        cfg = self._common(knobs, (resume_step or 0) + knobs.steps_per_run, train_envs)
        if resume_step is not None:
            assert resume_from is not None   # refused above
            cfg["resume"] = {"dir": str(self.checkpoint_dir(Path(resume_from), resume_step))}
        if knobs.wandb == "on":   # `driver run` resolved auto to on only with credentials
            cfg["monitors"] = {"wandb": {"project": wandb_project(hub), "name": arm}}
        return _header(f"{arm}: {purpose}") + tomli_w.dumps(cfg)

    def render_final_eval(self, hub: dict, knobs: Knobs, broadcasts: Path, step: int,
                          output_dir: Path, served: dict | None = None) -> str:
        """prime-rl's `evals` config for an arm's final weights, in its online mode: the base
        model served under its own name (as in training), the arm's broadcast at `step` loaded
        into it (`[online]` with the retrigger at the resume step: evals.py:239-270,327-367), and
        every eval source once, written to output_dir/rollouts/step_<step>. `served` is the
        inference config the arm's `rl` resolved (served_config), the eval server's: its client
        takes data through the server port and sends admin calls (pause, update_weights,
        resume, the metrics scrape) to the engine behind the router, as rl's own launcher wires
        them (configs/rl.py:816-824@559b447); without it, a standalone server on the default
        port with its router."""
        host, ports = "localhost", [EVAL_SERVER_PORT, EVAL_SERVER_PORT + ENGINE_PORT_OFFSET]
        if served is not None:
            host = (served.get("server") or {}).get("host") or host
            ports = launch.server_ports({"inference": served}, "current")
        cfg: dict = {"model": knobs.model, "output_dir": str(output_dir),
                     "online": {"broadcasts_dir": str(broadcasts), "max_steps": step, "resume_step": step},
                     "eval": {"retrigger_on_resume": True,
                              "client": {"base_url": f"http://{host}:{ports[0]}/v1",
                                         "admin_base_url": [f"http://{host}:{ports[-1]}/v1"]}}}
        # an evals config holds the eval keys at its top level ([eval], not [orchestrator.eval])
        knob_keys.apply(cfg, KNOB_KEYS, knobs, "eval", prefix="orchestrator.")
        cfg["eval"]["source"] = self.eval_env_blocks(hub, knobs)
        return _header("Final-weights eval: prime-rl's run never evaluates v(max_steps); `evals` loads\n"
                       "the final broadcast into the base model's server.") + tomli_w.dumps(cfg)

    def served_config(self, out: Path) -> Path | None:
        """The inference config an arm's `rl` resolved and started its server on, which the
        final-weights eval starts its own server on (rl_contract/final_eval.py); None where the
        launch had no [inference] and wrote none."""
        path = self.run_dir(out) / "configs" / "inference.json"
        return path if path.is_file() else None

    def iter0_overrides(self, knobs: Knobs, output_dir: Path) -> list[str]:
        return ["--max-steps", str(knobs.steps_per_run), "--output-dir", str(output_dir),
                "--run.name", RUN_NAME, *knob_keys.flags(KNOB_KEYS, knobs)]

    # ---- checks ------------------------------------------------------------------------------
    def check_rendered(self, text: str, *, expect_resume: int | None = None,
                       fork_name: str | None = None) -> dict:
        """Parse a rendered config back and refuse what would waste a launch."""
        return self.check_effective(parse_rendered(text), expect_resume=expect_resume,
                                    complete=False, fork_name=fork_name)

    def check_effective(self, cfg: dict, *, expect_resume: int | None = None,
                        complete: bool = True, fork_name: str | None = None) -> dict:
        """Refuse what prime-rl's current config classes reject, and what they accept but fails
        or misleads at runtime: a hang at max_steps <= F, a changed train-source name on a
        resume, a remote sandbox, NCCL broadcast (no loadable weights), a random run name."""
        unknown = current_schema.unknown_keys(cfg)
        if unknown:
            hints = [current_schema.CLASSIC_HINTS[k] for k in current_schema.CLASSIC_HINTS
                     if any(u == k or u.startswith(k + ".") or u.startswith(k + "[") for u in unknown)]
            raise UsageError(f"prime-rl (current) would reject unknown key(s): {', '.join(unknown)}"
                             + (f" ({'; '.join(hints)})" if hints else "")
                             + ". The schema is prime-rl v0.8.1.dev67's.")
        orch = cfg.get("orchestrator", {})
        check_batch(orch, "group_size")
        sources = self.train_blocks(cfg)
        for where, blocks in (("train", sources), ("eval", orch.get("eval", {}).get("source", []) or [])):
            for b in blocks:
                # each role of the env is an AgentConfig field named by the env's config class
                # (verifiers/v1/configs/env.py:34-38@a60a606): `agent` for a single-agent env,
                # another name where the env has one (configs/basic/wordle@559b447: `player`)
                env = b.get("env") or {}
                roles = {k: v for k, v in env.items() if isinstance(v, dict) and ("harness" in v or "runtime" in v)}
                unset = [k for k, v in (roles or {"agent": {}}).items()
                         if (v.get("harness") or {}).get("id") is None or (v.get("runtime") or {}).get("type") is None]
                if unset:
                    role = unset[0]
                    raise UsageError(
                        f"[[orchestrator.{where}.source]] {b.get('name')!r} has no harness/runtime for its "
                        f"{role!r} role: prime-rl would run a bash harness in a remote sandbox. Set env.{role} = "
                        '{harness = {id = "null"}, runtime = {type = "subprocess"}} for a single-turn task.')
                if not ((b.get("env") or {}).get("taskset") or {}).get("id"):
                    raise UsageError(f"[[orchestrator.{where}.source]] {b.get('name')!r} names no env.taskset.id")
        names = [b.get("name") or b["env"]["taskset"]["id"] for b in sources]
        if len(set(names)) != len(names):
            raise UsageError(f"train-source names must be unique, got {names}")
        if "eval" in orch and not orch["eval"].get("source"):
            raise UsageError("[orchestrator.eval] without a source is invalid in prime-rl (current)")
        resume = cfg.get("resume")
        fork_step = None
        if resume is not None:
            if "step" in resume and "dir" in resume:
                raise UsageError("[resume] takes step or dir, not both")
            if "dir" in resume:
                m = _CHECKPOINT.search(str(resume["dir"]))
                if not m:
                    raise UsageError(f"[resume] dir must name a checkpoints/step_N directory, got {resume['dir']!r}")
                fork_step = int(m.group(1))
            elif "step" in resume:
                fork_step = resume_step_value(resume["step"], "[resume] step")
            if fork_step is not None and cfg.get("max_steps") is not None and int(cfg["max_steps"]) <= fork_step:
                raise UsageError(f"max_steps {cfg['max_steps']} must exceed the resume step {fork_step}: "
                                 "max_steps is absolute, and at max_steps <= F prime-rl's trainer hangs")
            kept = [fork_name or TRAIN_SOURCE]
            if fork_step is not None and names != kept:
                raise UsageError(f"a resumed run's train sources must keep the checkpoint's names "
                                 f"({kept}), got {names}: prime-rl refuses a resume whose "
                                 "train-source names changed (the taskset behind a name may change)")
        if expect_resume is not None and fork_step != expect_resume:
            raise UsageError(f"config does not resume from step {expect_resume}")
        if (cfg.get("weight_broadcast") or {}).get("type", "nccl" if "inference" in cfg else None) not in (None, "filesystem"):
            raise UsageError("[weight_broadcast] type must be \"filesystem\": NCCL (the default with "
                             "[inference]) writes no loadable weights, so the final weights could not be evaluated")
        if complete:
            if mismatch := launch.client_port_mismatch(cfg, "current"):
                raise UsageError(mismatch)
            if "trainer" not in cfg:
                raise UsageError("no [trainer] table: prime-rl (current) rejects the config "
                                 "(--trainer Field required)")
            if not sources:
                raise UsageError("train source missing: prime-rl would train on its default taskset")
            if (cfg.get("run") or {}).get("name") != RUN_NAME:
                raise UsageError(f"run.name must be {RUN_NAME!r}: unset, prime-rl names the run dir "
                                 "with a random suffix per launch and a resume lands elsewhere")
            model = (cfg.get("model") or {}).get("name")
            if model and not orch.get("renderer") and not current_schema.has_renderer(model):
                raise UsageError(
                    f"model {model!r} is not in prime-rl's renderer map, so `renderer = auto` fails "
                    "validation. Set [orchestrator.renderer] name, or use a mapped model "
                    f"(e.g. {', '.join(current_schema.RENDERER_MODELS_EXAMPLE)}).")
            fork = (cfg.get("resume") or {}).get("dir")
            if fork and not Path(fork).is_dir():
                raise UsageError(f"[resume] dir {fork} does not exist: the arm forks a checkpoint "
                                 "that is not there (retrain iter_0)")
        return cfg

    def foreign_run(self, out: Path, resume_step: int | None) -> list[str]:
        """What in an output dir belongs to another launch: prime-rl refuses a fresh launch into
        a run dir with artifacts, and an arm forks its start, so anything there is foreign."""
        r = self.run_dir(out)
        return [str(r / d / f"step_{s}") for d in ("checkpoints", "broadcasts", "rollouts")
                for s in self.steps(r / d)]

    def env_ids(self, cfg: dict) -> list[str]:
        orch = cfg.get("orchestrator", {})
        return [b["env"]["taskset"]["id"] for s in ("train", "eval")
                for b in orch.get(s, {}).get("source", []) or []
                if isinstance(b, dict) and ((b.get("env") or {}).get("taskset") or {}).get("id")]
