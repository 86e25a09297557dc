"""The built-in StockArithmetic-v1 ships a classic environment and a v1 taskset from one package;
both score every reply the same. Installing the project next to verifiers 0.4.0 (the
current generation's release, which has no classic API) leaves 0.4.0 in place, and the
taskset form loads and scores there exactly as under 0.3.1."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from taskset_scoring import ROUTER_REPLIES, REPLIES, score

ROOT = Path(__file__).resolve().parents[1]
SCORER = Path(__file__).with_name("taskset_scoring.py")


def _classic_scores(split: str, n: int) -> list:
    import stock_arithmetic
    from stock_arithmetic.classic import correct_final_stock, lenient_correct

    env = stock_arithmetic.load_environment(eval_split="test" if split == "train" else split)
    rows = (env.get_dataset() if split == "train" else env.get_eval_dataset()).select(range(n))
    out = []
    for i, row in enumerate(rows):
        for kind, make in REPLIES.items():
            completion = [{"role": "assistant", "content": make(row["answer"])}]
            strict = asyncio.run(correct_final_stock(completion, row["answer"], info=row["info"], state={}))
            loose = asyncio.run(lenient_correct(completion, row["answer"], info=row["info"], state={}))
            pop = row["info"]["population"]
            out.append([f"{split}:{i}", kind, strict, {"lenient_correct": loose,
                                                       "population_ID50": float(pop == "ID50"),
                                                       "population_OOD100": float(pop == "OOD100")}])
    return out


@pytest.mark.parametrize("split", ["train", "validation", "test", "selection"])
def test_the_taskset_scores_every_reply_as_the_classic_rubric_does(split):
    taskset = asyncio.run(score("stock-arithmetic", split, 12))
    assert taskset == _classic_scores(split, 12)
    assert {k for _, k, r, _ in taskset if r == 1.0} == {"strict", "think_then_strict"}


def test_the_router_taskset_scores_every_reply_as_the_classic_rubric_does():
    import model_router

    for split in ("train", "test"):
        env = model_router.load_environment()
        rows = (env.get_dataset() if split == "train" else env.get_eval_dataset()).select(range(10))
        classic = []
        for i, row in enumerate(rows):
            for kind, make in ROUTER_REPLIES.items():
                completion = [{"role": "assistant", "content": make(row["answer"])}]
                st = _state(row, completion)
                asyncio.run(env.rubric.score_rollout(st))
                classic.append([f"{split}:{i}", kind, float(st["reward"]), {}])
        assert asyncio.run(score("model-router", split, 10)) == classic
    kinds = {k: r for _, k, r, _ in asyncio.run(score("model-router", "test", 10))}
    assert set(kinds.values()) >= {1.0, 0.0, -1.0}


def _state(row, completion):
    """A classic rollout state for the rubric to score (score_rollout fills its reward)."""
    from verifiers.types import State

    st = State(input={"prompt": [{"role": "user", "content": row["question"]}], "answer": row["answer"],
                      "info": row["info"], "example_id": 0, "task": "default"})
    st["completion"], st["trajectory"] = completion, []
    return st


def test_the_test_split_holds_both_populations_and_keys_are_durable():
    rows = asyncio.run(score("stock-arithmetic", "test", 200))
    keys = [k for k, kind, _, _ in rows if kind == "strict"]
    assert len(keys) == len(set(keys)) == 200 and keys[0] == "test:0"
    pops = [m for _, kind, _, m in rows if kind == "strict"]
    assert sum(m["population_ID50"] for m in pops) == sum(m["population_OOD100"] for m in pops) == 100


def _verifiers_040_venv() -> Path:
    """A venv holding verifiers 0.4.0 and then this project and the built-in envs, installed
    the way a user of prime-rl's current generation would (kept in .venv-verifiers040)."""
    venv = ROOT / ".venv-verifiers040"
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    check = subprocess.run([str(py), "-c", "import verifiers; print(verifiers.__version__)"],
                           capture_output=True, text=True)
    if check.stdout.strip() != "0.4.0":
        subprocess.run([*pip, "verifiers==0.4.0"], check=True, timeout=900)
    # the project and the env with their dependencies resolved against what is there
    packages = [str(ROOT), *(str(ROOT / "environments" / e) for e in ("stock_arithmetic", "model_router"))]
    subprocess.run([*pip, "--force-reinstall", "--no-deps", *packages], check=True, timeout=900)
    subprocess.run([*pip, *packages], check=True, timeout=900)
    return py


@pytest.mark.extended
def test_installing_next_to_verifiers_040_keeps_it_and_the_taskset_loads_there():
    py = _verifiers_040_venv()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    probe = subprocess.run(
        [str(py), "-c", "import importlib.util, verifiers; print(verifiers.__version__, "
         "importlib.util.find_spec('verifiers.legacy') is None, hasattr(verifiers, 'SingleTurnEnv'))"],
        capture_output=True, text=True, env=env, cwd="/")
    assert probe.stdout.split() == ["0.4.0", "True", "False"], probe.stderr[-2000:]
    scored = subprocess.run([str(py), str(SCORER), "stock-arithmetic", "test", "12"],
                            capture_output=True, text=True, env=env, cwd="/", timeout=300)
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert json.loads(scored.stdout) == asyncio.run(score("stock-arithmetic", "test", 12))
    routed = subprocess.run([str(py), str(SCORER), "model-router", "test", "12"],
                            capture_output=True, text=True, env=env, cwd="/", timeout=300)
    assert routed.returncode == 0, routed.stderr[-3000:]
    assert json.loads(routed.stdout) == asyncio.run(score("model-router", "test", 12))
    # the driver itself runs there (it imports no verifiers)
    helped = subprocess.run([str(py), "-m", "driver.cli", "--help"], capture_output=True, text=True,
                            env=env, cwd="/", timeout=60)
    assert helped.returncode == 0 and "run" in helped.stdout, helped.stderr[-2000:]
    # the classic forms say what they need instead of failing somewhere deep
    for pkg in ("stock_arithmetic", "model_router"):
        classic = subprocess.run([str(py), "-c", f"import {pkg}; {pkg}.load_environment()"],
                                 capture_output=True, text=True, env=env, cwd="/", timeout=120)
        assert classic.returncode != 0 and "use the taskset form" in classic.stderr, classic.stderr[-2000:]
