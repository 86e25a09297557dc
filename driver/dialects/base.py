"""The dialect seam: everything that differs between library generations, as the rest of the
driver sees it. Both implementations (classic.ClassicDialect, current.CurrentDialect) satisfy
this protocol, and the type checker holds them to it (driver.dialects.DIALECTS is typed with it).
"""
from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from driver.errors import UsageError
from driver.run.model import Knobs


class Dialect(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def selection_env(self) -> str:
        """The eval env name that marks selection-split rows."""
        ...
    @property
    def draws_envs(self) -> dict[str, str]:
        """The eval env names of each split's stochastic draws ("eval", "selection")."""
        ...
    @property
    def per_source_eval_sampling(self) -> bool:
        """Can one eval env sample apart from the others (the draws beside a greedy rollout)?"""
        ...
    @property
    def env_kind(self) -> str:
        """hub_env.json `kind`: a classic environment or a v1 taskset."""
        ...
    @property
    def forks_checkpoints(self) -> bool:
        """Arms start from iter_0 by reference ([resume] dir), not from copies of its trees."""
        ...
    @property
    def separate_final_eval(self) -> bool:
        """`rl` never evaluates the final weights: a second launch does."""
        ...
    @property
    def probe_overlay(self) -> dict:
        """What a gradient probe's one-step launch overlays on its config: prime-rl's
        zero-advantage filter off, so a dataset without live groups is measured, not aborted."""
        ...
    @property
    def final_eval_measures(self) -> str:
        """What prime-rl's final eval of an arm measures (rl_contract), said in the summary."""
        ...
    @property
    def eval_view(self) -> Callable[[dict], dict] | None:
        """Cuts one parsed eval line to its numbers, for rows that are not classic rollout rows."""
        ...

    # ---- the output layout ---------------------------------------------------------------------
    def steps(self, directory: Path) -> list[int]: ...
    def rollouts_dir(self, out: Path) -> Path: ...
    def weights_dir(self, out: Path, step: int) -> Path: ...
    def eval_file(self, out: Path, step: int) -> Path: ...
    def train_file(self, out: Path, step: int) -> Path: ...
    def train_rows(self, out: Path, step: int) -> Iterator[dict]: ...
    def train_steps(self, out: Path, start: int | None = None, final: int | None = None) -> list[int]: ...
    def latest_train_step(self, out: Path, start: int | None = None,
                          final: int | None = None) -> int | None: ...
    def checkpoint_trees(self, out: Path, step: int) -> list[Path]: ...
    def resume_trees(self, out: Path, step: int) -> list[Path]: ...
    def resumable_step(self, out: Path) -> int | None: ...
    def weights_problems(self, out: Path, step: int) -> list[str]: ...
    def rows_step(self, trained_step: int) -> int: ...
    def trained_step(self, rows_step: int) -> int: ...
    def launch_train_steps(self, start: int, final: int) -> range: ...
    def final_eval_step(self, final: int) -> int: ...
    def abort_reason(self, out: Path, start: int, final: int, groups_per_batch: int) -> str | None:
        """Why prime-rl aborted a launch on a rule of its own (the zero-advantage filter), as
        its files say, or None."""
        ...
    def progress_files(self, out: Path, start: int, final: int) -> list[Path]:
        """The launch's files whose growth is a sign of work while no new train step appears
        (the current generation's step still collecting through empty batches); [] where
        nothing is written between steps."""
        ...
    def dropped_eval_rollouts(self, out: Path) -> int:
        """How many rollouts of the final eval of the launch into `out` raised and were left
        out of its eval file, as prime-rl's log says (classic: its orchestrator log); 0 where
        the generation writes a failed rollout as an errored row instead."""
        ...
    def recorded_eval_setting(self, out: Path) -> dict | None:
        """The eval sampling a launch into `out` measured its final eval with, as it recorded it
        (classic: control/orch.toml), or None where nothing the driver reads records it."""
        ...
    def final_eval_dir(self, out: Path, step: int) -> Path: ...
    def foreign_run(self, out: Path, resume_step: int | None) -> list[str]: ...
    @property
    def eval_file_name(self) -> str:
        """The name an eval's rows file has (a partial copy of one carries it in its own)."""
        ...
    def is_eval_file(self, path: Path) -> bool:
        """`path` is an eval's rows file, wherever in an output dir a launch wrote it."""
        ...
    def sealed_eval_row(self, row: dict) -> dict:
        """One parsed eval row cut to the numbers the driver reads of it (driver/arms/seal.py):
        read back, it measures the same; sealed again, it is unchanged."""
        ...

    # ---- configs -------------------------------------------------------------------------------
    def train_env_block(self, env_id: str, args: dict | None = None,
                        name: str | None = None) -> dict: ...
    def train_sources(self, package: str, hub_block: dict | None, name: str | None = None,
                      fork_name: str | None = None) -> list[dict]:
        """An arm's train envs: the generated env alone, or with the hub's own train block
        beside it (half the draws each) when `hub_block` is given. `name`: the generated env's
        name in the config, the same in every run (the package carries a per-run tag, and a
        trainer may key its seeded draws on the name). `fork_name`: the name of iter_0's train
        source where a fork must keep it (the current generation), None for the default."""
        ...
    def hub_train_block(self, hub: dict) -> dict:
        """The hub env's train block, as iter_0 trains on it when no canonical config is given."""
        ...
    def train_blocks(self, cfg: dict) -> list[dict]: ...
    def eval_env_blocks(self, hub: dict, knobs: Knobs) -> list[dict]: ...
    def render_base(self, hub: dict, knobs: Knobs) -> str: ...
    def render_eval_overlay(self, hub: dict, knobs: Knobs) -> str: ...
    def render_run(self, *, arm: str, purpose: str, hub: dict, knobs: Knobs,
                   eval_knobs: Knobs | None, train_envs: list[dict], resume_step: int | None,
                   resume_from: Path | None = None) -> str:
        """An arm's config: trains with `knobs`, evaluates with `eval_knobs` (one eval
        configuration for every arm, whatever a teacher's hparams change in training; None:
        no eval, as the gradient probe's one-step launch)."""
        ...
    def render_final_eval(self, hub: dict, knobs: Knobs, broadcasts: Path, step: int,
                          output_dir: Path, served: dict | None = None) -> str: ...
    def served_config(self, out: Path) -> Path | None:
        """The inference config an arm's launch served with, which its final-weights eval
        serves with too (None: none written, or no separate final eval)."""
        ...
    def iter0_overrides(self, knobs: Knobs, output_dir: Path) -> list[str]: ...

    # ---- checks --------------------------------------------------------------------------------
    def check_rendered(self, text: str, *, expect_resume: int | None = None,
                       fork_name: str | None = None) -> dict: ...
    def check_effective(self, cfg: dict, *, expect_resume: int | None = None,
                        complete: bool = True, fork_name: str | None = None) -> dict: ...
    def check_final_eval(self, text: str) -> dict: ...
    def env_ids(self, cfg: dict) -> list[str]: ...


def parse_rendered(text: str) -> dict[str, Any]:
    """A rendered config parsed back, or a UsageError (a driver bug: it renders through tomli-w)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"rendered config is not valid TOML ({e}); this is a driver bug") from None


def resume_step_value(value: Any, where: str) -> int:
    """A resume step as a positive int (flags arrive as strings), or a UsageError."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if type(value) is not int or value < 1:
        raise UsageError(f"{where} must be a positive integer, got {value!r}")
    return value


def wandb_project(hub: dict) -> str:
    return f"synthetic-self-improve-rl-{hub['env_id']}"
