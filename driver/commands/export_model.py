"""`driver export-model RUN_DIR --to DIR`: an arm's final weights as a directory that loads with
`from_pretrained`."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES
from driver.run.arm_files import ArmFiles

NAME = "export-model"


def add(sub) -> None:
    ex = sub.add_parser(
        NAME, help="an arm's final weights as a model directory from_pretrained loads",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES,
        description="Copy an arm's final weights (default: the recommended checkpoint of the "
                    "summary) into DIR as a Hugging Face model directory. Classic prime-rl saves "
                    "one (weights/step_N); the current generation's weights are a broadcast "
                    "holding weight shards only, so the base model's config, generation config "
                    "and tokenizer are saved beside them, by the training interpreter (prime-rl's "
                    "venv, whose Hugging Face cache holds the base model).")
    ex.add_argument("run_dir")
    ex.add_argument("--to", required=True, help="the directory to write (must not exist)")
    ex.add_argument("--arm", help="iter_N or a control (run_a, run_b, run_c); default: the "
                                  "recommended checkpoint")
    ex.add_argument("--json", action="store_true")


def main(a) -> int:
    import shutil
    from pathlib import Path

    from driver.arms import table
    from driver.context import Ctx
    from driver.envs import envside
    from driver.errors import DriverError, UsageError
    from driver.reporting.summary import summary_rows
    from driver.run.rundir import RunDir
    from rl_contract.classic import hf_weight_files

    rd = RunDir(a.run_dir)
    ctx = Ctx.open(rd, rd.load())
    dest = Path(a.to)
    if dest.exists():
        raise UsageError(f"--to {dest} exists; name a new directory")
    arm = a.arm
    if arm is None:
        rec = next((r for r in summary_rows(ctx) if r.get("recommended")), None)
        if rec is None:
            raise UsageError(f"{rd.path} has no recommended checkpoint yet (no evaluated iteration); "
                             "pass --arm iter_0 or another evaluated arm")
        arm = rec["arm"]
    try:
        summary_path = table.arm_dir(ctx, arm) / ArmFiles.EVAL_SUMMARY
    except (KeyError, ValueError, IndexError):
        raise UsageError(f"--arm {arm} names no arm: iter_N, or one of "
                         + ", ".join(c.name for c in table.CONTROLS)) from None
    if not summary_path.exists():
        raise UsageError(f"{arm} has not been evaluated in {rd.path}: no {summary_path.name}")
    weights = Path(json.loads(summary_path.read_text())["checkpoint"])
    weights = weights if weights.is_absolute() else rd.path / weights
    if not weights.is_dir():
        raise DriverError(f"{arm}'s weights {weights} are gone; nothing to export")
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(weights, tmp, ignore=shutil.ignore_patterns("STABLE"))
    added: list[str] = []
    if hf_weight_files(tmp):   # weights only (a current broadcast): the base model's files beside
        try:
            got = envside.call(ctx.trainer.python, envside.MODEL_FILES,
                               envside.ModelFilesRequest(model=ctx.state.model, dest=str(tmp)))
        except envside.EnvsideError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise DriverError(f"could not save {ctx.state.model}'s config and tokenizer with "
                              f"{ctx.trainer.python}: {e}. Run this where the base model is in "
                              "the Hugging Face cache (the training node).") from None
        added = got.written
    missing = hf_weight_files(tmp)
    if missing:
        shutil.rmtree(tmp, ignore_errors=True)
        raise DriverError(f"{weights} does not make a loadable model: missing {', '.join(missing)}")
    tmp.rename(dest)
    out = {"arm": arm, "weights": str(weights), "model_dir": str(dest.resolve()),
           "added_from_base_model": added}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{arm}: {weights} -> {dest.resolve()}"
              + (f" (with {ctx.state.model}'s {', '.join(added)})" if added else "")
              + "\nload it with AutoModelForCausalLM.from_pretrained(" + repr(str(dest.resolve())) + ")")
    return 0
