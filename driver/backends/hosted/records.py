"""Where a hosted launch is written down on this machine: its record beside its output dir (the
run ids it was submitted as), the run's cost ledger, and where a local path is on the volume."""
from __future__ import annotations

import time
from pathlib import Path

from driver.errors import DriverError
from driver.run.files import atomic_write_json, read_json
from driver.run.arm_files import ArmFiles
from rl_contract.current import RUN_NAME

VOLUME_MOUNT = "/volume"                # where a hosted run sees its volume (SFT's; RL's unverified)
EVAL_KIND = "eval-run"                  # final_evaluator()'s marker: the launch is an eval run
RECORD = ".hosted.json"                 # a launch's record, inside its output dir
LEDGER = "cost.json"                    # the run's cost ledger, in the run dir
REMOTE = "REMOTE.json"                  # a checkpoint tree left on the volume: where it is



def _ledger(run_dir: Path) -> dict:
    p = Path(run_dir) / LEDGER
    return read_json(p) if p.exists() else {"launches": {}}


def record_cost(run_dir: Path, launch: str, entry: dict) -> None:
    ledger = _ledger(run_dir)
    ledger["launches"][launch] = entry
    atomic_write_json(Path(run_dir) / LEDGER, ledger)


def spent_usd(run_dir: Path) -> float:
    return float(sum(e.get("cost_usd") or 0.0 for e in _ledger(run_dir)["launches"].values()))


def launches(run_dir: Path) -> list[dict]:
    """Every billed launch's ledger entry (its arm directory, kind and cost_usd among them)."""
    return list(_ledger(run_dir)["launches"].values())


def arm_cost(run_dir: Path, arm: str) -> float | None:
    costs = [e.get("cost_usd") or 0.0 for e in _ledger(run_dir)["launches"].values()
             if e.get("arm") == arm]
    return round(float(sum(costs)), 6) if costs else None


# --------------------------------------------------------------------------------------------
# where a launch belongs

def run_dir_of(out: Path) -> Path:
    """The run directory above a launch's output dir (the one holding run.json)."""
    for d in Path(out).resolve().parents:
        if (d / "run.json").exists():
            return d
    raise DriverError(f"{out} is not inside a run directory (no run.json above it)")


def arm_dir_of(out: Path, run_dir: Path) -> Path:
    return run_dir / Path(out).resolve().relative_to(run_dir).parts[0]


def read_record(out: Path) -> dict | None:
    p = Path(out) / RECORD
    return read_json(p) if p.exists() else None


def write_record(out: Path, rec: dict) -> None:
    Path(out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(Path(out) / RECORD, rec)


def say(log: Path, text: str) -> None:
    """One line in the launch's log (the arm's train.log / final_eval.log), which the driver
    shows as the log tail of a failure; nothing ever reads it back for a phrase."""
    with open(log, "a") as f:
        f.write(f"[hosted {time.strftime('%H:%M:%S')}] {text}\n")


def volume_path(run_dir: Path, local: Path) -> str:
    """Where a local path inside a trained arm's prime_out/run/ is on the volume, as a hosted
    run sees it: VOLUME_MOUNT/<that arm's R>/<the rest>."""
    local = Path(local).resolve()
    arm = arm_dir_of(local, run_dir)
    rec = read_record(arm / ArmFiles.OUT)
    if not rec or not rec.get("root"):
        raise DriverError(f"{local} belongs to {arm.name}, which has no completed hosted run on "
                          "the volume to read it from; retrain that arm first")
    rel = local.relative_to(arm / ArmFiles.OUT / RUN_NAME)
    # the root of the tree's own kind (checkpoints/, broadcasts/ may lie apart from rollouts/)
    root = (rec.get("roots") or {}).get(rel.parts[0] if rel.parts else "", rec["root"])
    return f"{VOLUME_MOUNT}/{root}/{rel.as_posix()}".replace("//", "/")
