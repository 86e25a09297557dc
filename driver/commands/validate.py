"""`driver validate DATASET --weakness W`: the dataset gate, every line True or False."""
from __future__ import annotations

import argparse
import json
import sys

from driver.commands.flags import EXIT_CODES
from driver.gates import rules
from driver.run.arm_files import ArmFiles

NAME = "validate"


def add(sub) -> None:
    v = sub.add_parser("validate", help="run the dataset gate; exit 0 only if every line is True",
                       epilog="row schema (one JSON object per line):\n" + rules.schema_markdown()
                       + "\n\ngate lines (each must be True):\n" + rules.lines_markdown()
                       + "\n\n" + EXIT_CODES,
                       description="Every line of the gate, True or False; a False line names "
                                   "the field it read, every failing bucket and up to five row "
                                   "line numbers. With an aux_rewards.py beside DATASET its lines are "
                                   "added (it is run on every row). Inside a run directory (or with --env) the "
                                   "hub env's rubric scores each row's info.reasoning and the "
                                   "eval split's fingerprints are compared.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("dataset")
    v.add_argument("--weakness", required=True, help="the iteration's weakness.json")
    v.add_argument("--prior", action="append", default=[], help="a prior iteration's dataset (repeatable)")
    v.add_argument("--env", help="hub env id whose rubric scores each row's reasoning and whose "
                                 "eval split the rows are blindly decontaminated against (default: "
                                 "the run directory's hub env when DATASET is inside one)")
    v.add_argument("--json", action="store_true")


def main(a) -> int:
    from pathlib import Path

    from driver.errors import UsageError
    from driver.gates import accuracy, dataset, decontam, weakness
    from driver.run.files import read_json

    for f in [a.dataset, a.weakness, *a.prior]:
        if not Path(f).exists():
            raise UsageError(f"{f} does not exist")
    fingerprints = scored = hub = None
    run_dir = Path(a.dataset).resolve().parent.parent
    python = sys.executable
    try:
        if a.env:
            fingerprints = decontam.eval_fingerprints(sys.executable, a.env)
            scored = accuracy.score_rows(sys.executable, a.env, None, Path(a.dataset))
        elif (run_dir / "hub_env.json").exists():
            hub = read_json(run_dir / "hub_env.json")
            python = _run_python(run_dir)
            fingerprints = decontam.cached_fingerprints(run_dir, python, hub)
            scored = accuracy.score_hub_rows(python, hub, Path(a.dataset))   # classic or taskset
    except RuntimeError as e:
        raise UsageError(str(e)) from None
    weakness_json = weakness.load(a.weakness)
    from driver.envs.describe import multi_turn

    report = dataset.check(Path(a.dataset), weakness_json, [Path(p) for p in a.prior], fingerprints,
                           scored, multi_turn=multi_turn(hub))
    aux = Path(a.dataset).resolve().parent / ArmFiles.AUX_REWARDS
    if aux.exists():   # the same lines the dataset phase adds: static, then run on every row
        from driver.gates import aux_rewards

        report.lines += aux_rewards.check_with_rows(python, aux, weakness_json, Path(a.dataset)).lines
    print(json.dumps(report.to_json(), indent=2) if a.json else report.render())
    return 0 if report.passed else 1


def _run_python(run_dir) -> str:
    """The interpreter that loads the run's environments (its backend's), for `validate` inside
    a run directory; this one where the backend cannot be resolved here."""
    from driver.backends import resolve
    from driver.errors import DriverError
    from driver.run.rundir import RunDir

    try:
        st = RunDir(run_dir).load()
        return resolve(st.backend, st.prime_rl_dir).python
    except (DriverError, OSError, ValueError):
        return sys.executable
