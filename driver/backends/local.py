"""The embedded trainer (embedded_trainer.rl): the same `@ a.toml --flags` contract and output
layout as prime-rl's classic `rl`, run by this interpreter, which also loads the environments.
It needs torch, which the driver itself never imports."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

from driver.backends.base import Command, Probe
from driver.backends.process import ProcessRunner
from driver.backends.prime_rl import probe_override
from driver.errors import UsageError

PROBE_MODULE = "embedded_trainer.probe"
PLAYS = ("single_turn", "multi_turn", "tools")   # the kinds of episodes the embedded trainer plays


@dataclass(frozen=True)
class Local:
    python: str
    probe_command: Probe
    name: str = "local"
    dialect: str = "classic"
    prime_rl_version: str | None = None
    version_source: str | None = None
    stand_in: str | None = None

    def trainer(self) -> Command:
        return Command((self.python, "-m", "embedded_trainer.rl"))

    def final_evaluator(self) -> Command | None:
        return None   # the classic run evaluates its own final weights

    def runner(self) -> ProcessRunner:
        return ProcessRunner()

    def probe(self) -> Probe | None:
        return self.probe_command

    def seed_args(self, seed: int) -> list[str]:
        # the embedded trainer's [embedded] seed is not a prime-rl key: a flag after the checks
        return ["--embedded.seed", str(seed)]

    def eval_draw_seeds(self, per_source_eval_sampling: bool) -> str | None:
        # the embedded trainer samples an eval env of several rollouts per example as draws,
        # each batch from a seed of (env, batch), and names each row's env, which is how the
        # draws are told from the greedy rollouts (embedded_trainer/rl.py::evaluate). A stand-in
        # (DRIVER_RL_COMMAND) that writes classic prime-rl's rows names none: greedy only there
        if self.stand_in:
            return None
        return "fixed per batch of examples, common to every arm"

    def describe(self) -> str:
        return " ".join(self.trainer().argv)

    def refuse_episodes(self, hub: dict) -> str | None:
        """The embedded trainer plays single-turn, multi-turn and tool-using episodes (the env's
        own rollout loop, tool calls parsed as vLLM's hermes parser does:
        embedded_trainer/episodes.py); a kind introspection names that it does not know is
        refused before a run directory exists."""
        it = hub.get("interaction") or {}
        kind = it.get("kind", "single_turn")
        if kind in PLAYS:
            return None
        return (f"{hub.get('env_id')} ({hub.get('env_class')}) plays episodes of a kind the embedded "
                f"trainer (--backend local) does not know ({kind!r}); it plays single-turn, "
                "multi-turn and tool-using environments. Nothing was created. What works: "
                "--backend prime_rl --prime-rl-dir DIR on a GPU machine.")


def build(prime_rl_dir: str | None = None) -> Local:
    missing = [m for m in ("torch", "transformers", "embedded_trainer")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"--backend local needs {', '.join(missing)} in {sys.executable}. Install the "
            "embedded extra with a CPU torch pinned: pip install 'synthetic-self-improve-rl"
            "[embedded]' (torch==2.13.0).")
    probe = probe_override() or Probe("worker", (sys.executable, "-m", PROBE_MODULE))
    return Local(sys.executable, probe)
