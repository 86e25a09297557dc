"""Check the current dialect's rendered configs with prime-rl's own config classes.

    python tools/validate_against_prime_rl.py --python /path/to/prime-rl/.venv/bin/python

renders every config an arm launches with (iter_0's base + overlay + flags, an iteration that
forks iter_0, run B's two sources, the final-weights `evals` config) for the built-in
StockArithmetic-v1 taskset, then parses each in the given interpreter with
`prime_rl.utils.config.cli(RLConfig | EvalsConfig, ...)`, which needs prime-rl (or just its
prime-rl-configs package) and the stock_arithmetic package installed there. It also feeds the
configs the driver refuses for schema reasons and reports whether prime-rl rejects them too.
Prints one line per case and exits 1 if any verdict differs.

    python tools/validate_against_prime_rl.py --python PY --run-dir RUNS/stock_arithmetic-...

checks instead every config a finished current-dialect run launched with (iter_0's base +
overlay + flags, each arm's rl.toml, each evals.toml), its generated taskset packages put on
that interpreter's path from the run directory.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import tomli_w

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from driver.dialects import get  # noqa: E402
from driver.run.model import Knobs  # noqa: E402

_PARSE = r'''
import json, sys
from prime_rl.utils.config import cli
kind, args = sys.argv[1], sys.argv[2:]
if kind == "evals":
    from prime_rl.configs.evals import EvalsConfig as C
else:
    from prime_rl.configs.rl import RLConfig as C
try:
    c = cli(C, args=args)
except BaseException as e:
    print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}"}))
    sys.exit(0)
if kind == "evals":
    view = {"model": c.model, "sources": [[s.name, s.num_examples, s.env.taskset.model_dump(exclude={"task"})]
                                          for s in c.eval.source]}
else:
    o = c.orchestrator
    view = {"run_dir": str(o.output_dir), "max_steps": c.max_steps, "resume": str(c.resume),
            "broadcast": c.weight_broadcast.type if c.weight_broadcast else None,
            "sources": [[s.name, s.ratio, s.group_size, type(s.env.taskset).__name__,
                         s.env.agent.harness.id] for s in o.train.source]}
print(json.dumps({"ok": True, "view": view}, default=str))
'''

KNOBS = Knobs.for_backend("prime_rl", model="Qwen/Qwen3-0.6B", batch_size=512, rollouts_per_example=16, steps_per_run=30,
              eval_examples=200, lr=3e-6)
HUB = {"env_id": "stock-arithmetic", "env_args": {}, "eval_size": 200, "train_args": {"split": "train"},
       "eval_args": {"split": "test"}, "selection": {"size": 200, "args": {"split": "validation"}}}


def cases(tmp: Path) -> list[tuple[str, str, list[str], bool]]:
    """(name, kind, argv, driver accepts it)."""
    d = get("current")
    it0 = tmp / "iter_0" / "prime_out"
    (it0 / "run" / "checkpoints" / "step_30").mkdir(parents=True, exist_ok=True)
    files = {
        "base": d.render_base(HUB, KNOBS), "overlay": d.render_eval_overlay(HUB, KNOBS),
        "iter_1": d.render_run(arm="iter_1", purpose="fork iter_0", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS,
                               train_envs=[d.train_env_block("stock-arithmetic", {"split": "validation"})],
                               resume_step=30, resume_from=it0),
        "run_b": d.render_run(arm="run_b", purpose="two sources", hub=HUB, knobs=KNOBS, eval_knobs=KNOBS, resume_step=None,
                              train_envs=d.train_sources("stock-arithmetic", d.train_env_block(
                                  "stock-arithmetic", {"split": "train"}))),
        "evals": d.render_final_eval(HUB, KNOBS, it0 / "run" / "broadcasts" / "step_30", tmp / "fe"),
    }
    paths = {}
    for name, text in files.items():
        paths[name] = tmp / f"{name}.toml"
        paths[name].write_text(text)
    out = [("iter_0 = base + overlay + flags", "rl",
            ["@", str(paths["base"]), "@", str(paths["overlay"]), *d.iter0_overrides(KNOBS, it0)], True),
           ("iter_1 forks iter_0 by [resume] dir", "rl", ["@", str(paths["iter_1"]), "--output-dir", str(tmp / "i1")], True),
           ("run_b: two sources, ratios", "rl", ["@", str(paths["run_b"]), "--output-dir", str(tmp / "rb")], True),
           ("final-weights evals", "evals", ["@", str(paths["evals"])], True)]
    good = tomllib.loads(files["iter_1"])
    for name, mutate in [
        ("classic rollouts_per_example", lambda c: c["orchestrator"].update(rollouts_per_example=16)),
        ("classic [ckpt] resume_step", lambda c: c["ckpt"].update(resume_step=30)),
        ("classic [wandb]", lambda c: c.update(wandb={"project": "x"})),
        ("no [trainer]", lambda c: c.pop("trainer")),
        ("model outside the renderer map", lambda c: c["model"].update(name="Qwen/Qwen2.5-0.5B-Instruct")),
        ("batch_size not whole groups", lambda c: c["orchestrator"].update(batch_size=500)),
        ("[resume] step and dir", lambda c: c["resume"].update(step=30)),
    ]:
        cfg = json.loads(json.dumps(good))
        mutate(cfg)
        p = tmp / f"neg_{len(out)}.toml"
        p.write_text(tomli_w.dumps(cfg))
        out.append((name, "rl", ["@", str(p), "--output-dir", str(tmp / "neg")], False))
    return out


def run_cases(rd: Path) -> tuple[list[tuple[str, str, list[str], bool]], list[str]]:
    """The launches of a finished run (as the driver made them) and the generated packages'
    roots, which the validating interpreter needs on its path."""
    out, roots = [], []
    for arm in sorted(p for p in rd.iterdir() if p.is_dir()):
        roots += [str(pkg) for pkg in arm.iterdir() if (pkg / "pyproject.toml").exists()]
        if (arm / "base_rl.toml").exists():
            out.append((f"{arm.name}: base + overlay + flags", "rl",
                        ["@", str(arm / "base_rl.toml"), "@", str(arm / "eval_overlay.toml"),
                         "--output-dir", str(arm / "prime_out"), "--run.name", "run"], True))
        if (arm / "rl.toml").exists():
            out.append((f"{arm.name}: rl.toml", "rl",
                        ["@", str(arm / "rl.toml"), "--output-dir", str(arm / "prime_out")], True))
        if (arm / "evals.toml").exists():
            out.append((f"{arm.name}: evals.toml", "evals", ["@", str(arm / "evals.toml")], True))
    return out, roots


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", required=True, help="an interpreter with prime-rl's config classes and stock_arithmetic")
    ap.add_argument("--run-dir", type=Path, help="check a finished current-dialect run's own configs")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    d = get("current")
    results, differ = [], 0
    with tempfile.TemporaryDirectory() as t:
        todo, roots = run_cases(a.run_dir) if a.run_dir else (cases(Path(t)), [])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(roots)}
        for name, kind, argv, driver_ok in todo:
            if kind == "rl":
                try:
                    from rl_contract.composition import compose

                    d.check_effective(compose(argv))
                    ours = True
                except Exception:
                    ours = False
                assert ours == driver_ok, f"the driver's own verdict changed for {name!r}"
            r = subprocess.run([a.python, "-c", _PARSE, kind, *argv], capture_output=True, text=True,
                               cwd=t, env=env)
            try:
                theirs = json.loads(r.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                theirs = {"ok": False, "error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
            same = theirs["ok"] == driver_ok
            differ += not same
            results.append({"case": name, "driver_accepts": driver_ok, "prime_rl_accepts": theirs["ok"],
                            "agree": same, "detail": theirs.get("view") or theirs.get("error")})
    if a.json:
        print(json.dumps(results, indent=2, default=str))
    else:
        for x in results:
            print(f"{'agree ' if x['agree'] else 'DIFFER'}  driver {'accepts' if x['driver_accepts'] else 'refuses'}"
                  f" / prime-rl {'accepts' if x['prime_rl_accepts'] else 'rejects'}  {x['case']}: {x['detail']}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
