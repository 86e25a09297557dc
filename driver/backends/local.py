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
PLAYS = ("single_turn", "multi_turn")   # the kinds of episodes the embedded trainer plays


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

    def describe(self) -> str:
        return " ".join(self.trainer().argv)

    def refuse_episodes(self, hub: dict) -> str | None:
        """The embedded trainer plays single-turn and multi-turn episodes (the env's own rollout
        loop: embedded_trainer/episodes.py), not tool calls."""
        it = hub.get("interaction") or {}
        if it.get("kind", "single_turn") in PLAYS:
            return None
        tools = ", ".join(it.get("tools") or []) or "?"
        return (f"{hub.get('env_id')} is a tool-using environment ({hub.get('env_class')}; tools: "
                f"{tools}): its episodes go on as the model calls tools, and the embedded trainer "
                "(--backend local) does not parse tool calls out of the model's text. It plays "
                "single-turn and multi-turn environments (the env's own env_response, stop "
                "conditions and max_turns). Nothing was created. What works: --backend prime_rl "
                "--prime-rl-dir DIR on a GPU machine (vLLM parses the model's tool calls), or a "
                "single-turn or multi-turn env without tools on --backend local.")


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
