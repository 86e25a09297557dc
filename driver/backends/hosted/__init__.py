"""Prime Intellect's Hosted Training through the `prime` CLI (PyPI `prime` 0.15.0 .. 0.18.x), for
a user with no GPU machine: every launch of an arm is a hosted run.

The contract below is read from the CLI's source (prime 0.18.0: commands/rl.py, api/training.py,
api/rl.py, commands/env.py, commands/volumes.py), not guessed; where the CLI leaves a point to
the server it says so.

- Submit: `prime --plain train CONFIG --yes --output json --volume V [-e WANDB_API_KEY]
  [--resume-from PAUSED_ID]`. The whole prime-rl TOML is the run's config; a top-level
  `model = "..."` string or `[[env]]` array is refused as a retired shared-LoRA config. Success
  prints `{"run": {"runId": ...}}` (a warning may precede it); an error prints `Error: ...` on
  stdout and exits 1. A top-level `name` names the run on the platform (`prime train list`),
  and is how a submission whose id was never recorded is found again.
- Poll: `prime train get ID -o json` (`.run.status`: QUEUED, PENDING, RUNNING, PAUSING, then
  COMPLETED, FAILED, STOPPED or PAUSED; the reason in `error_message` / `failure_analysis`) and
  `prime train progress ID` (`latest_step`): JSON, never a log.
- Outputs: a run with `--volume V` writes under `runs/<runId>/` on V (`prime volumes ls V PATH
  -R -o json`, `prime volumes get V REMOTE LOCAL`); files appear there once the run ends. The
  layout inside is prime-rl's and the platform's: the driver finds prime-rl's run directory R
  in the listing (runs/<runId>/ itself, or a directory below it: the CLI does not say), and
  reads from it only what the readers above
  the seam need, into the arm's local output dir in the current layout (prime_out/run/...): the
  train rollouts, the final eval cut to its numbers, and for the checkpoint trees a REMOTE.json
  naming where they are on the volume (a 4B model's trainer checkpoint is tens of GB; nothing
  on this machine reads it).
- Iterations fork iter_0's checkpoint in place, as the current dialect does everywhere:
  `[resume] dir` names iter_0's `checkpoints/step_F` on the shared volume, mounted at
  VOLUME_MOUNT. `--resume-from` cannot do it: it continues a PAUSED run (iter_0 completes, it
  is never paused at step F), and whether one paused run can be continued by several new runs
  with different configs the CLI leaves to the server. An arm's run that the platform (or the
  user) PAUSED is continued from its own last checkpoint: `prime train resume RUN` (0.16.0 on),
  or on 0.15.x `--resume-from RUN` with a config whose [resume] dir names that checkpoint, so
  however the platform combines the two no step is trained or billed twice.
- The final-weights eval: prime-rl's `rl` never evaluates v(max_steps), and Hosted Training
  runs only `rl` (and SFT), so the dialect's standalone `evals` config cannot be submitted (its
  top-level `model = "<weights>"` is exactly the shape the CLI refuses). It is submitted as a
  one-step run whose `[model] name` is the arm's final broadcast on the volume and whose
  `[orchestrator.eval]` is the evals config's: prime-rl evaluates the weights it starts from
  (policy v0) at startup, written as step 1, before its one (discarded) train step on the hub's
  train split. `[tokenizer] name` is the student's, which also resolves the renderer.
- Placement and cost: the platform places a run on reserved capacity (a cluster of the account
  caching the model; no hourly price) or on demand (the pool downloads an uncached model; billed
  per GPU-hour from pods ready, at the rate the dispatch answer quotes). Each run's cost is
  recorded both ways when it ends (its billed time at that rate, and `prime train usage ID -o
  json`'s token view) in the run's ledger (cost.json); the gate's --max-cost reads the larger.
- A run the driver loses track of is stopped by id and its cost recorded before anything else
  is launched; a stop the platform does not confirm ends the driver (StillRunning).

Unknown from the CLI (the server decides; verified only against tests/prime_double.py): where an
RL run mounts its volume (SFT runs mount it at /volume), whether the platform honours a
`[resume] dir` on it, how it installs tasksets (configs name them by their Hub id, which prime-rl
resolves to the same module; generated envs declare the hub env they load), the layout inside
runs/<runId>/, and whether `prime train usage` counts GPU-hours.
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from driver.backends.base import Command, Probe
from driver.backends.hosted.cli import (
    CLIError,
    PrimeCLI,
    check_login,
    check_version,
    cli_version,
)
from driver.backends.hosted.publish import publish
from driver.backends.hosted.records import EVAL_KIND, LEDGER, RECORD, arm_cost, spent_usd
from driver.backends.hosted.runner import HostedRunner, platform_time
from driver.backends.hosted.submission import check_submission
from driver.errors import UsageError
from driver.run.model import RunState
from driver.run.arm_files import ArmFiles

__all__ = ["Hosted", "HostedRunner", "PrimeCLI", "arm_cost", "build", "check_submission", "cost_estimate",
           "spent_usd"]

ASSUMED_GPUS = 2                        # for the header's estimate, until a run reports gpu_count



@dataclass(frozen=True)
class Hosted:
    """The hosted backend: prime-rl's current generation, run by the platform."""
    cli: PrimeCLI
    cli_version: str
    python: str
    name: str = "hosted"
    dialect: str = "current"
    prime_rl_version: str | None = None
    version_source: str | None = None
    stand_in: str | None = None

    def trainer(self) -> Command:
        return Command((self.cli.exe, "train"))

    def final_evaluator(self) -> Command | None:
        return Command((self.cli.exe, "train", EVAL_KIND))

    def runner(self) -> HostedRunner:
        return HostedRunner(self.cli, self.cli_version)

    def probe(self) -> Probe | None:
        return Probe("launch")   # a one-step hosted run from iter_0, when probe_gate lets it

    def probe_gate(self, run_dir: Path, state: RunState, rollouts: int) -> tuple[bool, str]:
        return probe_gate(Path(run_dir), state, rollouts)

    def seed_args(self, seed: int) -> list[str]:
        return []

    def eval_draw_seeds(self, per_source_eval_sampling: bool) -> str | None:
        return None   # a hosted eval's per-env sampling is not verified (docs/hosted.md)

    def describe(self) -> str:
        return (f"prime train on Prime Intellect's Hosted Training (prime CLI {self.cli_version}, "
                f"{self.cli.exe})")

    def preflight(self, state: RunState) -> str | None:
        """The student must be one Hosted Training can place: cached on a reserved cluster the
        account has, or on the on-demand pool, which downloads a model it has not cached
        (api/training.py:110-126, 138-152@0.18.0); returns the header's cost lines."""
        try:
            models = self.cli.json("train", "models", "-o", "json", timeout=120)
        except CLIError as e:
            raise UsageError(f"cannot list Hosted Training's models: {e}") from None
        reserved = [str(m.get("name")) for m in models.get("available_fft_models") or []
                    if isinstance(m, dict)]
        offers = on_demand_offers(models)
        if state.model not in reserved and not offers:
            access = models.get("on_demand_beta_access")
            why = ("your account is not enrolled in the on-demand beta (ask Prime support for "
                   "access)" if access is False else "no on-demand capacity is listed now")
            raise UsageError(
                f"--model {state.model} cannot be placed on Hosted Training: `prime train models` "
                f"lists it on no reserved cluster of yours (reserved: {', '.join(reserved) or 'none'}) "
                f"and {why}. Pass --model with a listed one, ask for it with `prime train request`, "
                "or run again once `prime train models` lists on-demand capacity.")
        if not offers:
            # every arm's final-weights eval is a run whose model is those weights on the volume
            # (submission.eval_config), which no cluster caches: reserved capacity takes cached
            # models only (commands/rl.py:1418-1421, api/training.py:86-90@0.18.0), the on-demand
            # pool downloads one (:113-116). Without it iter_0 would train, then its eval be refused
            access = models.get("on_demand_beta_access")
            why = ("your account is not enrolled in the on-demand beta" if access is False
                   else "`prime train models` lists no on-demand capacity now")
            raise UsageError(
                f"--backend hosted measures every arm's final weights with an eval run whose model is "
                f"those weights on volume {state.hosted_volume}, and Hosted Training places a model no "
                f"cluster caches only on the on-demand pool; {why}. iter_0 would train on your "
                f"reserved allocation and its eval then be refused. Ask Prime support for on-demand "
                "access, or run again once `prime train models` lists on-demand capacity; nothing "
                "was created.")
        return cost_estimate(state, models)

    def publish_env(self, pkg_dir: Path) -> dict:
        return publish(self.cli, Path(pkg_dir))


def build(prime_rl_dir: str | None = None) -> Hosted:
    """Refuse, before anything is created, a machine that cannot submit: no `prime` on PATH, a
    CLI outside the window, not logged in."""
    exe = shutil.which("prime")
    if not exe:
        raise UsageError(
            "--backend hosted runs the loop on Prime Intellect's Hosted Training through the "
            "`prime` CLI, which is not on PATH. Install it (`uv tool install prime`, or "
            "`pip install prime`), log in (`prime login`), then run again.")
    cli = PrimeCLI(exe)
    version = cli_version(cli)
    check_version(version)
    check_login(cli)
    return Hosted(cli, version, sys.executable,
                  version_source=f"Hosted Training's own prime-rl image (prime CLI {version})")


def probe_gate(run_dir: Path, state: RunState, rollouts: int) -> tuple[bool, str]:
    """The gradient probe on hosted is a one-step run from iter_0 (a start-up, then one step of
    `rollouts` rollouts), billed like any run. Its share of an arm is estimated from iter_0's
    own run: its start-up (running to its first step) and its time per step; it runs when that
    share is at most --hosted-probe-share."""
    from driver.run.files import read_json

    share_cap = state.hosted_probe_share
    knob = f"--hosted-probe-share {share_cap:g}"
    rec_path, ledger_path = run_dir / "iter_0" / ArmFiles.OUT / RECORD, run_dir / LEDGER
    rec = read_json(rec_path) if rec_path.exists() else {}
    seen = (rec.get("runs") or {}).get((rec.get("run_ids") or [None])[0]) or {}
    entries = [e for e in (read_json(ledger_path).get("launches") or {}).values()
               if e.get("arm") == "iter_0" and e.get("kind") == "train"] if ledger_path.exists() else []
    start, first = platform_time(seen.get("started_at")), platform_time(seen.get("first_step_at"))
    billed = sum(float(e.get("billed_s") or 0) for e in entries)
    if start is None or first is None or billed <= 0:
        why = ("a one-step hosted run from iter_0 whose cost cannot be estimated (iter_0's start-up "
               "was not measured here)")
        return (share_cap >= 1, why + ("; it runs: --hosted-probe-share 1" if share_cap >= 1 else
                                       f"; skipped ({knob}; 1 runs it anyway)"))
    startup = max(0.0, first - start)
    step_s = max(0.0, billed - startup) / max(1, state.steps_per_run)
    probe_s = startup + step_s * rollouts / max(1, state.batch_size)
    share = min(1.0, probe_s / max(billed, 1e-9))
    cost = share * sum(float(e.get("cost_usd") or 0) for e in entries)
    line = (f"a one-step hosted run from iter_0 ({rollouts} rollouts): about {probe_s:.0f}s billed "
            f"(iter_0's start-up {startup:.0f}s and one step), {share:.0%} of an arm's, about "
            f"${cost:.2f}")
    if share <= share_cap:
        return True, f"{line}; it runs ({knob})"
    return False, f"{line}; skipped: over {knob} (1 runs it)"


def on_demand_offers(models: dict) -> list[dict]:
    return [o for o in models.get("on_demand") or []
            if isinstance(o, dict) and isinstance(o.get("price_per_gpu_hour"), (int, float))]


def cost_estimate(state: RunState, models: dict) -> str:
    """The header's cost lines. Placement is the platform's: a student cached on a reserved
    cluster of the account runs there, with no hourly price (the cost is then unknown here);
    otherwise on the on-demand pool at its listed $/GPU-hour, which downloads the model at
    start (billed from pods ready: the download is paid time). The dispatch answer quotes each
    run's own rate, which the ledger uses."""
    reserved = {str(m.get("name")): sorted({str(c.get("gpu_type")) for c in m.get("clusters") or []
                                            if isinstance(c, dict) and c.get("gpu_type")})
                for m in models.get("available_fft_models") or [] if isinstance(m, dict)}
    offers = on_demand_offers(models)
    cap = (f" --max-cost ${state.max_cost_usd:g} caps the whole run, the controls included (each "
           "run's cost is the larger of the GPU-hour bill at its dispatch rate and `prime train "
           "usage`): no run is submitted where what the runs have cost plus its estimate (the "
           "costliest billed run of its kind) would pass it, and the loop starts an iteration only "
           "while that iteration and the controls, so estimated, fit."
           if state.max_cost_usd is not None else " Set --max-cost USD to cap what the run spends.")
    ledger = (" Each run's billed time, GPU-hours, dispatch rate and usage view are in cost.json "
              "and metrics.json. The gradient probe is a paid one-step run per iteration: its cost "
              "is estimated from iter_0's start-up and step time and stated before it runs, and it "
              f"runs only when at most --hosted-probe-share ({state.hosted_probe_share:.0%}) of an "
              "arm's.")
    if state.model in reserved:
        best = min(offers, key=lambda o: (not o.get("available_now"), o["price_per_gpu_hour"]))
        return (f"cost: {state.model} is cached on reserved clusters of yours "
                f"({', '.join(reserved[state.model]) or 'GPU type not listed'}), where its training "
                "runs have no hourly price: the loop's cost is unknown here (a run placed on demand "
                "instead quotes its rate at dispatch, and is billed at it). Every arm's final-weights "
                "eval run goes on demand (its model is the arm's weights on the volume, which no "
                f"cluster caches), at about ${float(best['price_per_gpu_hour']):.2f}/GPU-hour "
                f"({best.get('gpu_type')})." + ledger + cap)
    best = min(offers, key=lambda o: (not o.get("available_now"), o["price_per_gpu_hour"]))
    price, hours = float(best["price_per_gpu_hour"]), state.budget_seconds / 3600
    return (f"cost estimate: {state.model} is on no reserved cluster of yours, so its runs go on "
            f"demand, which downloads the model at each run's start (billed from pods ready, so "
            f"the download is paid time): ${price:.2f}/GPU-hour ({best.get('gpu_type')}, the rate "
            f"`prime train models` lists; each dispatch quotes its own). At {ASSUMED_GPUS} GPUs per "
            f"run (assumed until a run reports its gpu_count) the run's --budget of {hours:g} h of "
            f"runs, the controls included, costs up to ${price * ASSUMED_GPUS * hours:,.2f}; each "
            f"control arm costs about what one iteration does ({state.steps_per_run} steps of "
            f"{state.batch_size} rollouts, and a one-step eval run)." + ledger + cap)
